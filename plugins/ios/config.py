"""Typed config of the ios backend (``backend=ios backend.schedule=ios-both ...``): ios_core's
:class:`~ios_core.planner.PlanOptions` (the search, its cost models and timing, the runtime),
under the same names, plus what only a harness run has (a given schedule file, a schedule made
on another GPU or batch size, profiles and bounds as metrics)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, ConfigError
from ios_core.planner import PlanOptions
from ios_core.schedule import OptionError


@dataclass
class IosConfig(BackendConfig, PlanOptions):
    name: str = "ios"
    progress: bool = True  # the search's progress bars (the library's default is quiet)
    schedule_file: str = ""  # run a saved schedule instead of searching
    schedule_device: str = ""  # run the schedule a search saved on this GPU (name or its start, e.g. nvidia-h200)
    opt_batch: int = 0  # search (or reuse) the schedule for this batch size and run it at the run's batch; 0: the same
    profile: bool = False  # per-stage latencies and a timeline as artifacts
    bounds: bool = True  # critical-path and sum-of-ops bounds as metrics

    def check(self) -> None:
        try:  # ios_core checks its options once; here they are named as on the command line
            PlanOptions.check(self)
        except OptionError as exc:
            raise ConfigError(f"backend.{exc}") from None
        if self.opt_batch < 0:
            raise ConfigError(f"backend.opt_batch={self.opt_batch} must be >= 0 (0: the run's batch)")
