"""What the IOS search is asked for, as one typed value: :class:`SearchOptions` for the dynamic
program (:func:`ios_core.schedule.optimize`). The planner's options (cost model, runtime,
timing) extend it in :mod:`ios_core.planner`, and the ios backend's config extends those, so an
option has one name and one check from the command line down to the DP."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: the schedules the DP searches: (merge endings, parallel endings)
VARIANTS = {"ios-merge": (True, False), "ios-parallel": (False, True), "ios-both": (True, True)}
#: every schedule a plan can ask for: the two baselines and the DP's variants
ALGORITHMS = ("sequential", "greedy", *VARIANTS)
ENDINGS = ("corrected", "original")
PART_CUTS = ("live", "slice")
CORES = ("auto", "native", "python")


class OptionError(ValueError):
    """An option's value is not allowed; the message starts with ``key=value`` (a caller that
    knows the option under a prefix, like ``backend.``, puts it in front)."""


def choose(key: str, value: Any, allowed: Iterable[str]) -> None:
    """The one check of a closed choice."""
    allowed = tuple(allowed)
    if str(value) not in allowed:
        raise OptionError(f"{key}={value!r} is invalid; choose one of: {', '.join(allowed)}")


def at_least(options: Any, minimum: int, *keys: str) -> None:
    """The one check of a lower bound, for each named attribute."""
    for key in keys:
        if getattr(options, key) < minimum:
            raise OptionError(f"{key}={getattr(options, key)} must be >= {minimum}")


@dataclass
class SearchOptions:
    """The DP's options. ``schedule`` names what is searched (one of :data:`VARIANTS`; the
    planner also takes the baselines ``sequential`` and ``greedy``)."""

    schedule: str = "ios-both"  # sequential, greedy, ios-merge, ios-parallel, ios-both
    r: int = 3  # max units per group
    s: int = 8  # max groups (streams) per stage
    part_size: int = 50
    #: how a block longer than part_size is cut into parts: "live", where about the fewest tensors cross (NASNet's
    #: cells found in a graph that does not mark them), or "slice", every part_size units
    part_cuts: str = "live"
    ending: str = "corrected"  # or "original" (the paper's code, upstream issue #10)
    keep: int = 3  # the DP's best schedules per part that are timed in situ (1 without in-situ timing)
    prune: bool = True  # skip timing stages whose lower bound cannot win
    share_parts: bool = True  # structurally identical parts (NASNet's cells) searched and selected once
    greedy_streams: int = 10
    screen_limit: int = 1500  # with a screening model: parts whose DP would time more stages are planned by it
    search_core: str = "auto"  # auto (the compiled C++ core where built), native (require it), python (reference)
    search_workers: int = 0  # threads searching distinct parts at once (analytic cost model); 0: one per core
    progress: bool = False  # progress bars on stderr

    def check(self) -> None:
        """Raise :class:`OptionError` naming the first option out of range."""
        choose("schedule", self.schedule, ALGORITHMS)
        choose("ending", self.ending, ENDINGS)
        choose("part_cuts", self.part_cuts, PART_CUTS)
        choose("search_core", self.search_core, CORES)
        at_least(self, 1, "r", "s", "part_size", "keep", "greedy_streams", "screen_limit")
        at_least(self, 0, "search_workers")
        if self.s > 16:
            raise OptionError(f"s={self.s} is more streams per stage than the runtime keeps (16)")
