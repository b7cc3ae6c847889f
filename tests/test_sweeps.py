"""Sweeps that survive: a rerun of the same command continues the sweep (finished jobs are
skipped, the rest measured), a killed sweep's parent run is closed, and the end-of-sweep
table shows every job with its speed-up over the baseline."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness
import harness.upload
from harness.multirun import sweep_table
from harness.records import background, sweeps

mlflow = pytest.importorskip("mlflow")

SWEEP = ["-m", "model=sample", "device=cpu", "runner=quick", "backend=pytorch,overhead", "batch=1,2"]


REPO = Path(__file__).resolve().parent.parent


def cli(tmp_path: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args, f"tracking.results_dir={tmp_path / 'r'}"],
                          capture_output=True, text=True, timeout=600, cwd=REPO, **kw)


def runs(tmp_path: Path) -> list:
    background.wait(tmp_path / "r")  # a sweep's end batch goes to MLflow from a detached upload
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'r' / 'mlflow.db'}")
    return client.search_runs([client.get_experiment_by_name("harness").experiment_id])


def test_sweep_identity_is_the_command():
    a = sweeps.sweep_identity(["batch=1,2", "backend=ios,pytorch"], "/x")
    assert a["sweep_id"] == sweeps.sweep_identity(["backend=ios,pytorch", "batch=1,2", "sweep.rerun=true"],
                                                  "/x")["sweep_id"]
    assert a["sweep_id"] != sweeps.sweep_identity(["batch=1,2,4", "backend=ios,pytorch"], "/x")["sweep_id"]
    assert a["sweep_id"] != sweeps.sweep_identity(["batch=1,2", "backend=ios,pytorch"], "/y")["sweep_id"]
    assert a["sweep_id"] != sweeps.sweep_identity(["batch=1,2", "backend=ios,pytorch"], "/x", "cuda:H100")["sweep_id"]
    assert a["sweep_name"] == "sweep backend=ios,pytorch batch=1,2"
    la = sweeps.sweep_identity(["batch=1,2", "backend=ios,pytorch"], "/x", "",
                               ["hydra/launcher=loadaware", "hydra.launcher.cpu_workers=2"])
    assert la["sweep_id"] == a["sweep_id"]  # resumed under another launcher: the same sweep
    assert la["sweep_command"] == ("python -m harness -m hydra/launcher=loadaware hydra.launcher.cpu_workers=2 "
                                   "batch=1,2 backend=ios,pytorch")


def test_job_key_ignores_where_results_go():
    plain = {"model": {"name": "sample"}, "batch": 1, "tracking": {"results_dir": "/a"}, "sweep": {"rerun": False}}
    other = {**plain, "tracking": {"results_dir": "/b"}, "sweep": {"rerun": True}}
    assert sweeps.job_key(plain) == sweeps.job_key(other)
    assert sweeps.job_key(plain) != sweeps.job_key({**plain, "batch": 2})


def test_a_job_is_reused_only_with_the_same_code_and_device(bench_cfg, tmp_path, monkeypatch, capsys):
    sweep = {"sweep_id": "s1", "sweep_name": "sweep t", "started": "t0"}
    first = harness.run(bench_cfg(), sweep=sweep)
    again = harness.run(bench_cfg(), sweep=sweep)
    assert again.run_id == first.run_id and again.skipped
    assert "skipped: sample PyTorch bs1 fp32 cpu finished earlier in this sweep" in capsys.readouterr().out
    forced = harness.run(bench_cfg(**{"sweep.rerun": True}), sweep=sweep, quiet=True)
    assert forced.run_id != first.run_id
    monkeypatch.setattr(sweeps, "code_version", lambda: "other+commit")
    assert harness.run(bench_cfg(), sweep=sweep, quiet=True).run_id != forced.run_id
    monkeypatch.undo()
    monkeypatch.setattr(sweeps, "current_device", lambda plain: "cpu:another cpu")
    assert not harness.run(bench_cfg(), sweep=sweep, quiet=True).skipped


def test_a_failed_job_is_measured_again(bench_cfg, tmp_path):
    sweep = {"sweep_id": "s2", "sweep_name": "sweep t"}
    failed = harness.run(bench_cfg(**{"backend.name": "test_raise"}), sweep=sweep, quiet=True)
    assert failed.status == "FAILED"
    again = harness.run(bench_cfg(**{"backend.name": "test_raise"}), sweep=sweep, quiet=True)
    assert again.run_id != failed.run_id


def test_table_shows_varying_overrides_and_speedup():
    entries = [
        {"record_id": "a", "job_num": 0, "status": "FINISHED", "latency_median_ms": 2.0, "memory_mb": 512.4,
         "energy_mj": 1.234, "overrides": ["model=m", "backend=pytorch", "batch=1"]},
        {"record_id": "b", "job_num": 1, "status": "FINISHED", "latency_median_ms": 0.5,
         "overrides": ["model=m", "backend=ios", "batch=1"], "reused_in": "t0"},
        {"record_id": "c", "job_num": 2, "status": "FAILED", "latency_median_ms": None, "error": "boom\nmore",
         "overrides": ["model=m", "backend=tvm", "batch=1"]},
    ]
    rows = sweep_table.table_rows(entries, "backend:pytorch", started="t0")
    assert rows[0] == ["0", "pytorch", "FINISHED", "2", "1.00x", "512 MB, 1.23 mJ", ""]  # peak memory, energy
    assert rows[1] == ["1", "ios", "FINISHED", "0.5", "4.00x", "-", "reused"]
    assert rows[2] == ["2", "tvm", "FAILED", "-", "-", "-", "boom"]
    assert sweeps.swept_keys(entries) == ["backend"]
    assert sweep_table.speedups(entries, "backend:pytorch") == {"a": 1.0, "b": 4.0}


def test_the_end_of_sweep_table_of_a_three_key_sweep_fits_100_columns():
    from rich.console import Console

    entries = [{"job_num": i, "status": "FAILED" if i == 3 else "FINISHED", "latency_median_ms": 1.0 + i,
                "error": "MissingDependency: backend 'tensorrt' needs tensorrt: pip install -e '.[tensorrt]' "
                         "--extra-index-url https://pypi.nvidia.com",
                "overrides": [f"model={m}", f"backend.channels_last={c}", f"batch={b}", "device=cuda"]}
               for i, (m, c, b) in enumerate([(m, c, b) for m in ("inception_v3", "nasnet")
                                              for c in ("auto", "true") for b in (1, 128)])]
    console = Console(width=sweep_table.TABLE_WIDTH, record=True, file=open(os.devnull, "w"))
    console.print(sweep_table.sweep_table({"sweep_name": "sweep x"}, "abc123", entries, "backend.channels_last:auto"))
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 100
    assert "job: model backend.channels_last batch" in text and "nasnet true 128" in text


def test_reap_ends_a_sweep_whose_process_died(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    info = {"sweep_id": "dead1", "sweep_name": "sweep d", "sweep_command": "python -m harness -m x=1,2"}
    state = sweeps.start(tmp_path, info, {"enabled": True, "uri": f"sqlite:///{tmp_path}/m.db",
                                          "experiment": "harness"})
    state["pid"] = dead.pid
    (sweeps.sweep_dir(tmp_path, "dead1") / "sweep.json").write_text(json.dumps(state))
    sweeps.start(tmp_path, {**info, "sweep_id": "alive1"}, {"enabled": False})  # this process: alive
    assert sweeps.reap(tmp_path) == ["dead1"]
    assert sweeps.read_state(tmp_path, "dead1")["status"] == "KILLED"
    assert sweeps.read_state(tmp_path, "alive1")["status"] == "RUNNING"
    assert sweeps.close_parents(tmp_path) == 1
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path}/m.db")
    (parent,) = client.search_runs([client.get_experiment_by_name("harness").experiment_id])
    assert parent.info.status == "KILLED" and parent.data.tags["harness.command"] == info["sweep_command"]


def test_a_sweep_killed_with_kill_9_resumes_where_it_stopped(tmp_path):
    """kill -9 after the first job: the rerun skips it, measures the other three, keeps one
    parent run with four children and closes it FINISHED."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", *SWEEP, f"tracking.results_dir={tmp_path / 'r'}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            start_new_session=True)
    deadline = time.time() + 240

    def recorded():  # jobs whose entry and record are both written (the entry comes first; the record waits in
        out = []     # pending/ for the batch the sweep's end sends to MLflow)
        for p in (tmp_path / "r" / "records" / "sweeps").glob("*/jobs/*.json"):
            with contextlib.suppress(ValueError, OSError):
                name = f"{json.loads(p.read_text())['record_id']}.json"
                if any((tmp_path / "r" / "records" / where / name).exists() for where in ("", "pending")):
                    out.append(p)
        return out

    while time.time() < deadline and not recorded():
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended before it could be killed: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    done = recorded()
    assert 1 <= len(done) < 4, "the sweep should have been killed part-way"
    (state,) = [json.loads(p.read_text()) for p in (tmp_path / "r" / "records" / "sweeps").glob("*/sweep.json")]
    assert state["status"] == "RUNNING"  # nobody could close it: the next attempt does

    res = cli(tmp_path, *SWEEP)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("skipped: ") == len(done)
    assert res.stdout.count("Model: sample") == 4 - len(done)
    assert "reused" in res.stdout and res.stdout.count("FINISHED") >= 4  # the end-of-sweep table
    all_runs = runs(tmp_path)
    parents = [r for r in all_runs if r.data.tags.get("harness.parent") == "true"]
    children = [r for r in all_runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 4
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert len({r.data.tags["harness.record_id"] for r in children}) == 4
    assert all(r.info.status == "FINISHED" for r in all_runs)
    assert parents[0].data.tags["harness.command"].startswith("python -m harness -m model=sample")


def test_a_sweep_logged_while_the_store_was_down_is_closed_by_upload(tmp_path):
    res = cli(tmp_path, "-m", "model=sample", "device=cpu", "runner=quick", "backend=overhead", "batch=1,2",
              "tracking.uri=http://127.0.0.1:9")
    assert res.returncode == 0, res.stderr[-2000:]
    (state,) = [json.loads(p.read_text()) for p in (tmp_path / "r" / "records" / "sweeps").glob("*/sweep.json")]
    assert state["status"] == "FINISHED" and not state["parent_closed"]
    uri = f"sqlite:///{tmp_path}/later.db"
    assert harness.upload.main(["--results-dir", str(tmp_path / "r"), "--uri", uri]) == 0
    client = mlflow.tracking.MlflowClient(uri)
    found = client.search_runs([client.get_experiment_by_name("harness").experiment_id])
    assert len(found) == 3 and all(r.info.status == "FINISHED" for r in found)


def test_a_reused_job_whose_record_was_never_delivered_is_delivered(bench_cfg, tmp_path, monkeypatch):
    """Killed while logging to MLflow: the rerun skips the job and completes its delivery."""
    from harness.records import tracking
    from harness.records.tracking import pending_records

    sweep = {"sweep_id": "s3", "sweep_name": "sweep t"}
    cfg = bench_cfg(**{"tracking.enabled": True})

    def down(self, record):
        raise ConnectionError("store down")
    monkeypatch.setattr(tracking.Tracker, "log", down)
    with pytest.warns(UserWarning, match="could not log"):
        first = harness.run(cfg, sweep=sweep, quiet=True)
    assert len(pending_records(tmp_path / "results")) == 1
    monkeypatch.undo()
    again = harness.run(cfg, sweep=sweep, quiet=True)
    assert again.run_id == first.run_id and again.skipped
    assert pending_records(tmp_path / "results") == []
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'results' / 'mlflow.db'}")
    found = client.search_runs([client.get_experiment_by_name("harness").experiment_id],
                               f"tags.`harness.record_id` = '{first.run_id}'")
    assert len(found) == 1 and found[0].info.status == "FINISHED"


