"""Typed config of the ios backend (``backend=ios backend.schedule=ios-both ...``): ios_core's
:class:`~ios_core.options.PlanOptions` (the search, its cost models and timing, the runtime, a given
schedule file, a schedule made on another GPU or batch size), under the same names, plus what only
a harness run has (progress bars, stage profiles as artifacts)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, ConfigError
from ios_core.options import PlanOptions
from ios_core.schedule import OptionError


@dataclass
class IosConfig(BackendConfig, PlanOptions):
    name: str = "ios"
    progress: bool = True  # the search's progress bars (the library's default is quiet)
    bounds: bool = True  # critical-path and sum-of-ops bounds as metrics (the library's default is off)
    profile: bool = False  # per-stage latencies and a timeline as artifacts

    def check(self) -> None:
        try:  # ios_core checks its options once; here they are named as on the command line
            PlanOptions.check(self)
        except OptionError as exc:
            raise ConfigError(f"backend.{exc}") from None
