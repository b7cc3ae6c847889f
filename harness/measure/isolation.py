"""Process isolation: each measurement runs in a spawned child, so a backend that
crashes, hangs or runs out of memory fails its own run and a sweep goes on."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..lifecycle import THIS
from ..machine.leases import detach_group
from ..messages import one_line_warnings

STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what stops a run from outside, not a crash
STOP_GRACE_S = 2.0  # how long a child's death by one of them waits for this process's own signal


@dataclass
class Outcome:
    ok: bool
    result: Any = None  # what the job returned (measure: a Measurement)
    error: str = ""  # one line: what went wrong
    detail: str = ""  # traceback or signal information


class Interrupted(BaseException):
    """The user (Ctrl-C) or the system (SIGTERM) stopped the run; ``signum`` says which, and
    ``partial`` holds what the measurement had when it stopped (None if nothing yet)."""

    def __init__(self, signum: int, partial: Any = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.partial = partial


def die_with_parent(parent: int = 0) -> None:
    """This process must not outlive its parent (``parent``, else the current one; kill -9 of the
    harness included): Linux's parent-death signal where available, and a watchdog thread everywhere
    (also where the parent was gone before the signal was set). The measuring child and the load-aware
    launcher's workers call it."""
    parent = parent or os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)
    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def _child(conn, job: bytes, stop=None, timing=None) -> None:
    """The measuring child's entry. The job arrives pickled and is unpickled only here, after the
    parent-death handling is in place: unpickling a typed config imports its backend's plugin (and
    with it torch, seconds of work), and a parent killed meanwhile must not leave this process running."""
    THIS.stop = stop  # the parent asks it to stop timing and report what it has
    THIS.timing = timing  # set once it times: before that an interrupt ends it at once
    os.setpgid(0, 0)  # its own process group: what it starts (compile workers, tuning builds) ends with it
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends the child itself
    one_line_warnings()  # as its parent's: what the run warns about reads alike from either process
    try:
        fn, arg = pickle.loads(job)
        conn.send(("ok", fn(arg)))
    except BaseException as exc:  # report every failure to the parent, then exit
        conn.send(("error", (f"{type(exc).__name__}: {exc}", traceback.format_exc())))
    finally:
        conn.close()
        _exit_at_once()


def _exit_at_once() -> None:
    """End the child without the interpreter's teardown (half a second with torch loaded, which the parent
    waits for before it ends the child's process group): its outcome is sent, its streams are flushed, and what
    it started ends with its group."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


@contextlib.contextmanager
def caller_main_hidden() -> Iterator[None]:
    """While a child is spawned, the caller's ``__main__`` is replaced by an empty module.

    ``spawn`` makes the child import the parent's main script again (as ``__mp_main__``): a
    script calling ``harness.run`` without ``if __name__ == "__main__":`` would run again inside
    the measuring child (a second, bogus run), and code read from stdin or ``python -c`` has no
    file to import (the child died). The child needs nothing from the caller's script: it runs
    a harness function on a harness config. ``python -m harness`` keeps its own main module."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if main is None or name.split(".")[0] == "harness":
        yield
        return
    stub = types.ModuleType("__main__")
    stub.__spec__ = None
    sys.modules["__main__"] = stub
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def end_group(proc) -> None:
    """Kill the measuring child and every process it started (its process group, which it leads once it
    runs; before that, the child alone). Only while the child is not yet reaped: its number is then still
    its own (alive or a zombie), whereas once reaped an empty group's number is free, and a new session's
    leader that got it (a SLURM job's task, on a machine whose process ids wrap) was killed instead."""
    if proc.pid is not None and _unreaped(proc):
        try:  # no group has the child's number until the child made it (a pid is never another's pgid)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.kill()  # multiprocessing signals only a child it has not reaped


def _unreaped(proc) -> bool:
    popen = getattr(proc, "_popen", None)
    return popen is not None and popen.returncode is None


def settle(proc, timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for the child to exit, without reaping it; end what it left running in its
    group while its number is still its own; then reap it."""
    deadline = time.monotonic() + timeout_s
    while _unreaped(proc):
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break  # exited: a zombie until joined
        except ChildProcessError:
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    end_group(proc)
    proc.join(5)


def run_inline(fn, arg) -> Outcome:
    try:
        return Outcome(True, fn(arg))
    except Exception as exc:
        return Outcome(False, None, f"{type(exc).__name__}: {exc}", traceback.format_exc())


def run_isolated(fn, arg, timeout_s: float) -> Outcome:
    """Call ``fn(arg)`` in a spawned process; never raises for the child's failures."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    stop, timing = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_child, args=(send, pickle.dumps((fn, arg)), stop, timing), daemon=True)
    with caller_main_hidden():
        proc.start()
    send.close()
    try:
        if not recv.poll(timeout_s):
            if proc.is_alive():
                settle(proc, 0)
                return Outcome(False, None, f"timed out after {timeout_s:g} s (runner.timeout_s, which includes the "
                                            "backend's preparation: an IOS search, a compile, tuning) and was killed; "
                                            "raise runner.timeout_s")
        try:
            status, payload = recv.recv()
        except EOFError:
            settle(proc, 10)
            code = proc.exitcode
            if code is not None and -code in STOPPING:  # a scheduler (scancel) or a terminal signals the whole
                time.sleep(STOP_GRACE_S)  # tree: the child may die first; this process's own signal, due any
                #                           moment, raises Interrupted in here and the run ends KILLED, not FAILED
            if code is not None and code < 0:
                name = signal.Signals(-code).name
                hint = " (possibly out of memory)" if -code == signal.SIGKILL else ""
                return Outcome(False, None, f"the measuring process died with {name}{hint}", f"exit code {code}")
            return Outcome(False, None, f"the measuring process exited with code {code} without a result")
        settle(proc, 10)  # what it left running ends with it
        if status == "ok":
            return Outcome(True, payload)
        return Outcome(False, None, payload[0], payload[1])
    except (KeyboardInterrupt, Interrupted) as exc:
        stop.set()  # a child that is timing stops and sends what it has; one still preparing is killed at once
        partial = None
        try:
            if timing.is_set() and recv.poll(3.0):
                status, payload = recv.recv()
                partial = payload if status == "ok" else None
        except (EOFError, OSError, KeyboardInterrupt):
            pass
        settle(proc, 0)
        signum = getattr(exc, "signum", signal.SIGINT)  # Interrupted's, or SIGTERM's Terminated
        raise Interrupted(signum, partial) from None
    finally:
        recv.close()
        end_group(proc)  # also what a finished child left behind (a worker pool it did not shut down)
        if proc.pid is not None:
            detach_group(proc.pid)  # the load-aware launcher pauses it no more: its number may be reused