def test_a_bad_value_in_one_combination_does_not_end_the_sweep(tmp_path):
    res = cli(tmp_path, "-m", "model=sample", "device=cpu", "runner=quick", "backend=overhead", "batch=0,1")
    assert res.returncode == 1, res.stderr[-2000:]
    assert "error: batch=0 is invalid" in res.stderr and "Model: sample" in res.stdout  # batch=1 still ran
    background.wait(tmp_path / "r")  # the end batch closes the parent run
    (state,) = [json.loads(p.read_text()) for p in (tmp_path / "r" / "records" / "sweeps").glob("*/sweep.json")]
    assert state["status"] == "FAILED" and state["parent_closed"]
    entries = sweeps.job_entries(tmp_path / "r", state["sweep_id"], state["started"])
    assert sorted(e["status"] for e in entries) == ["FAILED", "FINISHED"]
    assert "batch=0" in res.stdout and "FAILED" in res.stdout  # the end-of-sweep table


def test_resume_with_isolation_off_and_a_live_sweep_is_refused(bench_cfg, tmp_path):
    from harness.config import ConfigError

    sweep = {"sweep_id": "s4", "sweep_name": "sweep t"}
    cfg = bench_cfg(**{"backend.name": "ios", "backend.progress": False, "backend.cost_model": "analytic"})
    first = harness.run(cfg, sweep=sweep, quiet=True)  # isolate=false: measure must not change the config
    assert harness.run(cfg, sweep=sweep, quiet=True).run_id == first.run_id
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        info = {"sweep_id": "live1", "sweep_name": "sweep l"}
        state = sweeps.start(tmp_path, info, {"enabled": False})
        state["pid"] = live.pid
        (sweeps.sweep_dir(tmp_path, "live1") / "sweep.json").write_text(json.dumps(state))
        with pytest.raises(ConfigError, match=f"already running as process {live.pid}"):
            sweeps.start(tmp_path, info, {"enabled": False})
    finally:
        live.kill()


