"""Executing a scheduled graph with torch: CUDA streams with event edges inside one CUDA
graph (or the original's barrier rules), a thread pool on the CPU, stage timing for the
measured cost model, and stage profiling with a timeline."""

from .model import RUNTIMES, ScheduledModel
from .program import MODES, StreamProgram
from .target import TorchTarget
from .timer import StageTimer

__all__ = ["MODES", "RUNTIMES", "ScheduledModel", "StageTimer", "StreamProgram", "TorchTarget"]
