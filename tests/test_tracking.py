import json
import shutil
import socket
import subprocess
import sys
from datetime import datetime

import pytest

import harness
import harness.upload
from harness.records import background, tracking
from harness.records.tracking import flatten, pending_records

mlflow = pytest.importorskip("mlflow")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_flatten_dotted():
    assert flatten({"a": {"b": 1, "c": {"d": "x"}}, "e": [1, 2]}) == {"a.b": "1", "a.c.d": "x", "e": "[1, 2]"}


def test_local_store_gets_params_metrics_tags_artifacts(bench_cfg, tmp_path):
    rec = harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True)
    assert rec.status == "FINISHED" and rec.mlflow_run_id
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path}/results/mlflow.db")
    run = client.get_run(rec.mlflow_run_id)
    assert run.data.params["model.name"] == "sample" and run.data.params["backend.mode"] == "eager"
    assert run.data.metrics["latency_median_ms"] == pytest.approx(rec.metrics["latency_median_ms"])
    assert "optimization_cost_s" in run.data.metrics and "run/max_rel_error" in run.data.metrics
    assert run.data.metrics["latency/latency_mean_ms"] == pytest.approx(rec.metrics["latency_mean_ms"])
    ungrouped = {k for k in run.data.metrics if "/" not in k}  # the few that a reader compares come first
    assert ungrouped <= set(tracking.KEY_METRICS) and {"latency_median_ms", "throughput_ips"} <= ungrouped
    assert run.data.tags["device"] == "cpu" and "git_commit" in run.data.tags and "torch" in run.data.tags
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"record.json", "config.json", "env.json", "latencies_ms.json", "latency_histogram.png"} <= names
    assert not pending_records(tmp_path / "results")
    # reads at a glance: the variant in the name, real times, the summary line as the description
    assert run.info.run_name == "sample PyTorch bs1 fp32 cpu"
    created, ended = (datetime.fromisoformat(t).timestamp() * 1000 for t in (rec.created, rec.ended))
    assert run.info.start_time == int(created) and run.info.end_time == int(ended) and ended > created
    assert run.data.tags["mlflow.note.content"] == rec.summary
    assert run.data.tags["mlflow.source.name"] == "python -m harness" and run.data.tags["mlflow.user"]
    assert [e.name for e in client.search_experiments()] == ["harness"]  # no empty "Default"


def test_server_down_keeps_record_then_upload(bench_cfg, tmp_path):
    port = free_port()  # nothing listens here
    cfg = bench_cfg(**{"tracking.enabled": True, "tracking.uri": f"http://127.0.0.1:{port}"})
    with pytest.warns(UserWarning, match="could not log to MLflow"):
        rec = harness.run(cfg, quiet=True)
    assert rec.status == "FINISHED"
    pending = pending_records(tmp_path / "results")
    assert [p.stem for p in pending] == [rec.run_id]
    saved = json.loads(pending[0].read_text())
    assert saved["metrics"]["latency_median_ms"] == rec.metrics["latency_median_ms"]
    # later, from a machine that reaches a store: upload to a local sqlite store
    uri = f"sqlite:///{tmp_path}/later.db"
    res = subprocess.run([sys.executable, "-m", "harness.upload", "--results-dir", str(tmp_path / "results"),
                          "--uri", uri], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "uploaded 1 of 1 pending record(s)" in res.stdout
    assert not pending_records(tmp_path / "results")
    client = mlflow.tracking.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("harness").experiment_id])
    assert len(runs) == 1 and runs[0].data.tags["harness.record_id"] == rec.run_id


