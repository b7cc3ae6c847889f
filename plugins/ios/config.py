"""Typed config of the ios backend (``backend=ios backend.schedule=ios-both ...``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.config import BackendConfig, ConfigError, at_least, choose
from ios_core.passes import PASSES
from ios_core.runtime import RUNTIMES
from ios_core.runtime.kernels import KERNEL_MODES
from ios_core.runtime.target import LAYOUT_CHOICES, parse_channels_last
from ios_core.schedule import ALGORITHMS, ENDINGS
from ios_core.schedule.native import CORES

COST_MODELS = ("auto", "measured", "calibrated", "analytic")
#: graph passes on by default: each measured on/off on the H100 (BENCHMARKS.md, "IOS on the fastest kernels")
DEFAULT_PASSES = ("fold_bias", "pool_conv")


@dataclass
class IosConfig(BackendConfig):
    name: str = "ios"
    schedule: str = "ios-both"  # sequential, greedy, ios-merge, ios-parallel, ios-both
    r: int = 3  # max units per group
    s: int = 8  # max groups (streams) per stage
    part_size: int = 50
    ending: str = "corrected"  # or "original" (the paper's code, upstream issue #10)
    cost_model: str = "auto"  # auto, measured, calibrated, analytic
    screen_limit: int = 1500  # auto: parts whose DP would time more stages than this are planned calibrated
    keep: int = 3  # the DP's best schedules per part that are timed in situ
    select: bool = True  # time each part's candidates as they run (with Greedy's and Sequential's) and keep the fastest
    prune: bool = True  # skip timing stages whose lower bound cannot win
    search_core: str = "auto"  # auto (the compiled C++ core where built), native (require it), python (reference)
    search_workers: int = 0  # threads searching distinct parts at once (analytic cost model); 0: one per core
    research: bool = False  # search again even when a schedule for this model, batch, precision and GPU is saved
    runtime: str = "graph"  # graph, graph-stages, eager, ios-faithful
    streams: str = "chains"  # chains (follow producers, avoid false dependencies) or stage-order (group j on stream j)
    schedule_file: str = ""  # run a saved schedule instead of searching
    schedule_device: str = ""  # run the schedule a search saved on this GPU (name or its start, e.g. nvidia-h200)
    opt_batch: int = 0  # search (or reuse) the schedule for this batch size and run it at the run's batch; 0: the same
    greedy_streams: int = 10
    profile: bool = False  # per-stage latencies and a timeline as artifacts
    bounds: bool = True  # critical-path and sum-of-ops bounds as metrics
    channels_last: str = "auto"  # auto (time both layouts on CUDA, keep the faster), true (NHWC), false (NCHW)
    fuse: bool = True  # cuDNN conv+bias+ReLU on CUDA
    passes: list[str] = field(default_factory=lambda: list(DEFAULT_PASSES))  # graph rewrites (ios_core.passes)
    kernels: str = "auto"  # per conv: auto (time cuDNN and GEMM, keep the faster), cudnn, gemm
    warmup: int = 2  # stage timing for the measured cost model: warmup replays,
    number: int = 5  # copies per captured graph (each after an L2 flush),
    repeat: int = 3  # and replays; the median of number x repeat samples
    cold: bool = True  # flush L2 before each timed copy, as weights arrive in a model larger than L2
    progress: bool = True

    def check(self) -> None:
        choose("backend.schedule", self.schedule, ALGORITHMS)
        choose("backend.ending", self.ending, ENDINGS)
        choose("backend.cost_model", self.cost_model, COST_MODELS)
        choose("backend.runtime", self.runtime, RUNTIMES)
        choose("backend.streams", self.streams, ("chains", "stage-order"))
        choose("backend.kernels", self.kernels, KERNEL_MODES)
        choose("backend.search_core", self.search_core, CORES)
        if self.search_workers < 0:
            raise ConfigError(f"backend.search_workers={self.search_workers} must be >= 0 (0: one per CPU core)")
        try:
            parse_channels_last(self.channels_last)
        except ValueError:
            choose("backend.channels_last", self.channels_last, LAYOUT_CHOICES)
        for p in self.passes:
            choose("backend.passes", p, PASSES)
        if self.opt_batch < 0:
            raise ConfigError(f"backend.opt_batch={self.opt_batch} must be >= 0 (0: the run's batch)")
        at_least("backend.", self, 1, "r", "s", "part_size", "greedy_streams", "number", "repeat", "keep",
                 "screen_limit")
        if self.s > 16:
            raise ConfigError(f"backend.s={self.s} is more streams per stage than the runtime keeps (16)")