def test_upload_closes_a_sweep_left_running_on_another_machine_at_its_true_times(tmp_path):
    info = {"sweep_id": "gpu1", "sweep_name": "sweep g"}
    state = sweeps.start(tmp_path, info, {"enabled": True, "uri": "", "experiment": "harness"})
    state.update(host="the-lent-gpu", started="2026-11-20T10:00:00+00:00", first_started="2026-11-20T10:00:00+00:00")
    (sweeps.sweep_dir(tmp_path, "gpu1") / "sweep.json").write_text(json.dumps(state))
    last_job = {"record_id": "r1", "status": "FINISHED", "attempt": state["started"],
                "ended": "2026-11-20T10:07:30+00:00"}  # its last job ended 7.5 min in; the copy came home later
    (sweeps.sweep_dir(tmp_path, "gpu1") / "jobs").mkdir()
    (sweeps.sweep_dir(tmp_path, "gpu1") / "jobs" / "k1.json").write_text(json.dumps(last_job))
    assert sweeps.reap(tmp_path) == []  # another machine's process cannot be checked from here
    assert harness.upload.main(["--results-dir", str(tmp_path), "--no-close-stale"]) == 0  # asked to leave it
    assert sweeps.read_state(tmp_path, "gpu1")["status"] == "RUNNING"
    assert harness.upload.main(["--results-dir", str(tmp_path)]) == 0  # by default: the machine's process ended
    assert sweeps.read_state(tmp_path, "gpu1")["status"] == "KILLED"
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (parent,) = client.search_runs([client.get_experiment_by_name("harness").experiment_id])
    assert parent.info.status == "KILLED"
    assert parent.info.start_time == sweeps.iso_ms("2026-11-20T10:00:00+00:00")
    assert parent.info.end_time - parent.info.start_time == 450_000  # 7.5 min, not until the upload