def test_records_copied_home_go_to_the_store_beside_them(bench_cfg, tmp_path, monkeypatch):
    """A GPU machine without MLflow keeps its records; copied to another folder (another path), they
    upload into that folder's store, not to a path of the machine they were made on."""
    monkeypatch.setattr(tracking, "mlflow_available", lambda: False)
    with pytest.warns(UserWarning, match="MLflow is not installed"):
        rec = harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True)
    home = tmp_path / "home"
    shutil.copytree(tmp_path / "results" / "records", home / "records")
    old = home / "records" / "pending" / f"{rec.run_id}.json"  # as records before this release had it
    saved = json.loads(old.read_text())
    saved["tracking"]["uri"] = tracking.default_uri(tmp_path / "results")
    old.write_text(json.dumps(saved))
    monkeypatch.undo()
    assert harness.upload.main(["--results-dir", str(home)]) == 0
    client = mlflow.tracking.MlflowClient(tracking.default_uri(home))
    (run,) = client.search_runs([client.get_experiment_by_name("harness").experiment_id])
    assert run.data.tags["harness.record_id"] == rec.run_id
    assert not (tmp_path / "results" / "mlflow.db").exists()


def test_mlflow_keys_group_all_but_the_key_metrics():
    assert tracking.mlflow_metric_key("latency_p99_ms") == "latency_p99_ms"
    assert tracking.mlflow_metric_key("gpu_latency_median_ms") == "latency/gpu_latency_median_ms"
    assert tracking.mlflow_metric_key("search_whole_greedy_ms") == "schedule/search_whole_greedy_ms"
    assert tracking.mlflow_metric_key("sm_clock_min_mhz") == "device/sm_clock_min_mhz"
    assert tracking.mlflow_metric_key("max_rel_error") == "run/max_rel_error"


def test_without_mlflow_the_run_completes(bench_cfg, tmp_path, monkeypatch):
    monkeypatch.setattr(tracking, "mlflow_available", lambda: False)
    with pytest.warns(UserWarning, match="MLflow is not installed"):
        rec = harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True)
    assert rec.status == "FINISHED"
    assert len(pending_records(tmp_path / "results")) == 1


def test_sweep_records_get_a_parent_on_upload(bench_cfg, tmp_path):
    cfg = bench_cfg(**{"tracking.enabled": True, "tracking.uri": f"http://127.0.0.1:{free_port()}"})
    sweep = {"sweep_id": "abc123", "sweep_name": "sweep test"}
    with pytest.warns(UserWarning):
        for batch in (1, 2):
            cfg["batch"] = batch
            harness.run(cfg, sweep=sweep, quiet=True)
    uri = f"sqlite:///{tmp_path}/later.db"
    assert harness.upload.main(["--results-dir", str(tmp_path / "results"), "--uri", uri]) == 0
    client = mlflow.tracking.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("harness").experiment_id])
    parents = [r for r in runs if r.data.tags.get("harness.parent") == "true"]
    assert len(parents) == 1 and len(runs) == 3


def test_delivering_a_record_twice_keeps_one_run(bench_cfg, tmp_path):
    from harness.records.tracking import Tracker, default_uri

    rec = harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True)
    uri = default_uri(tmp_path / "results")
    again = Tracker(uri, rec.tracking["experiment"]).log(rec)  # a retry after a half-done upload
    assert again == rec.mlflow_run_id
    client = mlflow.tracking.MlflowClient(uri)
    exp = client.get_experiment_by_name(rec.tracking["experiment"])
    runs = client.search_runs([exp.experiment_id], f"tags.`harness.record_id` = '{rec.run_id}'")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"


def test_an_interrupted_sweep_closes_its_parent_run(tmp_path):
    from harness.records import sweeps
    from harness.records.tracking import Tracker, default_uri

    tracking = {"enabled": True, "uri": default_uri(tmp_path), "experiment": "harness", "sweep_id": "abc123",
                "sweep_name": "sweep x"}
    t = Tracker(tracking["uri"], "harness")
    parent = t.parent_run("abc123", "sweep x")
    assert t.client.get_run(parent).info.status == "RUNNING"
    sweeps.close(tmp_path, tracking, "KILLED")
    assert t.client.get_run(parent).info.status == "KILLED"
    assert sweeps.read_state(tmp_path, "abc123")["status"] == "KILLED"


