"""Which memory layout a model runs faster in: timed, not assumed.

NHWC (``channels_last``) halves Inception's fp16 latency on a Hopper GPU (cuDNN's NCHW convs
convert layouts around most kernels) but makes RandWire slower (its depthwise convs fall to
a generic kernel), so the layout is chosen per model, batch, precision and GPU by timing
the model under Greedy's schedule in both layouts, with the same kernels, passes and
runtime it will run with, replayed back to back as the measurement protocol replays it."""

from __future__ import annotations

from collections.abc import Callable

from ..ir import Graph
from ..schedule.schedule import greedy
from .insitu import PartTimer
from .kernels import KernelTable
from .target import TorchTarget, layout_name
from .timer import TimingConfig


def time_layouts(graph: Graph, batch: int, device: str, precision: str, *, mode: str = "edges",
                 captured: bool = True, fuse: bool = True, follow_chains: bool = True, greedy_streams: int = 10,
                 kernels: Callable[[TorchTarget], KernelTable | None] | None = None,
                 timing: TimingConfig | None = None) -> dict[str, float]:
    """Milliseconds of one inference of ``graph`` under Greedy, per layout (``nchw``, ``nhwc``)."""
    stages = greedy(graph, greedy_streams).stages()
    out: dict[str, float] = {}
    for channels_last in (False, True):
        target = TorchTarget(device, precision, channels_last)
        timer = PartTimer(graph, target, batch, mode, captured,
                          timing or TimingConfig(warmup=3, number=5, repeat=5, cold=False), fuse=fuse,
                          follow_chains=follow_chains, kernels=kernels(target) if kernels else None, ahead=True)
        out[layout_name(channels_last)] = timer(stages)
    return out

