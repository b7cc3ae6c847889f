"""This process's part in a sweep, as one value (issue 28). Hydra builds the sweep callback, the
launcher and each job's task function separately, and a signal handler reaches only module
state; so rather than a global per concern (the active sweep, the jobs that failed, the measuring
child's stop event, the busy worker) each part updates the one :data:`THIS`:

- the sweep callback makes the :class:`Sweep` at the sweep's start and ends it (``failed``
  counted) at its end;
- the CLI adds a job that failed in this process, ends a sweep Hydra abandoned before its end
  callback, and exits non-zero when :meth:`Process.failed` says so;
- the load-aware launcher's Ctrl-C handler ends the sweep KILLED, its workers mark themselves
  ``busy`` while running a job;
- a measuring child keeps its parent's ``stop`` event, which the timed loop polls."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .records import sweeps


@dataclass
class Sweep:
    """A sweep this process started (its state is ``sweeps``' ``sweep.json``)."""

    results_dir: str
    sweep_id: str
    ended: bool = False
    failed: int = 0  # jobs that did not finish, counted when the sweep ended
    sending: bool = False  # its end batch went to a detached upload (the console does not open the store)

    def end(self, status: str) -> None:
        """End it now as ``status`` (FAILED: Hydra gave up; KILLED: a signal), if it is still
        this process's RUNNING sweep, and close its MLflow parent (later, by upload, if the store
        is down)."""
        if self.ended:
            return
        self.ended = True
        state = sweeps.read_state(self.results_dir, self.sweep_id) or {}
        if state.get("status") == "RUNNING" and state.get("pid") == os.getpid():
            sweeps.end(self.results_dir, self.sweep_id, status)
            sweeps.close_parents(self.results_dir)


@dataclass
class Process:
    sweep: Sweep | None = None  # the sweep this process started last
    failures: list[str] = field(default_factory=list)  # jobs run in this process that failed
    stop: Any = None  # in a measuring child: its parent's event asking it to stop timing
    timing: Any = None  # in a measuring child: the event it sets when its warm-up and timed loop begin
    busy: bool = False  # a load-aware worker runs a job now (a Ctrl-C interrupts it then)

    def failed(self) -> int:
        """Runs that failed: those in this process, or the sweep's count (jobs that ran elsewhere)."""
        return max(len(self.failures), self.sweep.failed if self.sweep else 0)

    def stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def end_unfinished(self) -> None:
        """End a sweep whose end callback never ran (Hydra raised between start and end) FAILED."""
        if self.sweep is not None:
            self.sweep.end("FAILED")


THIS = Process()