def test_two_first_runs_on_a_new_store_both_log(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from harness.records.tracking import Tracker; "
            "t = Tracker(sys.argv[1], 'harness'); r = t.client.create_run(t.experiment_id); print(r.info.run_id)")
    uri = f"sqlite:///{tmp_path}/new/mlflow.db"
    procs = [subprocess.Popen([sys.executable, "-c", code, uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-800:] for o in outs]
    client = mlflow.tracking.MlflowClient(uri)
    exp = client.get_experiment_by_name("harness")
    assert len(client.search_runs([exp.experiment_id])) == 2


def test_a_half_made_store_is_refused_in_one_line_and_records_stay_pending(bench_cfg, tmp_path, capsys):
    import sqlite3

    from harness.records.store import StoreError

    results = tmp_path / "results"
    rec = harness.run(bench_cfg(), quiet=True)
    rec.tracking["enabled"] = True
    tracking.save_record(rec, results, pending=True)
    db = tmp_path / "half.db"  # what a process killed while MLflow made the schema in place leaves
    con = sqlite3.connect(db)
    con.execute("create table experiments (experiment_id integer)")
    con.execute("create table runs (run_uuid text)")
    con.commit()
    con.close()
    before = db.read_bytes()
    assert harness.upload.main(["--results-dir", str(results), "--uri", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(db) in err and "incomplete" in err and f"mv {db} {db}.broken" in err
    assert [p.stem for p in pending_records(results)] == [rec.run_id]  # nothing lost
    assert db.read_bytes() == before  # and nothing written into the broken file
    with pytest.raises(StoreError, match="never finished"):  # a run logging there: record kept, one line
        harness.run(bench_cfg(**{"tracking.enabled": True, "tracking.uri": f"sqlite:///{db}"}), quiet=True)
    assert len(pending_records(results)) == 2
    db.rename(tmp_path / "half.db.broken")  # the fix the line names
    assert harness.upload.main(["--results-dir", str(results), "--uri", f"sqlite:///{db}"]) == 0
    assert not pending_records(results)
    assert not list(tmp_path.glob(".half.db.*.creating"))  # made in a temporary file, renamed into place


def test_a_read_only_store_is_one_line_naming_the_cause_and_the_fix(bench_cfg, tmp_path, monkeypatch):
    """MLflow wraps SQLAlchemy, which wraps sqlite's own error and puts its autoflush advice first: the warning
    names what the database said, and the record stays pending for the upload."""
    import sqlite3

    db = tmp_path / "ro.db"
    sqlite3.connect(db).execute("create table t (x)").connection.commit()
    try:
        sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute("insert into t values (1)")
    except sqlite3.OperationalError as exc:
        real = exc

    def readonly(self, record):
        try:
            raise RuntimeError("(sqlite3.OperationalError) attempt to write a readonly database") from real
        except RuntimeError as sqlalchemy:
            raise RuntimeError("(raised as a result of Query-invoked autoflush; consider using a "
                               "session.no_autoflush block)\n(sqlite3.OperationalError) attempt to write a readonly "
                               "database\n[SQL: INSERT INTO runs ...]") from sqlalchemy
    monkeypatch.setattr(tracking.Tracker, "log", readonly)
    with pytest.warns(UserWarning) as seen:
        rec = harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True)
    (message,) = [str(w.message) for w in seen if "could not log" in str(w.message)]
    assert "(attempt to write a readonly database)" in message and "autoflush" not in message
    assert message.endswith(f"records/pending: make it writable, then run `python -m harness.upload "
                            f"--results-dir {tmp_path / 'results'}` later")
    assert rec.status == "FINISHED" and len(pending_records(tmp_path / "results")) == 1


def test_a_store_made_read_only_says_so_in_one_line_without_tracebacks(tmp_path):
    """The real thing where the filesystem can make a file immutable (root, ext4: chattr +i); the record logged
    before the command returns (the background upload's report: the next test)."""
    results = tmp_path / "r"
    cmd = [sys.executable, "-m", "harness", "model=sample", "device=cpu", "runner=quick", "backend=overhead",
           f"tracking.results_dir={results}", "tracking.background=false"]
    assert subprocess.run(cmd, capture_output=True, text=True).returncode == 0
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(results / "mlflow.db")],
                                                        capture_output=True).returncode != 0:
        pytest.skip("this filesystem cannot make a file immutable (chattr +i)")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        subprocess.run(["chattr", "-i", str(results / "mlflow.db")])
    assert out.returncode == 0 and "Model: sample" in out.stdout
    assert out.stderr.strip().splitlines() == [
        f"warning: could not log to MLflow at sqlite:///{results}/mlflow.db (attempt to write a readonly database); "
        f"the record is kept in {results}/records/pending: make it writable, then run `python -m harness.upload "
        f"--results-dir {results}` later"]


