"""A load-aware sweep's progress as a person reads it: a count of the jobs done, failed, running
and queued, and one line per running job (what it does, for how long, the time left where its
phase knows it). On a terminal the lines are redrawn in place (rich); in a log they come as a
block every ``interval_s`` seconds. The jobs report their phases to the lease broker
(:func:`harness.machine.leases.report`), which this reads; they print nothing of it themselves."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time
from pathlib import Path
from typing import Any

STATE = {"measuring": "measuring", "cpu": "", "paused": "paused", "waiting for its device": "waiting for its device",
         "queued": "waiting for a CPU slot"}


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def lines(snapshot: dict[str, Any], total: int, elapsed_s: float) -> list[str]:
    """The display's text: the counts, then a line per running job."""
    jobs = snapshot.get("jobs", {})
    ended = [j for j in jobs.values() if j["state"] == "ended"]
    failed = sum(j["status"] in ("FAILED", "KILLED") for j in ended)
    running = sorted(((name, j) for name, j in jobs.items() if j["state"] != "ended"),
                     key=lambda nj: int(nj[0][3:]) if nj[0][3:].isdigit() else 0)
    queued = max(0, total - len(jobs))
    out = [f"sweep {_span(elapsed_s)}: {len(ended) - failed} done, {failed} failed, {len(running)} running, "
           f"{queued} queued"]
    for name, j in running:
        what = STATE.get(j["state"], j["state"])
        phase = j["phase"] or "starting"
        if j["done"] is not None:
            phase += f" {100 * j['done']:.0f}%"
        left = f", ~{_span(j['eta_s'])} left" if j.get("eta_s") else ""
        where = f"[device {j['device']}{': ' + what if what else ''}]"
        out.append(f"  #{name[3:]} {j['label']} {where} {phase}, {_span(j['phase_s'])}{left}")
    return out


class SweepProgress:
    """Draws :func:`lines` from the broker while the sweep runs, until :meth:`stop`."""

    def __init__(self, broker: Any, total: int, interval_s: float = 30.0, stream: Any = None):
        self.broker, self.total, self.interval_s = broker, total, interval_s
        self.stream = stream or sys.stderr
        self.t0 = time.monotonic()
        self.done = threading.Event()
        self.thread: threading.Thread | None = None
        self.live: Any = None
        self.fifo: Path | None = None
        self.reader: int | None = None

    def output(self, folder: Path) -> str:
        """On a terminal, where the workers should write (a FIFO this display reads and prints above its lines,
        which other processes writing to the terminal would tear); elsewhere nothing ("")."""
        if not (self.stream.isatty() and sys.stdout.isatty()) or not hasattr(os, "mkfifo"):
            return ""  # output sent to a file stays there
        fifo = folder / f".output-{os.getpid()}.fifo"
        try:
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo)
            self.reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # read-write: no end of file between writers
        except OSError:  # a file system without FIFOs: the workers write to the terminal themselves
            return ""
        self.fifo = fifo
        return str(fifo)

    def start(self) -> None:
        tty = self.stream.isatty()
        if not tty and self.interval_s <= 0:
            return
        if tty:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self.live = Live(Text(""), console=Console(file=self.stream), refresh_per_second=2, transient=True)
            self.live.start()
        self.thread = threading.Thread(target=self._run, daemon=True, name="sweep-progress")
        self.thread.start()

    def _text(self) -> list[str]:
        return lines(self.broker.snapshot(), self.total, time.monotonic() - self.t0)

    def _run(self) -> None:
        if self.live is not None:
            from rich.text import Text

            pending = b""
            while not self.done.is_set():
                try:  # this thread must go on: the workers' writes stall once the FIFO is full
                    if self.reader is None:
                        self.done.wait(0.5)
                    elif select.select([self.reader], [], [], 0.5)[0]:
                        pending = self._lines_from(self.reader, pending)
                    self.live.update(Text("\n".join(self._text()), no_wrap=True, overflow="ellipsis"))
                except Exception:  # noqa: BLE001 - a failed redraw (the broker gone at the end) is skipped
                    self.done.wait(0.5)
            return
        while not self.done.wait(self.interval_s):
            print("\n".join(self._text()), file=self.stream, flush=True)

    def _lines_from(self, fd: int, pending: bytes) -> bytes:
        """Print the whole lines the workers wrote; returns the start of a line not yet ended."""
        with contextlib.suppress(BlockingIOError):
            pending += os.read(fd, 65536)
        *done, pending = pending.split(b"\n")
        for line in done:
            self.print(line.decode(errors="replace"))
        return pending

    def print(self, line: str) -> None:
        """A line above the display (or in the log)."""
        if self.live is not None:
            self.live.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)

    def stop(self) -> None:
        if self.done.is_set():
            return
        self.done.set()
        if self.thread is not None:
            self.thread.join(2)
        if self.live is not None:
            self.live.stop()
        if self.reader is not None:  # what the workers wrote last
            with contextlib.suppress(BlockingIOError, OSError):
                rest = os.read(self.reader, 1 << 20).decode(errors="replace").rstrip("\n")
                if rest:
                    print(rest, file=self.stream, flush=True)
            os.close(self.reader)
            self.reader = None
        if self.fifo is not None:
            with contextlib.suppress(OSError):
                self.fifo.unlink()


def write_to(fifo: str) -> None:
    """In a worker: its output, and its measuring child's, into the display's FIFO (:meth:`SweepProgress.output`)."""
    if not fifo:
        return
    try:  # no reader (the launcher is gone): the open fails rather than waits
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.set_blocking(fd, True)
    for std in (1, 2):
        os.dup2(fd, std)
    os.close(fd)
