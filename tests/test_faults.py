"""Fault injection (issue 29): kill -9 the harness and the uploader at a series of moments, run the
same command again, and check that nothing is lost, doubled or left half-done.

Each kill point is a named point in the code (harness/records/faults.py: the process kills itself there
with SIGKILL, as ``kill -9`` would) or a timer. After each kill the same command runs again on the
same folder, and then: every job has exactly one JSON record and exactly one MLflow run, nothing is
pending, no run is RUNNING, the store opens, the sweep's parent is closed with its status and end
time, and the end-of-sweep table shows the records' latencies. Runs are forked from a preloaded
interpreter (tests/forkserver.py) so the 40 or so processes take about two minutes on two cores."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from harness.records import faults  # noqa: E402
from harness.records.store import schema_problem  # noqa: E402
from harness.records.sweeps import iso_ms  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the end batch in the sweep's own process (by default a detached upload sends it: the deliveries and parent closing
#: that UPLOAD_POINTS kill)
SWEEP = ["-m", "model=sample", "+model.params.channels=8", "+model.params.size=7", "batch=1,2", "device=cpu",
         "runner=quick", "runner.isolate=false", "runner.max_time_s=0.2", "runner.min_iters=3",
         "runner.warmup_iters=1", "tracking.background=false"]

#: the sweep killed at each point, then run again
SWEEP_POINTS = ["sweep.started", "store.creating", "store.schema", "store.created", "sweep.parent",
                "job.measured#1", "job.indexed#1", "job.saved#1", "log.created#1", "log.params#1", "log.metrics#1",
                "log.artifacts#1", "log.terminated#1", "deliver.saved#1", "job.measured#2", "job.indexed#2",
                "log.created#2", "log.artifacts#2", "deliver.saved#2", "sweep.ended", "parent.closed",
                "sweep.table"]
#: the upload of a sweep's pending records killed at each point (or after a time), then run again
UPLOAD_POINTS = ["store.creating", "store.schema", "store.created", "log.created#1", "log.params#1",
                 "log.metrics#1", "log.artifacts#1", "log.terminated#1", "deliver.saved#1", "log.created#2",
                 "log.terminated#2", "deliver.saved#2", "upload.reaped", "parent.closed",
                 0.05, 0.1, 0.15, 0.2, 0.3, 0.4]


class ForkServer:
    """One preloaded interpreter answering run requests (see tests/forkserver.py)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "forkserver.py")], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}
        self.lock = threading.Lock()

    def run(self, module: str, argv: list[str], cwd: Path, log: Path, kill_at: str | None = None,
            kill_after: float | None = None) -> int:
        env = {faults.ENV: kill_at or ""}
        req = {"module": module, "argv": argv, "cwd": str(cwd), "env": env, "log": str(log),
               "kill_after": kill_after, "timeout": 180}
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            return int(json.loads(self.proc.stdout.readline())["rc"])

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def servers():
    pair = [ForkServer(), ForkServer()]
    yield pair
    for s in pair:
        s.close()


def _records(folder: Path) -> tuple[list[dict], list[Path]]:
    done = [json.loads(p.read_text()) for p in sorted((folder / "records").glob("*.json"))]
    pending = sorted((folder / "records" / "pending").glob("*.json"))
    return done + [json.loads(p.read_text()) for p in pending], pending


def check(folder: Path, db: Path, log: str | None) -> None:
    """The invariants after a rerun (``log``: the rerun's output, holding the end-of-sweep table)."""
    records, pending = _records(folder)
    assert not pending, f"still pending: {[p.name for p in pending]}"
    batches = sorted(r["config"]["batch"] for r in records)
    assert batches == [1, 2], f"one record per job expected, got batches {batches}"
    assert all(r["status"] == "FINISHED" for r in records)
    assert schema_problem(db) is None
    assert not list(db.parent.glob(f".{db.name}.*.creating*"))  # a killed creation's temporary file (and its
    # sqlite journal) is gone
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("harness")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    assert [r.info.status for r in runs if r.info.status == "RUNNING"] == []
    parents = [r for r in runs if r.data.tags.get("harness.parent") == "true"]
    children = [r for r in runs if r.data.tags.get("harness.parent") != "true"]
    assert len(parents) == 1, f"{len(parents)} parent runs"
    assert sorted(r.data.tags["harness.record_id"] for r in children) == sorted(r["run_id"] for r in records)
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert {r["mlflow_run_id"] for r in records} == {r.info.run_id for r in children}
    for r in children:  # complete: every metric and the record artifact
        assert r.data.metrics["latency_median_ms"] > 0
        assert "record.json" in {a.path for a in client.list_artifacts(r.info.run_id)}
    state = json.loads(next((folder / "records" / "sweeps").glob("*/sweep.json")).read_text())
    assert state["status"] == "FINISHED" and state["parent_closed"] is True
    assert parents[0].info.status == "FINISHED" and parents[0].info.end_time == iso_ms(state["ended"])
    # the parent reads at a glance: the sweep's table as metrics, its overrides as params
    assert parents[0].data.metrics == {f"median_ms/batch:{r['config']['batch']}": r["metrics"]["latency_median_ms"]
                                       for r in records}
    assert parents[0].data.params["batch"] == "1,2" and parents[0].data.params["model"] == "sample"
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # opens on the runs table
    if log is not None:  # the table's latencies are the records'
        shown = {int(b): lat for b, lat in re.findall(r"│\s*\d+\s*│\s*(\d+)\s*│\s*FINISHED\s*│\s*([\d.]+)", log)}
        assert shown == {r["config"]["batch"]: f"{r['metrics']['latency_median_ms']:.4g}" for r in records}, log
        assert f"runs: mlflow ui --backend-store-uri sqlite:///{db}  then  http://127.0.0.1:5000/#/experiments/" \
            f"{exp.experiment_id}" in log
        assert f"report: python -m harness.report {state['sweep_id']} --results-dir {folder}" in log


