"""A fork server for the fault-injection test: one clean interpreter imports the harness, MLflow,
Hydra and torch once, then forks a fresh process per command (``python -m harness ...`` or
``python -m harness.upload ...``), so each of the test's many runs costs its work, not 3 s of
imports. A forked run is a real process: it can be killed (by a kill point or a timer) like one.

Protocol: one JSON request per line on stdin ({"module", "argv", "cwd", "env", "log", "kill_after",
"timeout"}), one JSON reply per line on stdout ({"rc": exit code, or -signal}).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite's plugins (tests.fake_backends)


def _preload() -> None:
    import mlflow.tracking  # noqa: F401
    from mlflow.store.tracking import sqlalchemy_store  # noqa: F401

    import harness.cli  # noqa: F401
    import harness.job  # noqa: F401
    import harness.report  # noqa: F401
    import harness.upload  # noqa: F401
    from harness.plugins import get_backend

    get_backend("pytorch")  # loads the plugins (entry points) and torch


def _child(req: dict) -> None:
    os.chdir(req["cwd"])
    os.environ.update(req.get("env") or {})
    fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    rc = 0
    try:
        sys.argv = [req["module"], *req["argv"]]
        if req["module"] == "harness":
            from harness.cli import main

            main(list(req["argv"]))
        else:
            from harness.upload import main as upload

            rc = upload(list(req["argv"]))
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _wait(pid: int, kill_after: float | None, timeout: float) -> int:
    start = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - start
        if (kill_after is not None and elapsed >= kill_after) or elapsed >= timeout:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)


def main() -> None:
    _preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        rc = _wait(pid, req.get("kill_after"), float(req.get("timeout", 120)))
        print(json.dumps({"rc": rc}), flush=True)


if __name__ == "__main__":
    main()
