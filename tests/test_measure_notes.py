"""Why measuring stopped, and warnings for noisy or throttled samples, in the record and the summary."""

import harness
from harness.config import RunnerConfig
from harness.measure.protocol import notes_on

R = RunnerConfig(ci_rel_target=0.005, percentiles=[])  # the tails note has its own test


def test_notes_say_why_and_warn():
    assert notes_on({"latency_cv": 0.01, "latency_ci_rel_halfwidth": 0.004}, "ci", R) == []
    (stop,) = notes_on({"latency_cv": 0.01, "latency_ci_rel_halfwidth": 0.008}, "time", R)
    assert stop == ("stopped: runner.max_time_s was reached before the CI target (CI +-0.80%, target +-0.50%)")
    noisy = notes_on({"latency_cv": 0.25, "latency_ci_rel_halfwidth": 0.004}, "ci", R)
    assert noisy == ["noisy: CV 25.0%, CI +-0.40% of the median"]
    hot = notes_on({"throttled_samples_dropped": 3.0, "throttle_reasons_mask": 4.0}, "ci", R)
    assert hot == ["throttled: 3 samples dropped (reasons mask 4)"]


def test_a_time_capped_run_says_so(bench_cfg):
    # 2 s: enough samples for a CI (6) even on a loaded machine (an iteration of 64 ms left 5 in 0.3 s, a smoke test)
    rec = harness.run(bench_cfg(**{"runner.ci_rel_target": 0.0, "runner.max_time_s": 2.0}), quiet=True)
    assert rec.status == "FINISHED"
    assert rec.tags["stop_reason"] == "time" and rec.metrics["ci_target_met"] == 0.0
    assert "| stopped: runner.max_time_s was reached before the CI target" in rec.summary
    assert rec.notes[0].startswith("stopped: ")
    met = harness.run(bench_cfg(**{"runner.ci_rel_target": 1.0, "runner.min_iters": 16}), quiet=True)
    assert met.tags["stop_reason"] == "ci" and met.metrics["ci_target_met"] == 1.0


def test_python_api_composes_like_the_cli(tmp_path):
    """Presets by name, as on the command line (Hydra's compose API)."""
    import pytest

    from harness.config import ConfigError

    rec = harness.run(overrides=["model=sample", "runner=quick", "device=cpu", "tracking=off",
                                 "+model.params.channels=8", f"tracking.results_dir={tmp_path}"], quiet=True)
    assert rec.status == "FINISHED" and rec.config["runner"]["max_time_s"] == 1.0  # conf/runner/quick.yaml
    assert rec.config["model"]["params"] == {"channels": 8}
    with pytest.raises(ConfigError, match=r"^Could not find 'model/nope'; choose one of: inception_v3, "):
        harness.run(overrides=["model=nope"])
    with pytest.raises(ConfigError, match="either a config or overrides"):
        harness.run({"model": {"name": "sample"}}, overrides=["batch=2"])


def test_help_lists_groups_backend_options_and_flags():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for needle in ("--list-backends", "--debug", "python -m harness.report", "model: inception_v3, module, nasnet",
                   "experiment: autotvm, autotvm_quick", "backend=ios    IOS: the searched schedule",
                   "backend.schedule=ios-both", "sequential, greedy, ios-merge", "runner.profile_ops=False",
                   'eval "$(ios-harness -sc install=bash)"'):
        assert needle in text, needle
    assert "powered by Hydra" not in text


def test_percentiles_are_configurable_and_never_silently_absent(bench_cfg):
    import numpy as np
    import pytest

    from harness.config import ConfigError
    from harness.stats import Latency, min_samples

    s = Latency.of(np.arange(1, 201, dtype=float), 1, (50.0, 95.0, 99.0, 99.9)).metrics()
    assert s["latency_p50_ms"] == pytest.approx(100.5) and s["latency_p95_ms"] == pytest.approx(190.05)
    assert "latency_p99_ms" not in s and "latency_p99_9_ms" not in s
    assert (min_samples(90), min_samples(95), min_samples(99), min_samples(80)) == (64, 128, 662, 33)
    rec = harness.run(bench_cfg(**{"runner.percentiles": [50.0, 99.0], "runner.min_iters": 20,
                                    "runner.max_time_s": 60.0}), quiet=True)  # stops at 20 (CI target 100%)
    assert rec.metrics["samples"] >= 20, rec.metrics
    assert "latency_p50_ms" in rec.metrics and "latency_p99_ms" not in rec.metrics
    assert any(n.startswith("tails left out (") and n.endswith(" samples): p99 needs 662 (runner.min_iters=662 gets "
                                                               "them)") for n in rec.notes)
    with pytest.raises(ConfigError, match="runner.percentiles: 100.0 is not a percentile"):
        harness.run(bench_cfg(**{"runner.percentiles": [100.0]}), quiet=True)


def test_the_default_percentiles_need_no_more_than_the_default_iterations(bench_cfg):
    from harness.config import RunnerConfig
    from harness.stats import min_samples

    default = RunnerConfig()
    assert max(min_samples(p) for p in default.percentiles) <= default.min_iters
    rec = harness.run(bench_cfg(**{"runner.min_iters": default.min_iters, "runner.max_time_s": 60.0}), quiet=True)
    assert rec.status == "FINISHED" and "latency_p90_ms" in rec.metrics
    assert not any(n.startswith("tails left out") for n in rec.notes), rec.notes


def test_transfers_can_be_included_in_the_timed_region(bench_cfg):
    from tests.fake_backends import Counting

    for include in (False, True):
        Counting.calls.update(load=0, infer=0, to_numpy=0)
        rec = harness.run(bench_cfg(**{"backend.name": "test_counting", "runner.include_transfers": include}),
                          quiet=True)
        assert rec.status == "FINISHED" and rec.config["runner"]["include_transfers"] is include
        timed = rec.metrics["samples"]
        extra = Counting.calls["infer"] - timed  # the first call, warmup
        if include:  # every warmup and timed iteration copied the input in and the output out
            assert Counting.calls["load"] == 1 + extra + timed - 1 and Counting.calls["to_numpy"] >= timed
        else:
            assert Counting.calls["load"] == 1 and Counting.calls["to_numpy"] == 1