def _sweep_point(server: ForkServer, base: Path, point: str) -> str:
    folder = base / point.replace("#", "-")
    folder.mkdir()
    argv = [*SWEEP, f"tracking.results_dir={folder}"]
    rc = server.run("harness", argv, folder, folder / "killed.log", kill_at=point)
    assert rc == -9, f"{point}: not reached (exit {rc}): {(folder / 'killed.log').read_text()[-2000:]}"
    rc = server.run("harness", argv, folder, folder / "rerun.log")
    log = (folder / "rerun.log").read_text()
    assert rc == 0, f"{point}: the rerun exited {rc}: {log[-3000:]}"
    check(folder, folder / "mlflow.db", log)
    return point


def _upload_point(server: ForkServer, pristine: Path, base: Path, point: str | float) -> str:
    folder = base / f"upload-{point}".replace("#", "-")
    shutil.copytree(pristine, folder)
    db = folder / "mlflow.db"
    argv = ["--results-dir", str(folder), "--uri", f"sqlite:///{db}"]
    if isinstance(point, str):
        rc = server.run("harness.upload", argv, folder, folder / "killed.log", kill_at=point)
        assert rc == -9, f"{point}: not reached (exit {rc}): {(folder / 'killed.log').read_text()[-2000:]}"
    else:  # a timer: wherever the upload is then (killed, or done already)
        killed = server.run("harness.upload", argv, folder, folder / "killed.log", kill_after=point)
    rc = server.run("harness.upload", argv, folder, folder / "rerun.log")
    assert rc == 0, f"{point}: the rerun exited {rc}: {(folder / 'rerun.log').read_text()[-3000:]}"
    check(folder, db, None)
    if isinstance(point, str):
        return point
    return f"{point} s ({'killed' if killed == -9 else f'done before, exit {killed}'})"


def _all(servers: list[ForkServer], fn, points: list) -> list[str]:
    with ThreadPoolExecutor(len(servers)) as pool:
        futures = [pool.submit(fn, servers[i % len(servers)], p) for i, p in enumerate(points)]
        return [f.result() for f in futures]


def test_every_kill_point_is_a_named_point():
    named = {str(p).partition("#")[0] for p in SWEEP_POINTS + UPLOAD_POINTS if isinstance(p, str)}
    assert named == set(faults.POINTS)
    assert len(SWEEP_POINTS) + len(UPLOAD_POINTS) >= 30


@pytest.mark.parametrize("scenario", ["sweep", "upload"],
                         ids=[f"sweep-{len(SWEEP_POINTS)}-kill-points", f"upload-{len(UPLOAD_POINTS)}-kill-points"])
def test_kill_9_then_rerun_loses_nothing(scenario, servers, tmp_path):
    if scenario == "sweep":
        done = _all(servers, lambda s, p: _sweep_point(s, tmp_path, p), SWEEP_POINTS)
    else:  # a sweep whose store was unreachable (a path under a file) leaves its records pending
        pristine = tmp_path / "pristine"
        pristine.mkdir()
        (tmp_path / "not-a-folder").write_text("")
        argv = [*SWEEP, f"tracking.results_dir={pristine}", f"tracking.uri=sqlite:///{tmp_path}/not-a-folder/x.db"]
        assert servers[0].run("harness", argv, pristine, tmp_path / "pristine.log") == 0
        assert len(_records(pristine)[1]) == 2
        done = _all(servers, lambda s, p: _upload_point(s, pristine, tmp_path, p), UPLOAD_POINTS)
    print(f"{scenario}: {len(done)} kill points, every invariant held after each rerun: {', '.join(done)}")


def test_a_sweep_on_a_half_made_store_stops_before_any_job(servers, tmp_path):
    import sqlite3

    folder = tmp_path / "broken"
    folder.mkdir()
    con = sqlite3.connect(folder / "mlflow.db")
    con.execute("create table experiments (experiment_id integer)")
    con.commit()
    con.close()
    rc = servers[0].run("harness", [*SWEEP, f"tracking.results_dir={folder}"], folder, folder / "run.log")
    log = (folder / "run.log").read_text()
    assert rc == 2, log
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "mlflow.db is incomplete" in errors[0] and "Traceback" not in log
    assert "Launching" not in log and _records(folder) == ([], [])  # nothing measured
    assert not list((folder / "records" / "sweeps").glob("*/sweep.json"))  # and no sweep left behind
