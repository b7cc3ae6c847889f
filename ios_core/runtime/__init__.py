"""Executing a scheduled graph with torch: CUDA streams with event edges inside one CUDA
graph (or the original's barrier rules), a thread pool on the CPU, stage timing for the
measured cost model, and stage profiling with a timeline.

The package imports torch only when one of its torch parts is asked for: its torch-free modules (``target``'s
names and layouts, ``modes``) serve option checks and ``--help`` without it."""

from __future__ import annotations

import importlib
from typing import Any

from .modes import RUNTIMES

_LAZY = {"MODES": "program", "ScheduledModel": "model", "StageTimer": "timer", "StreamProgram": "program",
         "TorchTarget": "target"}

__all__ = ["MODES", "RUNTIMES", "ScheduledModel", "StageTimer", "StreamProgram", "TorchTarget"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