def _upload_ended(results) -> None:
    """Wait for a background upload to end, leaving what it said for the next run."""
    import fcntl

    with open(results / "records" / background.LOCK) as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)


def test_a_single_run_returns_with_its_record_on_disk_and_a_detached_upload_logs_it(tmp_path):
    results = tmp_path / "r"
    cmd = [sys.executable, "-m", "harness", "model=sample", "device=cpu", "runner=quick", "backend=overhead",
           f"tracking.results_dir={results}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    (made,) = [p.stem for p in (results / "records").rglob("*.json")]  # in pending/ or already delivered
    assert background.wait(results) == []  # the upload ended and said nothing wrong
    assert pending_records(results) == []
    record = json.loads((results / "records" / f"{made}.json").read_text())
    client = mlflow.tracking.MlflowClient(f"sqlite:///{results}/mlflow.db")
    assert client.get_run(record["mlflow_run_id"]).data.tags["harness.record_id"] == made
    ui = f"runs: mlflow ui --backend-store-uri sqlite:///{results}/mlflow.db  then  http://127.0.0.1:5000/"
    assert f"{ui}\n" in out.stdout  # the folder's first run: the UI's home (no experiment id known yet)
    again = subprocess.run(cmd, capture_output=True, text=True)  # then the runs page, not the GenAI overview
    exp_id = client.get_experiment_by_name("harness").experiment_id
    assert f"{ui}#/experiments/{exp_id}/runs?workflowType=machine_learning&viewStateShareKey=harness\n" in again.stdout
    assert background.wait(results) == []
    # a store it cannot write: the command still returns 0 at once; the next run in the folder says what failed
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(results / "mlflow.db")],
                                                        capture_output=True).returncode != 0:
        pytest.skip("this filesystem cannot make a file immutable (chattr +i)")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        _upload_ended(results)
    finally:
        subprocess.run(["chattr", "-i", str(results / "mlflow.db")])
    assert out.returncode == 0 and out.stderr == "" and len(pending_records(results)) == 1, out.stderr
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr.strip().splitlines() == [
        f"warning: could not log to MLflow at sqlite:///{results}/mlflow.db (attempt to write a readonly database); "
        f"the record is kept in {results}/records/pending: make it writable, then run `python -m harness.upload "
        f"--results-dir {results}` later (an earlier run's background upload)"], out.stderr
    assert background.wait(results) == [] and len(pending_records(results)) == 1  # this run's own went in


def _hold_upload_lock(folder, seconds: float) -> subprocess.Popen:
    """Another process holding the folder's upload lock (as a background upload does) for ``seconds``."""
    folder.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, time