def test_a_sweep_run_with_tracking_off_stays_out_of_mlflow_after_an_upload(tmp_path, capsys):
    info = {"sweep_id": "off1", "sweep_name": "sweep off", "sweep_command": "python -m harness -m x=1,2 tracking=off"}
    sweeps.start(tmp_path, info, {"enabled": False})
    sweeps.end(tmp_path, "off1", "FINISHED")
    uri = f"sqlite:///{tmp_path}/later.db"
    assert harness.upload.main(["--results-dir", str(tmp_path), "--uri", uri]) == 0
    assert "skipped 1 sweep(s) run with tracking=off (no MLflow for them)" in capsys.readouterr().out
    client = mlflow.tracking.MlflowClient(uri)
    exp = client.get_experiment_by_name("harness")
    assert exp is None or client.search_runs([exp.experiment_id]) == []


def test_a_second_copy_of_a_running_sweep_exits_2_before_any_job(tmp_path):
    args = ("-m", "model=sample", "device=cpu", "runner=quick", "backend=overhead", "batch=1,2", "tracking=off")
    first = cli(tmp_path, *args)
    assert first.returncode == 0, first.stderr[-2000:]
    (path,) = (tmp_path / "r" / "records" / "sweeps").glob("*/sweep.json")
    state = json.loads(path.read_text())
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # the sweep is marked running in another live process on this host
        path.write_text(json.dumps({**state, "status": "RUNNING", "pid": alive.pid}))
        jobs = sorted((tmp_path / "r" / "records").glob("*.json"))
        second = cli(tmp_path, *args)
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"error: this sweep ({state['sweep_id']}) is already running as process {alive.pid}" in second.stderr
        assert sorted((tmp_path / "r" / "records").glob("*.json")) == jobs  # nothing measured
        assert json.loads(path.read_text())["pid"] == alive.pid  # the running sweep's state untouched
    finally:
        alive.kill()
        alive.wait()


