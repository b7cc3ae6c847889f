"""Progress of long work (schedule search, candidate timing) on the user's screen.

On a terminal a tqdm bar; otherwise (output piped to a file or a CI log, or the harness's
isolated child whose stderr is not a TTY) one status line every ``interval`` seconds, so
a 5-minute search never looks like a hang. Either way the line says the phase, the
counts, the time so far and an estimate of the time left. Where a caller gave a sink
(:func:`send_to`: a launcher showing many jobs at once) the phase, its share done and the time
left go there instead, and nothing is printed.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

#: (phase, share done or None, seconds left or None) -> None; None: print
Sink = Callable[[str, "float | None", "float | None"], None]
_sink: list[Sink] = []


def send_to(sink: Sink | None) -> None:
    """Send this process's progress to ``sink`` from now on (None: print it again)."""
    _sink[:] = [sink] if sink is not None else []


class Progress:
    def __init__(self, desc: str, total: float, unit: str = "", enabled: bool = True, interval: float = 5.0,
                 stream: TextIO | None = None, counts: bool = True):
        self.desc, self.total, self.unit = desc, float(total), unit
        self.counts = counts  # False: the share done only (an estimate of work has no unit worth showing)
        self.enabled, self.interval = enabled, interval
        self.stream = stream or sys.stderr
        self.done = 0.0
        self.shown = -1.0
        self.counters: dict[str, Any] = {}
        self.t0 = self.last = time.perf_counter()
        self.bar = None
        if enabled and not _sink and self.stream.isatty():
            from tqdm import tqdm

            fmt = {} if counts else {"bar_format": "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"}
            self.bar = tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True, file=self.stream,
                            **fmt)

    def update(self, n: float = 1.0, **counters: Any) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        self.set(**counters)

    def to(self, done: float, **counters: Any) -> None:
        """Set the work done so far (seconds of a timed phase, say) rather than add to it: on a
        terminal the bar moves with it (assigning ``done`` alone left tqdm's bar at 0%)."""
        done = min(float(done), self.total) if self.total else float(done)
        if self.bar is not None and done > self.done:
            self.bar.update(done - self.done)
        self.done = done
        self.set(**counters)

    def set(self, force: bool = False, **counters: Any) -> None:
        """Record counters (states, stages timed...) and show them if it is time to."""
        self.counters.update(counters)
        if not self.enabled:
            return
        now = time.perf_counter()
        if _sink:
            _sink[0](self.desc, self.done / self.total if self.total else None, self._left())
            return
        if self.bar is not None:
            if now - self.last > 0.5 or force:
                self.last = now
                self.bar.set_postfix(self.counters, refresh=True)
            return
        if now - self.last >= self.interval or force:
            self.last = now
            self.shown = self.done
            print(self.line(), file=self.stream, flush=True)

    def _left(self) -> float | None:
        """Seconds left at the pace so far, once a little is done (None before, and when done)."""
        frac = self.done / self.total if self.total else 0.0
        return (time.perf_counter() - self.t0) * (1 - frac) / frac if 0.02 < frac < 1 else None

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        frac = self.done / self.total if self.total else 0.0
        left = f", ~{eta:.0f} s left" if (eta := self._left()) is not None else ""
        extra = "".join(f", {v} {k}" for k, v in self.counters.items())
        done = f"{100 * frac:.0f}%"
        if self.counts:
            done = f"{self.done:.0f}/{self.total:.0f} {self.unit} ({done})"
        return f"[{self.desc}] {done}{extra}, {elapsed:.0f} s elapsed{left}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and not _sink and time.perf_counter() - self.t0 >= self.interval and self.shown != self.done:
            print(self.line(), file=self.stream, flush=True)  # the final count, for long phases only

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Heartbeat:
    """A line every ``interval`` seconds while a phase with no progress of its own runs (a
    compiler, a converter), so a long preparation never looks like a hang."""

    def __init__(self, desc: str, interval: float = 10.0, enabled: bool = True, stream: TextIO | None = None):
        import threading

        self.desc, self.interval, self.enabled = desc, interval, enabled
        self.stream = stream or sys.stderr
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        t0 = time.perf_counter()
        while not self.stop.wait(self.interval):
            print(f"[{self.desc}] {time.perf_counter() - t0:.0f} s elapsed", file=self.stream, flush=True)

    def __enter__(self) -> Heartbeat:
        if _sink:  # the sink's display counts the time itself
            _sink[0](self.desc, None, None)
        elif self.enabled:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
