"""Tuning measurements through TVM's RPC tracker (``backend=autotvm backend.runner=rpc``): a
real tracker and a CPU RPC server on loopback, and a few trials tuned through them from the CLI.
The candidates are built in the harness process and measured by the server's workers."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado")
pytest.importorskip("xgboost", reason="the default tuner's cost model")

REPO = Path(__file__).resolve().parent.parent
KEY = "cpu-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(log: Path, *args: str) -> subprocess.Popen:
    """A TVM entry point in its own session: the server forks workers, which killpg ends too."""
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=REPO)


def stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def free_servers(port: int) -> int:
    """How many servers of KEY the tracker has free (0 while none has registered yet)."""
    if not listening(port):  # connect_tracker would retry for 60 s
        return 0
    summary = tvm.rpc.connect_tracker("127.0.0.1", port).summary()
    return int(summary.get("queue_info", {}).get(KEY, {}).get("free", 0))


def wait_for(ready, procs: list, logs: Path, what: str, timeout_s: float = 60) -> None:
    deadline = time.time() + timeout_s
    while not ready():
        for proc, name in zip(procs, ("tracker", "server"), strict=False):
            if proc.poll() is not None:
                pytest.fail(f"the RPC {name} exited: {(logs / f'{name}.log').read_text()[-2000:]}")
        if time.time() > deadline:
            pytest.fail(f"{what} in {timeout_s:.0f} s: {(logs / 'server.log').read_text()[-2000:]}")
        time.sleep(0.2)


@pytest.fixture
def tracker(tmp_path):
    """(tracker port, server log): a tracker and one CPU server registered with it under KEY."""
    port, server_port = free_port(), free_port()
    procs = [start(tmp_path / "tracker.log", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                   "--port", str(port), "--port-end", str(port + 1))]
    try:
        wait_for(lambda: listening(port), procs, tmp_path, "the tracker did not listen")
        # started once the tracker listens: a server that finds none retries only every 5 s
        procs.append(start(tmp_path / "server.log", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                           "--port", str(server_port), "--port-end", str(server_port + 1),
                           "--tracker", f"127.0.0.1:{port}", "--key", KEY))
        wait_for(lambda: free_servers(port) >= 1, procs, tmp_path, "no server registered with the tracker")
        yield port, tmp_path / "server.log"
    finally:
        for proc in procs:
            stop(proc)


def test_autotvm_tunes_through_an_rpc_tracker(tracker, tmp_path):
    port, server_log = tracker
    results = tmp_path / "r"
    res = subprocess.run(
        [sys.executable, "-m", "harness", "model=sample", "+model.params.channels=8", "+model.params.size=7",
         "backend=autotvm", "device=cpu", "backend.runner=rpc", f"backend.rpc_tracker=127.0.0.1:{port}",
         f"backend.rpc_key={KEY}", "backend.trials=8", "backend.trials_per_iter=4", "backend.progress=false",
         f"backend.store={tmp_path / 'store'}", "runner=quick", "tracking.enabled=false",
         f"tracking.results_dir={results}"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    (record,) = [json.loads(p.read_text()) for p in (results / "records").glob("*.json")]
    assert record["status"] == "FINISHED", record.get("error")
    m = record["metrics"]
    assert m["max_rel_error"] < 1e-4  # the tuned module passed the correctness check
    assert record["params"]["tvm_runner"] == "rpc"
    assert m["tune_trials_run"] == 8 and m["tune_records"] >= 1
    # measured through the RPC runner: counted by the harness and served by the RPC server
    assert m["tune_measured"] >= 1 and m["tune_measure_s"] > 0
    assert m["tune_measure_errors"] < m["tune_measured"]
    log = server_log.read_text()
    assert log.count("load_module") >= 1 and "connected from" in log
    assert free_servers(port) == 1  # every session returned its server to the tracker
