"""The ios backend end to end on the CPU (thread-pool runtime), through harness.run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import ConfigError
from harness.job import run
from ios_core.models import build_model
from ios_core.schedule import Schedule

from .helpers import SMALL


def ios(bench_cfg, tmp_path, **over):
    return bench_cfg(**{"backend.name": "ios", "backend.store": str(tmp_path / "store"), "backend.progress": False,
                        **over})


@pytest.mark.parametrize("schedule", ["sequential", "greedy", "ios-merge", "ios-parallel", "ios-both"])
def test_every_schedule_runs_and_matches_the_reference(bench_cfg, tmp_path, schedule):
    rec = run(ios(bench_cfg, tmp_path, **{"backend.schedule": schedule, "backend.cost_model": "analytic"}),
              quiet=True)
    assert rec.status == "FINISHED", rec.error
    m = rec.metrics
    assert m["max_rel_error"] < 1e-4
    assert 0 < m["critical_path_ms"] <= m["sum_of_ops_ms"]
    sched = Schedule.from_dict(json.loads(rec.artifacts["schedule.json"]))
    assert sched.algorithm == schedule and sched.device == "cpu"
    path = Path(rec.params["schedule_path"])
    assert path.is_file() and path.is_relative_to(tmp_path / "store" / "schedules")


def test_what_ios_compiles_is_cached_in_the_store(bench_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "elsewhere")  # restored after the test (the run is inline here)
    rec = run(ios(bench_cfg, tmp_path, **{"backend.schedule": "greedy"}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "store" / "inductor")
    assert rec.metrics["plan_prepare_s"] >= 0 and rec.metrics["plan_schedule_s"] >= 0  # the phases are recorded


def test_measured_search_with_profile_and_cache(bench_cfg, tmp_path):
    cfg = ios(bench_cfg, tmp_path, **{"backend.schedule": "ios-both", "backend.profile": True,
                                      "backend.cost_model": "measured",
                                      "backend.number": 1, "backend.repeat": 1, "backend.warmup": 0})
    first = run(cfg, quiet=True)
    assert first.status == "FINISHED", first.error
    m = first.metrics
    assert m["search_measurements"] > 0 and m["search_states"] > 0
    prof = json.loads(first.artifacts["stage_latencies.json"])
    assert len(prof["stage_ms"]) == int(m["num_stages"]) and prof["spans"]
    assert first.artifacts["timeline.svg"].lstrip().startswith("<?xml")
    assert m["search_reused"] == 0 and m["predicted_insitu_ms"] > 0 and "prediction_error_pct" in m
    selection = json.loads(first.artifacts["selection.json"])["parts"]
    assert {"dp", "greedy", "sequential"} <= set(selection[0]["timings_ms"])
    second = run(cfg, quiet=True)  # the saved schedule is reused: no search at all
    assert second.metrics["search_reused"] == 1 and "search_states" not in second.metrics
    assert second.notes[0] == "schedule reused (backend.research=true searches again)"  # the plugin says so
    assert not any(n.startswith("schedule reused") for n in first.notes or [])
    assert second.artifacts["schedule.json"] == first.artifacts["schedule.json"]
    cfg["backend"]["research"] = True  # searched again: every stage comes from the cost cache
    third = run(cfg, quiet=True)
    assert third.metrics["search_measurements"] == 0 and third.metrics["search_cache_hit_rate"] == 1.0


def test_schedule_file_for_another_graph_fails_clearly(bench_cfg, tmp_path):
    g = build_model("squeezenet", **SMALL["squeezenet"])
    from ios_core.schedule import sequential
    p = tmp_path / "other.json"
    sequential(g).to_json(p)
    rec = run(ios(bench_cfg, tmp_path, **{"backend.schedule_file": str(p)}), quiet=True)
    assert rec.status == "FAILED"
    assert "made for graph 'squeezenet'" in rec.error and "backend.schedule_file" in rec.error


def test_schedule_file_runs_a_saved_schedule(bench_cfg, tmp_path):
    rec = run(ios(bench_cfg, tmp_path, **{"backend.schedule": "ios-both", "backend.cost_model": "analytic"}),
              quiet=True)
    again = run(ios(bench_cfg, tmp_path, **{"backend.schedule_file": rec.params["schedule_path"],
                                            "backend.bounds": False}), quiet=True)
    assert again.status == "FINISHED" and again.summary.split("|")[1].strip() == "Optimization: IOS-File"


@pytest.mark.parametrize("key,value,message", [("schedule", "ios-all", "backend.schedule='ios-all' is invalid"),
                                               ("runtime", "fast", "backend.runtime='fast' is invalid"),
                                               ("r", 0, "backend.r=0 must be >= 1")])
def test_bad_ios_config(bench_cfg, tmp_path, key, value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        run(ios(bench_cfg, tmp_path, **{f"backend.{key}": value}), quiet=True)


def test_cli_ios_run(tmp_path):
    out = subprocess.run([sys.executable, "-m", "harness", "model=sample", "backend=ios", "device=cpu",
                          "backend.cost_model=analytic", "runner=quick", "tracking=off",
                          f"tracking.results_dir={tmp_path}", f"backend.store={tmp_path}"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Optimization: IOS-Both" in out.stdout


def test_a_schedule_file_is_never_reused_as_a_search_result(bench_cfg, tmp_path):
    g = build_model("sample", **SMALL["sample"])
    from ios_core.schedule import greedy
    p = tmp_path / "greedy.json"
    greedy(g).to_json(p)
    run(ios(bench_cfg, tmp_path, **{"backend.schedule_file": str(p), "backend.bounds": False}), quiet=True)
    rec = run(ios(bench_cfg, tmp_path, **{"backend.cost_model": "analytic"}), quiet=True)
    assert rec.metrics["search_reused"] == 0 and rec.params["ios_final"]
    other = run(ios(bench_cfg, tmp_path, **{"backend.cost_model": "analytic", "backend.keep": 2}), quiet=True)
    assert other.metrics["search_reused"] == 0  # another setting: another saved schedule
    assert other.params["schedule_path"] != rec.params["schedule_path"]


def test_a_schedule_optimised_for_another_batch_runs_at_this_one(bench_cfg, tmp_path):
    """Specialization (paper experiment 4): search for batch 1, run at batch 3, reuse at batch 2."""
    cfg = ios(bench_cfg, tmp_path, **{"backend.cost_model": "analytic", "backend.opt_batch": 1, "batch": 3})
    rec = run(cfg, quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.label == "IOS-Both-opt1" and rec.metrics["max_rel_error"] < 1e-4
    path = Path(rec.params["schedule_path"])
    assert "-bs1-" in path.name and Schedule.from_dict(json.loads(rec.artifacts["schedule.json"])).batch == 1
    again = run(ios(bench_cfg, tmp_path, **{"backend.cost_model": "analytic", "backend.opt_batch": 1, "batch": 2}),
                quiet=True)
    assert again.metrics["search_reused"] == 1.0 and again.params["schedule_path"] == str(path)
