"""Schedules (stages -> groups -> units), the merge rewrite, and the IOS optimizer."""

from .merge import apply_merges, can_merge, merge_convs
from .optimizer import ENDINGS, VARIANTS, SearchStats, optimize
from .schedule import Schedule, ScheduleError, Stage, greedy, sequential

ALGORITHMS = ("sequential", "greedy", *VARIANTS)

__all__ = ["ALGORITHMS", "ENDINGS", "VARIANTS", "Schedule", "ScheduleError", "SearchStats", "Stage", "apply_merges",
           "can_merge", "greedy", "merge_convs", "optimize", "sequential"]
