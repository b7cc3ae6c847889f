"""Typed config of the ios backend (``backend=ios backend.schedule=ios-both ...``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, ConfigError
from ios_core.runtime import RUNTIMES
from ios_core.schedule import ALGORITHMS, ENDINGS

COST_MODELS = ("measured", "calibrated", "analytic")


@dataclass
class IosConfig(BackendConfig):
    name: str = "ios"
    schedule: str = "ios-both"  # sequential, greedy, ios-merge, ios-parallel, ios-both
    r: int = 3  # max units per group
    s: int = 8  # max groups (streams) per stage
    part_size: int = 50
    ending: str = "corrected"  # or "original" (the paper's code, upstream issue #10)
    cost_model: str = "measured"  # measured, calibrated, analytic
    runtime: str = "graph"  # graph, graph-stages, eager, ios-faithful
    schedule_file: str = ""  # run a saved schedule instead of searching
    greedy_streams: int = 10
    profile: bool = False  # per-stage latencies and a timeline as artifacts
    bounds: bool = True  # critical-path and sum-of-ops bounds as metrics
    channels_last: bool = False
    fuse: bool = True  # cuDNN conv+bias+ReLU on CUDA
    warmup: int = 2  # stage timing for the measured cost model
    number: int = 6
    repeat: int = 6
    store: str = ""  # where schedules and the cost cache live; default <repo>/results
    progress: bool = True


def check(cfg) -> None:
    choices = {"schedule": ALGORITHMS, "ending": ENDINGS, "cost_model": COST_MODELS, "runtime": tuple(RUNTIMES)}
    for key, allowed in choices.items():
        if str(cfg[key]) not in allowed:
            raise ConfigError(f"backend.{key}={cfg[key]!r} is invalid; choose one of: {', '.join(allowed)}")
    for key in ("r", "s", "part_size", "greedy_streams", "number", "repeat"):
        if int(cfg[key]) < 1:
            raise ConfigError(f"backend.{key}={cfg[key]} must be >= 1")
    if int(cfg["s"]) > 16:
        raise ConfigError(f"backend.s={cfg['s']} is more streams per stage than the runtime keeps (16)")
