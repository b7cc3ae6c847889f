"""Ctrl-C, SIGTERM and kill -9 of a run: one line, the right exit code, the record kept as
KILLED, and no measuring child left running."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

LONG = ["model=sample", "backend=pytorch", "device=cpu", "tracking=off", "runner.min_time_s=120",
        "runner.max_time_s=120", "runner.ci_rel_target=0.0", "runner.min_iters=10000000", "runner.timeout_s=300"]


def start(tmp_path: Path) -> tuple[subprocess.Popen, psutil.Process]:
    proc = subprocess.Popen([sys.executable, "-m", "harness", *LONG, f"tracking.results_dir={tmp_path}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:  # wait for the spawned measuring child to be at work
        kids = [c for c in psutil.Process(proc.pid).children(recursive=True) if "python" in c.name().lower()]
        busy = [c for c in kids if c.cpu_times().user > 1.0]
        if busy:
            return proc, busy[0]
        time.sleep(0.5)
    proc.kill()
    pytest.fail("the measuring child never started")


def gone(p: psutil.Process, within: float) -> bool:
    try:
        p.wait(within)
        return True
    except psutil.TimeoutExpired:
        return False


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_keeps_the_record_and_ends_the_child(tmp_path, sig, code):
    proc, child = start(tmp_path)
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-2000:]
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines[-1].startswith("interrupted: sample-pytorch-bs1-fp32 stopped by " + sig.name)
    assert "Traceback" not in err
    assert gone(child, 5)
    records = list((tmp_path / "records").rglob("*.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text())
    assert rec["status"] == "KILLED" and sig.name in rec["error"]


def test_kill_9_of_the_parent_leaves_no_child(tmp_path):
    proc, child = start(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    assert gone(child, 3)
