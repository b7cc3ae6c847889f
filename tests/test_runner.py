import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import harness
from harness.job import summary_line
from harness.plugins import backend_table, backends
from harness.records import background

REPO = Path(__file__).resolve().parent.parent


def cli(*args, cwd=REPO, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def test_summary_line_format():
    line = summary_line("inception_v3", "IOS-Both", 1, 48.2, 3.94)
    assert line == ("Model: inception_v3 | Optimization: IOS-Both        | Batchsize: 1   | "
                    "Optimization cost: 48 sec   | Latency: 3.94 ms   ")
    assert "| Optimization cost: 0.43 sec | " in summary_line("sample", "PyTorch", 1, 0.432, 1.0)


def test_plugin_discovery_through_entry_points():
    found = backends()
    assert {"pytorch", "overhead"} <= set(found)
    assert found["pytorch"].__module__.startswith("harness_plugins.pytorch")
    rows = {r[0]: r for r in backend_table()}
    assert rows["pytorch"][2] == "ready (cpu)"
    assert rows["test_missing"][2] == "not installed: needs surely_not_a_module_xyz"


def test_list_backends_says_ready_only_when_a_run_could_start(monkeypatch, tmp_path):
    """tvm_cudnn: no GPU here; with a GPU, ready once its cuDNN library is built for this TVM."""
    pytest.importorskip("tvm")
    from harness import plugins

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))  # nothing built there

    monkeypatch.setattr(plugins, "available_devices", lambda: ["cpu"])
    rows = {r[0]: r for r in plugins.backend_table()}
    assert rows["tvm_cudnn"][2] == "no device: runs on cuda; this machine has cpu"
    monkeypatch.setattr(plugins, "available_devices", lambda: ["cpu", "cuda"])
    rows = {r[0]: r for r in plugins.backend_table()}
    assert rows["tvm_cudnn"][2].startswith("not ready: TVM's cuDNN functions are not built for this TVM")
    assert "`python -m harness_plugins.tvm.build_cudnn`" in rows["tvm_cudnn"][2]
    assert rows["pytorch"][2] == "ready (cpu, cuda)"
    assert "MetaSchedule" in rows["autotvm"][5]  # the name users type; what it runs said plainly
    assert rows["tvm_cudnn"][4] == "H100 80GB HBM3, 2026-11-25" and rows["taso"][4] == "fakes only"
    assert "build_cudnn" in rows["tvm_cudnn"][3] and "pypi.nvidia.com" in rows["tensorrt"][3]


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_pytorch_end_to_end(bench_cfg, mode):
    rec = harness.run(bench_cfg(**{"backend.mode": mode}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    m = rec.metrics
    assert m["max_rel_error"] < 1e-5
    assert m["samples"] >= 5 and m["latency_median_ms"] > 0
    assert m["latency_min_ms"] <= m["latency_median_ms"] <= m["latency_max_ms"]
    assert rec.summary.startswith("Model: sample       | Optimization: " +
                                     ("PyTorch " if mode == "eager" else "TorchCompile "))
    assert rec.tags["device"] == "cpu" and rec.tags["git_commit"]
    saved = json.loads(next((Path(rec.config["tracking"]["results_dir"]) / "records").glob("*.json"))
                       .read_text())
    assert saved["run_id"] == rec.run_id and len(saved["latencies_ms"]) == m["samples"]


@pytest.mark.parametrize("precision,tol", [("fp32", 1e-5), ("bf16", 8e-2)])
def test_pytorch_precisions_and_channels_last(bench_cfg, precision, tol):
    rec = harness.run(bench_cfg(precision=precision, **{"backend.channels_last": True}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < tol


def test_cudagraph_mode_needs_cuda(bench_cfg):
    rec = harness.run(bench_cfg(**{"backend.mode": "cudagraph"}), quiet=True)
    assert rec.status == "FAILED"
    assert "mode=cudagraph needs device=cuda" in rec.error


def test_null_backend_measures_overhead(bench_cfg):
    rec = harness.run(bench_cfg(**{"backend.name": "null"}), quiet=True)
    assert rec.status == "FINISHED"
    assert rec.metrics["latency_median_ms"] < 1.0


def test_wrong_output_fails_the_run(bench_cfg):
    rec = harness.run(bench_cfg(**{"backend.name": "test_wrong"}), quiet=True)
    assert rec.status == "FAILED"
    assert "output mismatch: relative error" in rec.error and "fp32 tolerance 0.0001" in rec.error


def test_missing_dependency_names_the_extra(bench_cfg):
    rec = harness.run(bench_cfg(**{"backend.name": "test_missing"}), quiet=True)
    assert rec.status == "FAILED"
    assert "backend 'test_missing' needs surely_not_a_module_xyz, which is not installed: " \
           "pip install -e '.[tvm]'" in rec.error


def test_no_gpu_is_refused_before_any_work(bench_cfg, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from harness.config import ConfigError
    with pytest.raises(ConfigError, match="device=cuda was asked for but no CUDA GPU is available"):
        harness.run(bench_cfg(**{"device.type": "cuda"}), quiet=True)
    assert not (tmp_path / "results" / "records").exists()  # nothing started, nothing recorded


@pytest.mark.parametrize("backend,message", [
    ("test_crash", "the measuring process died with SIGSEGV"),
    ("test_raise", "RuntimeError: kaboom in prepare"),
    ("test_hang", "timed out after 8 s"),
])
def test_isolation(bench_cfg, backend, message):
    cfg = bench_cfg(**{"backend.name": backend, "runner.isolate": True, "runner.timeout_s": 8})
    rec = harness.run(cfg, quiet=True)
    assert rec.status == "FAILED"
    assert message in rec.error


def test_a_timeout_ends_every_process_the_run_started(bench_cfg, tmp_path, monkeypatch):
    """The measuring child leads its own process group; a timeout kills the group, so a worker it started (a
    compile pool, a tuning build) does not outlive the run."""
    import psutil

    pid_file = tmp_path / "worker.pid"
    monkeypatch.setenv("TEST_WORKER_PID_FILE", str(pid_file))
    rec = harness.run(bench_cfg(**{"backend.name": "test_hang_worker", "runner.isolate": True,
                                   "runner.timeout_s": 8}), quiet=True)
    assert rec.status == "FAILED" and "timed out after 8 s" in rec.error
    worker = int(pid_file.read_text())
    deadline = time.time() + 5
    while psutil.pid_exists(worker) and psutil.Process(worker).status() != psutil.STATUS_ZOMBIE:
        assert time.time() < deadline, "the worker outlived its run"
        time.sleep(0.1)


def test_isolated_success_returns_metrics(bench_cfg):
    rec = harness.run(bench_cfg(**{"runner.isolate": True}), quiet=True)
    assert rec.status == "FINISHED" and rec.metrics["samples"] >= 5


def test_the_parent_names_a_run_without_building_its_backend(bench_cfg, monkeypatch):
    """The backend is built once, in the measuring child (issue 28): the parent names the run
    from the typed config alone (``Backend.label_of``), so a backend whose constructor could not
    run in the parent still gets its variant's name."""
    from harness.backend import Backend

    def refuse(self, cfg):
        raise AssertionError("a backend was built in the parent")

    monkeypatch.setattr(Backend, "__init__", refuse)
    rec = harness.run(bench_cfg(**{"runner.isolate": True, "backend.mode": "eager"}), quiet=True)
    assert rec.status == "FINISHED" and rec.label == "PyTorch" and rec.run_name.startswith("sample PyTorch bs1 ")


def test_a_variant_is_named_by_its_config():
    from harness_plugins.ios.backend import IosBackend
    from harness_plugins.ios.config import IosConfig
    from harness_plugins.pytorch.backend import PyTorchBackend
    from harness_plugins.pytorch.config import PyTorchConfig
    from harness_plugins.tensorrt.backend import TensorRTBackend
    from harness_plugins.tensorrt.config import TensorRTConfig
    from harness_plugins.tvm.backend import TvmCudnnBackend
    from harness_plugins.tvm.config import TvmCudnnConfig

    assert IosBackend.label_of(IosConfig(schedule="greedy", opt_batch=16)) == "Greedy-opt16"
    assert IosBackend.label_of(IosConfig(schedule_file="s.json")) == "IOS-File"
    assert PyTorchBackend.label_of(PyTorchConfig(mode="compile", compile_mode="max-autotune")) == "TorchCompile-MA"
    assert TensorRTBackend.label_of(TensorRTConfig(cuda_graph=True)) == "TensorRT-CUDAGraph"
    assert TvmCudnnBackend.label_of(TvmCudnnConfig()) == "TVM-cuDNN"


@pytest.mark.parametrize("args,rc,message", [
    (["batch=0"], 2, "error: batch=0 is invalid: the batch size must be a positive integer"),
    (["batch=abc"], 2, "error: Error merging override batch=abc: Value 'abc' of type 'str' could not be converted "
                       "to Integer (--debug for the full traceback)"),
    (["model=vgg"], 2, "error: Could not find 'model/vgg'; choose one of: inception_v3, module, nasnet, onnx, "
                       "randwire"),
    (["backend=nope"], 2, "error: Could not find 'backend/nope'; choose one of: "),
    (["backend.mdoe=x"], 2, "Key 'mdoe' not in 'PyTorchConfig'"),
    (["+backend.mdoe=x"], 2, "error: backend.mdoe is not an option of backend 'pytorch'; its options: "),
    (["precision=fp8"], 2, "Invalid value 'fp8', expected one of [fp32, tf32, fp16, bf16]"),
    (["+model.params.image_size=abc"], 2, "error: model 'squeezenet': parameter image_size='abc' must be int"),
    (["device.clock=fast"], 2, "device.clock='fast' is invalid"),
])
def test_cli_config_errors(args, rc, message):
    res = cli(*args)
    assert res.returncode == rc
    assert message in res.stderr + res.stdout
    assert "Traceback" not in res.stderr
    assert len([x for x in res.stderr.splitlines() if x.strip()]) == 1  # one line, not Hydra's report


def test_cli_list_backends():
    res = cli("--list-backends")
    assert res.returncode == 0 and "pytorch" in res.stdout and "cpu,cuda" in res.stdout


def test_cli_multirun_logs_children_under_one_parent(tmp_path):
    pytest.importorskip("mlflow")
    res = cli("-m", "batch=1,2", "model=sample", "+model.params.channels=4", "+model.params.size=5",
              "runner=quick", "device=cpu", f"tracking.results_dir={tmp_path}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Model: sample") == 2
    assert background.wait(tmp_path) == []  # the end batch went to the store from a detached upload
    from mlflow.tracking import MlflowClient
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("harness")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("harness.parent") == "true"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert sorted(r.data.params["batch"] for r in children) == ["1", "2"]
    assert all(r.data.metrics["latency_median_ms"] > 0 for r in children)
    assert all(r.info.status == "FINISHED" for r in children)
    assert not list((tmp_path / "records" / "pending").glob("*.json"))
    assert np.isfinite([r.data.metrics["run/max_rel_error"] for r in children]).all()


def test_a_preset_name_in_a_dict_config_fails_in_one_line():
    from harness.config import ConfigError

    with pytest.raises(ConfigError) as err:
        harness.run({"model": {"name": "sample"}, "runner": "quick"}, quiet=True)
    assert str(err.value) == ("runner=quick: a config group in a dict takes its values, not a preset name; for "
                              "presets use harness.run(overrides=['runner=quick', ...])")


def test_a_run_prints_its_statistics_throughput_and_record_path(bench_cfg, capsys):
    import re
    from pathlib import Path

    rec = harness.run(bench_cfg(**{"runner.percentiles": [50.0, 90.0], "runner.min_iters": 64,
                                   "runner.max_time_s": 30}))
    out = capsys.readouterr().out.splitlines()
    summary, stats = out[-2], out[-1]
    assert summary.startswith("Model: sample")
    m = rec.metrics
    assert stats.startswith(f"  latency ms: min {m['latency_min_ms']:.4g}, mean {m['latency_mean_ms']:.4g}, "
                            f"median {m['latency_median_ms']:.4g}, p90 {m['latency_p90_ms']:.4g} "
                            f"({int(m['samples'])} samples, CI +-")
    assert f"| {m['throughput_ips']:.4g} images/s | record " in stats and "p50" not in stats
    path = Path(re.search(r"record (\S+)$", stats).group(1))
    assert path.is_file() and path.stem == rec.run_id


def test_processes_measure_the_job_in_fresh_processes_and_report_the_spread_between_them(bench_cfg):
    """runner.processes=N (issue 39): N measuring children; the headline is the median of their medians and the
    CI is the one between processes (Student's t on their mean), the within-process CI kept apart."""
    from harness.stats import between_processes

    rec = harness.run(bench_cfg(**{"runner.processes": 3, "runner.isolate": True}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    medians = [float(v) for v in rec.params["process_medians_ms"].split(",")]
    m = rec.metrics
    assert len(medians) == 3 and m["processes"] == 3.0
    assert m["latency_median_ms"] == pytest.approx(np.median(medians), rel=1e-4)
    assert m["latency_ci_rel_halfwidth"] == pytest.approx(between_processes(medians)["latency_ci_rel_halfwidth"],
                                                          rel=1e-3)
    assert "latency_within_ci_rel_halfwidth" in m and m["samples"] >= 3 * 5
    assert any(n.startswith("median of 3 processes") for n in rec.notes)
    assert between_processes([1.0, 1.0, 1.3])["latency_ci_rel_halfwidth"] == pytest.approx(
        4.303 * np.std([1.0, 1.0, 1.3], ddof=1) / np.sqrt(3), rel=1e-3)  # Student's t, 2 degrees of freedom


@pytest.mark.parametrize("medians, noisy", [([1.00, 1.001, 0.999], False), ([1.0, 1.2, 0.8], True)])
def test_the_noise_verdict_of_several_processes_is_on_their_medians(medians, noisy):
    """The first process's own "noisy" note is not the headline's: the combined record judges the medians."""
    from harness.config import RunnerConfig
    from harness.measure.repeats import combine
    from harness.records.record import Measurement

    def one(median: float, notes: list[str]) -> Measurement:
        samples = [median * f for f in (0.7, 1.0, 1.0, 1.0, 1.3)]
        metrics = {"latency_median_ms": median, "latency_ci_rel_halfwidth": 0.2, "optimization_cost_s": 1.0}
        return Measurement(metrics=metrics, env={"noisy": "true" if notes else "false"}, params={}, artifacts={},
                           notes=notes, latencies_ms=samples, gpu_latencies_ms=[], device="cpu", display_name="x",
                           graph_hash="")

    first = one(medians[0], ["noisy: CV 20.0%, CI +-20.00% of the median"])
    last = one(medians[-1], [])
    last.metrics.update(optimization_cost_s=0.25, plan_schedule_s=0.125, search_reused=1.0)
    first.metrics.update(memory_peak_mb=120.0, memory_peak_call_mb=120.0)  # JAX's headline source, kept
    last.metrics.update(memory_peak_mb=130.0, memory_peak_call_mb=130.0)
    m = combine([first, *(one(v, []) for v in medians[1:-1]), last], 1, RunnerConfig())
    assert m.metrics["memory_peak_mb"] == m.metrics["memory_peak_call_mb"] == 130.0
    # the first process's (cold) preparation is the headline's; the last one's (warm) is kept beside it
    assert m.metrics["optimization_cost_s"] == 1.0 and m.metrics["optimization_cost_last_s"] == 0.25
    assert m.metrics["plan_schedule_last_s"] == 0.125 and m.metrics["search_reused_last"] == 1.0
    assert not any(n.startswith("noisy: ") for n in m.notes)
    assert any(n.startswith("noisy between processes: ") for n in m.notes) == noisy
    assert m.env["noisy"] == str(noisy).lower()


@pytest.mark.parametrize("over, message", [({"runner.processes": 0}, "runner.processes=0 must be >= 1"),
                                           ({"runner.processes": 2, "runner.isolate": False},
                                            "runner.processes=2 measures in fresh processes: it needs "
                                            "runner.isolate=true")])
def test_processes_out_of_range_are_refused(bench_cfg, over, message):
    from harness.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        harness.run(bench_cfg(**over), quiet=True)


def test_a_reaped_childs_number_is_never_signalled_as_a_group(monkeypatch):
    """Once the measuring child is reaped its number is free: on a machine whose process ids wrap, a new
    session's leader (a SLURM job's task) got it and was killed by the group kill of a finished run."""
    import multiprocessing as mp
    import os

    from harness.measure import isolation

    proc = mp.get_context("spawn").Process(target=os.getpid)
    proc.start()
    isolation.settle(proc, 60)  # exits, its group is ended while it is a zombie, then reaped
    assert proc.exitcode == 0
    groups = []
    monkeypatch.setattr(isolation.os, "killpg", lambda pid, sig: groups.append(pid))
    isolation.end_group(proc)
    assert groups == []


def test_back_to_back_calls_time_the_work_per_call_without_a_sync_between(monkeypatch):
    """The GPU work of one call with the host's time hidden (issue 56 item 8): calls queued back to back between two
    events, divided by their number, the median of three rounds; here with events that read the host's clock."""
    import time

    import torch

    from harness.backend import Prepared
    from harness.measure import protocol

    class Event:
        def __init__(self, enable_timing):
            self.t = 0.0

        def record(self, stream=None):
            self.t = time.perf_counter()

        def elapsed_time(self, end):
            return (end.t - self.t) * 1e3

    monkeypatch.setattr(torch.cuda, "Event", Event)
    calls, syncs = [], []
    prep = Prepared(infer=lambda h: (calls.append(h), time.sleep(0.002)), synchronize=lambda: syncs.append(1),
                    to_numpy=lambda y: y, load_input=lambda x: x, cuda_stream=object())
    ms = protocol._back_to_back(prep, "handle", median_ms=2.5)
    assert len(calls) == 3 * 40 and set(calls) == {"handle"}  # 0.1 s of 2.5 ms calls per round
    assert len(syncs) == 6 and 2.0 <= ms < 3.0, ms  # a sync before and after each round, none between calls
    assert protocol._back_to_back(prep, None, median_ms=0.0001) > 0
    assert len(calls) == 120 + 3 * 200  # at most 200 calls a round
