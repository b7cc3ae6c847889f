"""Sweeps on a real SLURM cluster logging to a real MLflow server on PostgreSQL (tests/services.py
starts both on this machine): jobs queued and run by SLURM, each with a (fake) GPU of its own, a job
cancelled while it measures recorded KILLED and measured again, alone, by the rerun; a job killed
without a chance to record itself entered FAILED/KILLED with SLURM's reason; the server taken away
mid-sweep and the records sent once by ``harness.upload``. Skips in one line where SLURM or
PostgreSQL is not installed (./install.sh installs them as root)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
pytest.importorskip("mlflow")

from harness.records import background  # noqa: E402

from . import services  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# one SLURM cluster and one tracking server for the module: under pytest-xdist all its tests go to one worker
pytestmark = pytest.mark.xdist_group("services")
for _kind in ("slurm", "postgres"):
    if (_why := services.missing(_kind)) is not None:
        pytest.skip(_why, allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = services.SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = services.TrackingServer(tmp_path_factory.mktemp("tracking"), str(Path(sys.executable).with_name("mlflow")))
    yield s.start()
    s.stop()


def sweep_command(results: Path, server, experiment: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness", "-m", "hydra/launcher=submitit_slurm", "hydra.launcher.partition=cpu",
            "hydra.launcher.gpus_per_node=1", "hydra.launcher.timeout_min=10", "model=sample", "backend=overhead",
            "runner=quick", "device=cpu", f"tracking.results_dir={results}", f"tracking.uri={server.uri}",
            f"tracking.experiment={experiment}", *extra]


def runs(server, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=server.uri)
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], max_results=100) if exp else []


def task_processes(array_task: str, command: bytes) -> list[int]:
    """The processes of SLURM job ``<array>_<task>`` whose command line has ``command``."""
    array, task = array_task.split("_")
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if (f"SLURM_ARRAY_JOB_ID={array}".encode() in env and f"SLURM_ARRAY_TASK_ID={task}".encode() in env
                and command in cmd):
            found.append(int(pid))
    return found


def task_measuring(cluster, array_task: str) -> bool:
    """Whether SLURM job ``<array>_<task>`` is running and inside its measurement (its measuring child,
    spawned by the job's process, exists)."""
    return bool(task_processes(array_task, b"spawn_main"))


def wait_for(what: str, ready, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def array_task(cluster, index: int, sweep: subprocess.Popen) -> str:
    """The id (``<array>_<index>``) of the newest sweep's task ``index`` once SLURM knows it."""
    found: list[str] = []

    def known() -> bool:
        assert sweep.poll() is None, sweep.communicate()[1][-3000:]
        out = cluster.slurm(["squeue", "-h", "-r", "-o", "%F_%K"]).stdout.split()
        found[:] = sorted((j for j in out if j.endswith(f"_{index}")), key=lambda j: int(j.split("_")[0]))
        return bool(found)

    wait_for(f"SLURM to queue task {index}", known)
    return found[-1]


def sweep_until_measuring(cluster, cmd: list[str], index: int) -> tuple[subprocess.Popen, str]:
    """Start the sweep and return once its job ``index`` measures: the sweep and that job's SLURM id."""
    sweep = subprocess.Popen(cmd, env=cluster.env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    job = array_task(cluster, index, sweep)
    wait_for(f"job {job} to measure", lambda: task_measuring(cluster, job) or sweep.poll() is not None)
    return sweep, job


def test_a_sweep_on_slurm_logs_to_the_server_and_resumes_after_scancel(cluster, server, tmp_path):
    results = tmp_path / "r"
    # 4 jobs; the last measures (prepares) for 60 s, long enough to be cancelled inside its measurement
    cmd = sweep_command(results, server, "slurm", "backend.cpu_s=0,0.5,1,60")
    first, victim = sweep_until_measuring(cluster, cmd, 3)
    assert cluster.slurm(["scancel", victim]).returncode == 0
    out, err = first.communicate(timeout=300)
    assert first.returncode == 1 and "1 run(s) failed" in err, out[-3000:] + err[-3000:]
    assert "KILLED" in out and "Traceback" not in err, out[-3000:]
    assert "accounting cannot be read" not in err  # slurmdbd answers sacct

    second = subprocess.run(cmd, env=cluster.env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.count("FINISHED") == 4  # the table: three reused, the cancelled one measured again
    assert background.wait(results) == []  # the end batch went to the server from a detached upload

    children = [r for r in runs(server, "slurm") if r.data.tags.get("harness.parent") != "true"]
    parents = [r for r in runs(server, "slurm") if r.data.tags.get("harness.parent") == "true"]
    statuses = sorted(r.info.status for r in children)
    assert statuses == ["FINISHED"] * 4 + ["KILLED"], statuses  # no duplicates, nothing left RUNNING
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert {r.data.params["backend.cpu_s"] for r in children if r.info.status == "FINISHED"} == {"0.0", "0.5", "1.0",
                                                                                                 "60.0"}
    finished = [r for r in children if r.info.status == "FINISHED"]
    assert {r.data.tags["slurm_node"] for r in finished} == {services.NODE}  # which job and node measured
    assert len({r.data.tags["slurm_job_id"] for r in finished}) == 4
    # each job had a GPU of its own from SLURM's gres: two jobs that ran at once saw different ones
    spans = [(r.info.start_time, r.info.end_time, r.data.tags["cuda_visible_devices"]) for r in finished]
    assert {gpu for *_, gpu in spans} <= {"0", "1"}
    for a in spans:
        for b in spans:
            if a is not b and a[0] < b[1] and b[0] < a[1]:
                assert a[2] != b[2], spans
    # artifacts went to the shared filesystem, where the server's artifact root is
    assert list(server.artifacts.rglob("record.json"))
    assert not list((results / "records" / "pending").glob("*.json"))


def test_a_job_killed_without_a_record_is_entered_with_slurms_reason(cluster, server, tmp_path):
    results = tmp_path / "r"
    cmd = sweep_command(results, server, "slurm-lost", "backend.cpu_s=0,60")
    proc, victim = sweep_until_measuring(cluster, cmd, 1)
    for pid in task_processes(victim, b"submitit.core._submit"):  # as the out-of-memory killer would: no chance
        os.kill(pid, signal.SIGKILL)  # to record itself
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "1 run(s) failed" in err, err[-3000:]
    (entry,) = [json.loads(p.read_text()) for p in (results / "records" / "sweeps").glob("*/jobs/refused-*.json")]
    assert "backend.cpu_s=60" in entry["overrides"] and entry["status"] == "FAILED"
    assert entry["error"].startswith(f"SlurmJobLost: SLURM job {victim} ended "), entry["error"]
    assert "SlurmJobLost" in out  # the table's note says why
    assert background.wait(results) == []
    assert [r.info.status for r in runs(server, "slurm-lost") if r.data.tags.get("harness.parent") == "true"] \
        == ["FAILED"]


def test_records_made_while_the_server_is_away_are_uploaded_once(cluster, server, tmp_path):
    results = tmp_path / "r"
    # the end batch sent before the command returns (not by a detached upload, which would find the server back)
    cmd = sweep_command(results, server, "slurm-away", "backend.cpu_s=0,20", "tracking.background=false")
    sweep, _ = sweep_until_measuring(cluster, cmd, 1)
    server.stop_server()  # mid-sweep: the parent run exists, job 1 (and maybe job 0) cannot log
    try:
        out, err = sweep.communicate(timeout=300)
    finally:
        server.start_server()
    assert sweep.returncode == 0, err[-3000:]
    pending = list((results / "records" / "pending").glob("*.json"))
    assert 1 <= len(pending) <= 2, out[-3000:]
    assert f"pending: {len(pending)} record(s) not in MLflow yet" in out and "python -m harness.upload" in out
    for _ in range(2):  # the second upload has nothing left to send
        up = subprocess.run([sys.executable, "-m", "harness.upload", "--results-dir", str(results)],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
        assert up.returncode == 0, up.stderr[-2000:]
    # logging is idempotent on the server too: a record sent again completes its run, adds none
    sent = results / "records" / pending[0].name
    (results / "records" / "pending" / sent.name).write_text(sent.read_text())
    assert subprocess.run([sys.executable, "-m", "harness.upload", "--results-dir", str(results)],
                          capture_output=True, text=True, timeout=300, cwd=REPO).returncode == 0
    children = [r for r in runs(server, "slurm-away") if r.data.tags.get("harness.parent") != "true"]
    assert sorted(r.info.status for r in children) == ["FINISHED", "FINISHED"]
    parents = [r for r in runs(server, "slurm-away") if r.data.tags.get("harness.parent") == "true"]
    assert [p.info.status for p in parents] == ["FINISHED"]
