"""Stops that stop (issue 55): SIGTERM or Ctrl-C to a load-aware sweep ends the whole process tree within
10 s in whichever phase its jobs are (start-up, model build, compile, measurement), no job starts after the
signal, the running ones are recorded KILLED; ``kill -9`` of the launcher leaves no process behind."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.test_launcher import REPO, _heartbeats, _session_processes, _wait_for

BASE = ["-m", "harness", "-m", "hydra/launcher=loadaware", "hydra.launcher.cpu_workers=2",
        "hydra.launcher.progress_s=1", "runner=quick", "device=cpu", "tracking=off", "batch=1,2,3"]
PHASES = {  # what the jobs run, and the progress line to wait for before the signal
    "start-up": (["model=sample", "backend=overhead", "backend.cpu_s=60"], None),
    "model build": (["model=module", "model.target=tests.helpers:slow_net", "backend=pytorch"], "model module"),
    "compile": (["model=sample", "backend=overhead", "backend.cpu_s=60"], "prepare Overhead"),
    "measurement": (["model=sample", "backend=overhead", "backend.exclusive_s=60"], "prepare Overhead"),
}


def _start(tmp: Path, args: list[str]) -> tuple[subprocess.Popen, Path]:
    log = tmp / "stderr.txt"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, *BASE, *args, f"tracking.results_dir={tmp}"], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=err, text=True, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, log


def _gone_within(proc: subprocess.Popen, limit_s: float) -> float:
    """Seconds until the launcher and every process of its session ended (fails past ``limit_s``)."""
    t = time.monotonic()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=limit_s)
    while _session_processes(proc.pid) and time.monotonic() - t < limit_s:
        time.sleep(0.1)
    left = _session_processes(proc.pid)
    assert proc.poll() is not None and not left, f"still running after {limit_s} s: {left}"
    return time.monotonic() - t


def _records(tmp: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (tmp / "records").glob("*.json")]


@pytest.mark.parametrize("phase", list(PHASES))
def test_sigterm_ends_the_tree_within_10_s_in_every_phase(tmp_path, phase):
    args, line = PHASES[phase]
    proc, log = _start(tmp_path, args)
    try:
        if line is None:
            time.sleep(1.5)  # importing, composing, or the sweep starting
        else:
            _wait_for(proc, log, lambda: _heartbeats(log, 1.0, line) >= 2
                      or (phase == "measurement" and "measuring]" in log.read_text()))
        signalled = datetime.now().astimezone()
        os.kill(proc.pid, signal.SIGTERM)
        took = _gone_within(proc, 10.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    err = log.read_text()
    assert proc.returncode == 143 and "Traceback" not in err, err[-3000:]
    records = _records(tmp_path)
    assert all(datetime.fromisoformat(r["created"]) < signalled for r in records)  # none started after it
    assert len(records) <= 2 and all(r["status"] == "KILLED" for r in records), [r["status"] for r in records]
    if line is not None:
        assert len(records) == 2 and "interrupted: the load-aware sweep stopped" in err, err[-3000:]
    for state in (tmp_path / "records" / "sweeps").glob("*/sweep.json"):
        assert json.loads(state.read_text())["status"] == "KILLED"
    assert took <= 10.0


def test_ctrl_c_between_short_jobs_starts_nothing_after_it(tmp_path):
    """Jobs of a moment each, so the workers are often inside a call to the broker when Ctrl-C lands (the
    race that shifted replies by one): repeated, each sweep gone within 10 s, no record made after it."""
    for attempt, delay in enumerate((4.0, 5.5, 7.0)):
        tmp = tmp_path / str(attempt)
        tmp.mkdir()
        proc, log = _start(tmp, ["model=sample", "backend=overhead", "backend.cpu_s=0.2", "batch=1,2,3,4,5,6,7,8"])
        try:
            time.sleep(delay)
            signalled = datetime.now().astimezone()
            os.killpg(proc.pid, signal.SIGINT)
            _gone_within(proc, 10.0)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode in (0, 130), log.read_text()[-3000:]
        assert "Traceback" not in log.read_text()
        assert all(datetime.fromisoformat(r["created"]) < signalled for r in _records(tmp))


def test_kill_9_of_the_launcher_leaves_no_process(tmp_path):
    proc, log = _start(tmp_path, PHASES["compile"][0])
    try:
        _wait_for(proc, log, lambda: _heartbeats(log, 1.0) >= 2)
        os.kill(proc.pid, signal.SIGKILL)
        _gone_within(proc, 5.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
