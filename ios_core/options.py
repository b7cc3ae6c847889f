"""The options of :func:`ios_core.planner.plan`, apart from the planner so that a caller can check them (and
list them in its ``--help``) without importing torch."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .passes import PASSES
from .runtime.modes import KERNEL_MODES, RUNTIMES
from .runtime.target import CUDNN_SEARCHES, LAYOUT_CHOICES, parse_channels_last
from .schedule.options import OptionError, SearchOptions, at_least, choose

COST_MODELS = ("auto", "measured", "calibrated", "analytic")

#: The one declaration of which options each file the planner keeps depends on: a saved schedule, a layout
#: choice, the stage-cost cache and the kernel choices. Every key is derived from it (``PlanOptions.key``);
#: the options of :meth:`PlanOptions.variant` are in every key where they are not at their default. A test
#: changes each option in turn and checks that exactly the keys declared here change.
DEPENDS_ON: dict[str, tuple[str, ...]] = {
    "schedule": ("schedule", "r", "s", "part_size", "part_cuts", "ending", "cost_model", "keep", "select", "prune",
                 "runtime", "streams", "greedy_streams", "screen_limit", "cold", "number", "repeat", "warmup", "fuse",
                 "kernels", "passes"),
    "layout": ("runtime", "streams", "greedy_streams", "fuse", "kernels", "passes", "layout_screen"),
    "stage_costs": ("runtime", "fuse", "number", "repeat", "cold", "kernels", "passes"),
    "kernel_choices": ("fuse",),
}
#: options no kept file depends on: how the work is done or shown, or what a run is given rather than saves
#: (a schedule file, another GPU's schedule, a forced layout: that one is in the schedule's key as the layout)
DEPENDS_ON_NONE = ("share_parts", "search_core", "search_workers", "progress", "research", "compile_threads",
                   "channels_last", "layout_any_batch", "schedule_any_batch", "schedule_file", "schedule_device",
                   "opt_batch", "bounds")
#: spelled out in a kept file's name rather than hashed into it
SPELLED = ("schedule",)
#: graph passes on by default: each measured on/off on the GPU (BENCHMARKS.md, "IOS on the fastest kernels")
DEFAULT_PASSES = ("fold_bias", "pool_conv", "attention", "fuse_pointwise")


@dataclass
class PlanOptions(SearchOptions):
    """The search's options plus how stages are costed and timed and how the model will run."""

    cost_model: str = "auto"  # auto, measured, calibrated, analytic
    select: bool = True  # time each part's candidates as they run (with Greedy's and Sequential's), keep the fastest
    research: bool = False  # search again even when these settings' schedule is saved
    runtime: str = "graph"  # graph, graph-stages, eager, ios-faithful
    streams: str = "chains"  # chains (follow producers, avoid false dependencies) or stage-order (group j on stream j)
    fuse: bool = True  # cuDNN conv+bias+ReLU on CUDA
    passes: list[str] = field(default_factory=lambda: list(DEFAULT_PASSES))  # graph rewrites (ios_core.passes)
    kernels: str = "auto"  # per conv: auto (time cuDNN and GEMM, keep the faster), cudnn, gemm
    triton_convs: bool = False  # auto kernels: the final model's convs also timed against Inductor's Triton template
    #: auto kernels (no effect with the others): depthwise convs (the layout's, the search's and the final
    #: model's) run on the Triton kernel written here, timed against ATen's (what triton_convs offers them,
    #: without Inductor's template for the other convs). On by default: it beat cuDNN on most of NASNet's
    #: shapes, and a warm rerun loads it from Triton's disk cache instead of building cuDNN's plans (faster to
    #: start and to run: BENCHMARKS.md); its programs are compiled once per machine, on compile_threads threads
    triton_depthwise: bool = True
    #: with triton_depthwise: cuDNN's depthwise kernel timed too. Off by default: it builds each depthwise plan
    #: anew in every process (250-400 ms a shape, in the layout's timing, the search's and every warm rerun)
    #: and beat the Triton kernel on 5 of NASNet's 25 shapes by 1-29% (2.5 us summed)
    depthwise_cudnn: bool = False
    #: auto kernels, where cuDNN's depthwise kernel is a candidate: it is kept only where faster than ATen's and
    #: Triton's by more than this fraction (the others start in milliseconds). 0: the fastest, as timed
    depthwise_start_margin: float = 0.0
    #: threads that compile the Triton programs of the kernel choice at once (0: every core this process may
    #: use; the harness gives a job under its load-aware launcher its CPU slot's share)
    compile_threads: int = 0
    #: cuDNN's execution plan per convolution shape: ``heuristic`` (the first plan cuDNN's heuristics rank, nothing
    #: timed: the same plans in every process) or ``benchmark`` (each new shape's candidate plans timed, torch's
    #: cudnn.benchmark, chosen anew by each process). Heuristic by default: the spread between processes is what
    #: it removes (BENCHMARKS.md, "What makes processes differ")
    cudnn_search: str = "heuristic"
    channels_last: str = "auto"  # auto (time both layouts on CUDA, keep the faster), true (NHWC), false (NCHW)
    layout_screen: float = 0.1  # auto layout: vendor kernels decide where one layout is faster by this fraction
    layout_any_batch: bool = True  # auto layout: reuse the choice saved for another batch size of the workload
    schedule_any_batch: int = 0  # reuse a schedule this search made for a batch size within this factor (0: its own)
    warmup: int = 2  # stage timing for the measured cost model: warmup replays,
    number: int = 5  # copies per captured graph (each after an L2 flush),
    repeat: int = 3  # and replays; the median of number x repeat samples
    cold: bool = True  # flush L2 before each timed copy, as weights arrive in a model larger than L2
    schedule_file: str = ""  # run this saved schedule (with the passes and layout it was made with), never saved over
    schedule_device: str = ""  # run the schedule the same search saved on this GPU (its name or start: nvidia-h200)
    opt_batch: int = 0  # search (or reuse) the schedule for this batch size and run it at the workload's; 0: the same
    bounds: bool = False  # critical-path and sum-of-ops bounds under the cost model, as metrics

    def variant(self) -> dict[str, str]:
        """Options that change every timing but were added after files were saved: named (in file names and
        cache keys) only where not at the value the files saved before them were made with, so those are still
        found, and never taken for another value's (cudnn_search's default is now heuristic, named)."""
        named = {"cudnn_search": self.cudnn_search} if self.cudnn_search != "benchmark" else {}
        if self.depthwise_start_margin:  # it picks kernels in the search's stages and the layout's timing too
            named["depthwise_start_margin"] = f"start margin {self.depthwise_start_margin:g}"
        if self.depthwise_cudnn:
            named["depthwise_cudnn"] = "depthwise cudnn"
        if not self.triton_depthwise:  # the kernels a stage and the final model are timed with
            named["triton_depthwise"] = "no triton depthwise"
        if self.triton_convs:
            named["triton_convs"] = "triton convs"
        return named

    def schedule_name(self, channels_last: bool) -> str:
        """The saved schedule's name for these options (a baseline's: its name alone)."""
        if self.schedule in ("sequential", "greedy"):
            return self.schedule
        digest = self.digest("schedule", channels_last=channels_last)
        return f"{self.schedule}-r{self.r}-s{self.s}-k{self.keep}-{digest}"

    def key(self, kind: str, *facts: Any) -> str:
        """The key of the file ``kind`` (a key of :data:`DEPENDS_ON`) for these options: the declared options'
        values in order (passes sorted), after ``facts`` (what else it depends on: versions, GPU, batch), then
        :meth:`variant`'s. Kernel choices keep their older spelled-out form (``fuse True``)."""
        if kind == "kernel_choices":
            return " ".join([*map(str, facts[:1]), *(f"{k} {getattr(self, k)}" for k in DEPENDS_ON[kind]),
                             *map(str, facts[1:]), *self.variant().values()])
        values = [sorted(v) if isinstance(v := getattr(self, k), list) else v for k in DEPENDS_ON[kind]]
        return "|".join(map(str, (*facts, *values, *self.variant().values())))

    def check(self) -> None:
        SearchOptions.check(self)
        choose("cost_model", self.cost_model, COST_MODELS)
        choose("runtime", self.runtime, RUNTIMES)
        choose("streams", self.streams, ("chains", "stage-order"))
        choose("kernels", self.kernels, KERNEL_MODES)
        choose("cudnn_search", self.cudnn_search, CUDNN_SEARCHES)
        if not 0.0 <= self.depthwise_start_margin <= 1.0:
            raise OptionError(f"depthwise_start_margin={self.depthwise_start_margin}: a fraction between 0 and 1 "
                              f"(0.05: cuDNN's depthwise kernel kept where it is more than 5% faster)")
        if self.depthwise_start_margin and self.triton_depthwise and not self.depthwise_cudnn:
            raise OptionError(f"depthwise_start_margin={self.depthwise_start_margin} has no effect: cuDNN's depthwise "
                              f"kernel is not a candidate beside the Triton one; set depthwise_cudnn=true")
        if self.triton_convs and self.kernels != "auto":  # triton_depthwise, on by default, just has no effect
            raise OptionError(f"triton_convs=true needs kernels=auto (the Triton conv is timed against the vendor's "
                              f"kernel), not kernels={self.kernels}")
        try:
            parse_channels_last(self.channels_last)
        except ValueError:
            choose("channels_last", self.channels_last, LAYOUT_CHOICES)
        for p in self.passes:
            choose("passes", p, PASSES)
        at_least(self, 1, "number", "repeat")
        if not 0 <= self.layout_screen < 10:
            raise OptionError(f"layout_screen={self.layout_screen}: a fraction from 0 (always time the layouts with "
                              "the kernel choice) to below 10")
        at_least(self, 0, "opt_batch", "schedule_any_batch", "compile_threads")

    def digest(self, kind: str, **more: Any) -> str:
        """A short hash of the options file ``kind`` depends on (:data:`DEPENDS_ON`; and ``more``, and
        :meth:`variant`): part of a saved schedule's or layout choice's name."""
        hashed = {k: getattr(self, k) for k in DEPENDS_ON[kind] if k not in SPELLED}
        settings = json.dumps({**hashed, **more, **self.variant()}, sort_keys=True, default=str)
        return hashlib.sha1(settings.encode()).hexdigest()[:10]
