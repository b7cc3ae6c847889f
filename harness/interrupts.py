"""Ctrl-C outside a run: one line and exit 130, as a Ctrl-C during a run gives (the run records
itself KILLED and says so), never the traceback of whatever was importing or composing.

``python -m harness`` spends seconds importing torch, the plugins and Hydra before the CLI's own
code runs; runpy imports the package (this ``__init__``) to find ``__main__``, so a ``try`` in
``__main__`` comes too late. :func:`quiet_while_starting` covers that stretch, the CLI takes over
with :func:`started` and :func:`outside_a_run`."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, NoReturn

STARTING = "interrupted: stopped by {} while starting; nothing was run"
OUTSIDE = "interrupted: stopped by {} outside a run; finished runs keep their records"


#: the handlers :func:`defer` replaced, by signal, while a stopped run keeps its record
_DEFERRED: dict[int, Any] = {}


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's time limit, ``kill``) taken as Ctrl-C is: what runs records itself
    KILLED and the sweep ends KILLED, rather than the process dying with its state half written."""

    signum = signal.SIGTERM


def _while_starting(signum: int, frame: Any) -> NoReturn:
    ending()
    print(STARTING.format(signal.Signals(signum).name), file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def raise_terminated(signum: int, frame: Any) -> NoReturn:
    """SIGTERM's handler wherever it is taken as Ctrl-C (the CLI, the load-aware launcher)."""
    raise Terminated


def quiet_while_starting() -> None:
    """Under ``python -m harness`` (``sys.argv[0]`` is ``-m`` while runpy still looks for the
    module), a Ctrl-C before the CLI starts exits with one line. A library import (``import
    harness``), the other commands (``python -m harness.upload``, ``harness.report``: their work
    is not "starting") and an ignored SIGINT (a shell's background job) are left as they are."""
    argv = list(getattr(sys, "orig_argv", []))
    command = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    if (sys.argv[:1] == ["-m"] and command == "harness" and threading.current_thread() is threading.main_thread()):
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _while_starting)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _while_starting)


def started() -> None:
    """The CLI runs: Ctrl-C raises KeyboardInterrupt again and SIGTERM :class:`Terminated`, which runs
    and sweeps handle; set before any sweep state is written, so a SIGTERM never leaves one RUNNING."""
    if signal.getsignal(signal.SIGINT) is _while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _while_starting):
        signal.signal(signal.SIGTERM, raise_terminated)


def outside_a_run(sweep: Any = None, signum: int = signal.SIGINT) -> NoReturn:
    """Ctrl-C while the CLI composes its config or between a sweep's runs: the sweep this process
    started (``sweep``) is ended KILLED (a rerun resumes it); one line, exit 130. With
    ``--debug`` the KeyboardInterrupt is raised as it is."""
    if os.environ.get("HARNESS_DEBUG"):
        raise KeyboardInterrupt
    ending()
    if sweep is not None:
        sweep.end("KILLED")
    print(OUTSIDE.format(signal.Signals(signum).name), file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def ending() -> None:
    """The stop is taken (its record kept, its sweep about to end KILLED): a second Ctrl-C or SIGTERM while the
    process ends is ignored, where it would raise through the sweep's last write or the interpreter's shutdown
    (exit -2 instead of 130, or a traceback)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def defer() -> None:
    """A run is stopping and its record is still to be kept and said: a second Ctrl-C or SIGTERM is taken as
    "already stopping" (noted, not raised: it would cut the save short and end with the wrong line); a third
    raises, a user who insists being obeyed (while the record goes to MLflow it names where it is kept).
    :func:`undefer` puts the handlers back."""
    if threading.current_thread() is not threading.main_thread() or _DEFERRED:
        return
    came: list[int] = []

    def note(signum: int, frame: Any) -> None:
        came.append(signum)
        if len(came) > 1:
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM):
        _DEFERRED[signum] = signal.signal(signum, note) or signal.SIG_DFL


def undefer() -> None:
    """The handlers :func:`defer` replaced, back (nothing where it replaced none)."""
    for signum, handler in _DEFERRED.items():
        signal.signal(signum, handler)
    _DEFERRED.clear()
