"""A deadline for a long step inside ``prepare`` (a compile, an autotuning search): past it the
step ends with one BackendError line, so the run is FAILED and a sweep goes on, instead of the
whole measuring process being killed at ``runner.timeout_s`` with no word on what hung."""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType, TracebackType
from typing import Any

from harness.backend import BackendError

REPEAT_S = 0.5  # past the deadline, how often the interrupt comes again


class _Expired(BaseException):
    """Raised by the SIGALRM handler. A BaseException, like KeyboardInterrupt, so that the
    ``except Exception`` of the code it interrupts (Dynamo wraps its backend's errors, Inductor's
    autotuning skips a failing candidate) lets it through; ``__exit__`` turns it into the
    BackendError."""


class Deadline:
    """``with Deadline(seconds, "torch.compile (max-autotune) on inception_v3", "backend.compile_timeout_s"):``
    raises BackendError "<what> did not finish in <seconds> s (<key>): <hint>" when the block runs
    past ``seconds``.

    It uses ``setitimer(ITIMER_REAL)`` and SIGALRM, which only the main thread receives; the
    harness calls ``prepare`` in the main thread of its measuring process (``isolation._child``,
    or ``run_inline`` from the CLI). In any other thread the block runs without a deadline
    (``active`` is False) and ``runner.timeout_s`` remains the limit. The previous SIGALRM handler
    is restored afterwards, and a timer that was already running goes on with what it had left.

    Past the deadline the signal comes again every :data:`REPEAT_S` until the block ends: code
    that swallows the first ``_Expired`` (a garbage-collector callback, JAX's among them, reports
    an exception raised inside it as "unraisable" and carries on) is interrupted again, not left
    to run on to ``runner.timeout_s``."""

    def __init__(self, seconds: float, what: str, key: str, hint: str = ""):
        self.seconds = seconds
        self.message = f"{what} did not finish in {seconds:g} s ({key}): {hint or f'raise {key}'}"
        self.active = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        self.fired = False
        self._previous: Any = None  # the handler to restore
        self._outer = (0.0, 0.0)
        self._start = 0.0
        self._exiting = False

    def _expire(self, signum: int, frame: FrameType | None) -> None:
        self.fired = True
        if not self._exiting:  # once the block ends, a repeat must not escape from __exit__
            raise _Expired

    def __enter__(self) -> Deadline:
        if self.active:
            self._previous = signal.signal(signal.SIGALRM, self._expire)
            self._start = time.monotonic()
            self._outer = signal.setitimer(signal.ITIMER_REAL, self.seconds, REPEAT_S)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._exiting = True
        if not self.active:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous)
        left, interval = self._outer
        if left > 0:  # an outer timer: it keeps its own deadline
            signal.setitimer(signal.ITIMER_REAL, max(left - (time.monotonic() - self._start), 1e-3), interval)
        if self.fired:  # also when the code it interrupted caught _Expired and finished late
            raise BackendError(self.message) from (None if isinstance(exc, _Expired) else exc)