def test_the_table_shows_each_medians_ci_flags_and_marks_a_shaky_speedup():
    """Issue 27 item 1: noise stays visible. onnxruntime at 8.77x from a job whose own line said
    CV 91% showed an empty note; now the flag, the CI and a '?' on the speed-up say so."""
    def entry(backend, lat, ci, flags=()):
        return {"record_id": backend, "status": "FINISHED", "latency_median_ms": lat, "ci_rel": ci,
                "flags": list(flags), "overrides": ["model=m", f"backend={backend}"]}

    entries = [entry("pytorch", 8.77, 0.004), entry("onnxruntime", 1.0, 0.49, ["noisy", "capped"]),
               entry("ios", 4.0, 0.005), entry("tvm", 8.74, 0.004)]
    rows = sweep_table.table_rows(entries, "backend:pytorch")
    assert rows[0][3:] == ["8.77 ±0.4%", "1.00x", "-", ""]
    assert rows[1][3:] == ["1 ±49.0%", "8.77x?", "-", "noisy, capped"]  # noisy: marked
    assert rows[2][3:] == ["4 ±0.5%", "2.19x", "-", ""]  # far outside both CIs: significant
    assert rows[3][4] == "1.00x?"  # 0.3% apart with CIs of 0.4% each: within the noise
    smoke = [entry("pytorch", 8.77, None, ["smoke"]), entry("onnxruntime", 0.0341, 0.33, ["noisy"])]
    assert sweep_table.table_rows(smoke, "backend:pytorch")[1][4] == "smoke"  # a 3-sample baseline: no 257x
    from rich.console import Console

    console = Console(width=sweep_table.TABLE_WIDTH, record=True, file=open(os.devnull, "w"))
    console.print(sweep_table.sweep_table({"sweep_name": "s"}, "abc", entries, "backend:pytorch"))
    assert "?: a speed-up within the CIs or from a noisy job" in console.export_text()
