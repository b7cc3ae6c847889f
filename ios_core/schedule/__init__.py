"""Schedules (stages -> groups -> units), the merge rewrite, and the IOS optimizer."""

from .merge import apply_merges, can_merge, merge_convs
from .optimizer import SearchStats, optimize
from .options import ALGORITHMS, ENDINGS, VARIANTS, OptionError, SearchOptions
from .schedule import Schedule, ScheduleError, Stage, greedy, sequential

__all__ = ["ALGORITHMS", "ENDINGS", "VARIANTS", "OptionError", "Schedule", "ScheduleError", "SearchOptions",
           "SearchStats", "Stage", "apply_merges", "can_merge", "greedy", "merge_convs", "optimize", "sequential"]