fd = os.open({str(folder / background.LOCK)!r}, os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep({seconds})
"""], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_run_waits_for_a_background_upload_before_its_work(tmp_path):
    """The uploader's lock is held from before its process starts; wait() returns only once it is let go."""
    import time

    folder = tmp_path / "records"
    holder = _hold_upload_lock(folder, 1.5)
    (folder / background.LOG).write_text("uploaded 0 of 1\nwarning: could not log to MLflow (x)\n")
    began = time.monotonic()
    said = background.wait(tmp_path)
    assert time.monotonic() - began >= 1.0 and said == ["warning: could not log to MLflow (x)"]
    assert background.wait(tmp_path) == [] and not (folder / background.LOG).exists()  # said once
    holder.wait()


def test_an_upload_waits_for_a_background_one_and_a_failed_background_upload_says_so(tmp_path, capsys,
                                                                                     monkeypatch):
    """harness.upload holds the folder's lock, so it never sends a record a background upload sends (two MLflow
    runs); a background upload that fails leaves one line for the next run."""
    import time

    folder = tmp_path / "records"
    holder = _hold_upload_lock(folder, 1.5)
    began = time.monotonic()
    assert harness.upload.main(["--results-dir", str(tmp_path)]) == 0
    assert time.monotonic() - began >= 1.0
    holder.wait()

    def broken(args):
        raise FileNotFoundError("moved by another upload")
    monkeypatch.setattr(harness.upload, "_upload", broken)
    assert harness.upload.main(["--results-dir", str(tmp_path), "--only", "abc"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: the upload of record abc failed (FileNotFoundError: moved by another upload); it stays in "
        f"{tmp_path}/records/pending: `python -m harness.upload` sends it")


def test_a_sweeps_batch_waits_for_a_delivery_under_way(bench_cfg, tmp_path):
    """A sweep's end batch and a job sending its own record (SLURM's, launched apart) at once made two MLflow runs
    of one record: the store's look-up-then-create is not atomic. Every delivery holds the folder's lock."""
    from harness.builtin import mlflow_delivery
    from harness.context import SweepEnd
    from harness.lifecycle import Sweep
    from harness.records.sweeps import DELIVER_AT_END
    from harness.records.tracking import default_uri

    results = tmp_path / "results"
    harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True)  # the store exists: a delivery takes < 1 s
    rec = harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True,
                      sweep={"sweep_id": "s1", "sweep_name": "s", "deliver": DELIVER_AT_END})
    pending = results / "records" / "pending" / f"{rec.run_id}.json"
    assert pending.exists()  # left for the batch
    holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, pathlib, time
fd = os.open({str(results / "records" / background.LOCK)!r}, os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(3)
print(pathlib.Path({str(pending)!r}).exists(), flush=True)
"""], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    tracking = {"enabled": True, "uri": None, "experiment": "harness", "background": False}  # sent before it returns
    mlflow_delivery.harness_sweep_finished(SweepEnd(Sweep(str(results), "s1"), tracking, "", str(tmp_path)))
    assert holder.stdout.readline().strip() == "True" and not pending.exists()  # sent once the lock was let go
    holder.wait()
    client = mlflow.tracking.MlflowClient(default_uri(results))
    runs = client.search_runs([client.get_experiment_by_name(rec.tracking["experiment"]).experiment_id],
                              f"tags.`harness.record_id` = '{rec.run_id}'")
    assert len(runs) == 1


def test_a_records_folder_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    records = tmp_path / "r" / "records"
    records.mkdir(parents=True)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(records)],
                                                        capture_output=True).returncode != 0:
        pytest.skip("this filesystem cannot make a folder immutable (chattr +i)")
    try:
        out = subprocess.run([sys.executable, "-m", "harness", "model=sample", "device=cpu", "runner=quick",
                              "backend=overhead", f"tracking.results_dir={tmp_path / 'r'}"], capture_output=True,
                             text=True)
    finally:
        subprocess.run(["chattr", "-i", str(records)])
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"error: tracking.results_dir={tmp_path / 'r'} cannot be written (its records folder): Operation not "
        f"permitted; choose a writable folder"]
    assert not (tmp_path / "r" / "mlflow.db").exists() and not (records / "pending").exists()


def test_ctrl_c_while_logging_names_where_the_record_is_and_the_upload(bench_cfg, tmp_path, monkeypatch, capsys):
    def interrupted(self, record):
        raise KeyboardInterrupt
    monkeypatch.setattr(tracking.Tracker, "log", interrupted)
    with pytest.raises(SystemExit) as ended:
        harness.run(bench_cfg(**{"tracking.enabled": True}), quiet=True)
    assert ended.value.code == 130
    results = tmp_path / "results"
    assert capsys.readouterr().err.strip().splitlines() == [
        f"interrupted: stopped by SIGINT while logging to MLflow; the record is kept in {results}/records/pending: "
        f"`python -m harness.upload --results-dir {results}` logs it"]
    assert len(pending_records(results)) == 1


def test_a_killed_store_creations_files_and_journal_are_cleaned_up(tmp_path):
    from harness.records import store

    db = tmp_path / "mlflow.db"
    for name in (f".{db.name}.999999.creating", f".{db.name}.999999.creating-journal"):
        (tmp_path / name).write_text("left by a process killed while it made the store")
    store.ensure(f"sqlite:///{db}")
    assert db.exists() and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
