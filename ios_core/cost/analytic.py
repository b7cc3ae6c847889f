"""A deterministic roofline-style cost model: for tests, for planning graphs too big to
measure, and as a sanity reference for the measured model.

An op takes ``launch + max(flops / (peak * u), bytes / bandwidth)`` where the
utilisation ``u = min(1, output elements / saturation)`` models a small op that cannot
fill the device. A stage of concurrent groups takes the longer of its longest group
and its total device-busy work, plus a synchronisation cost when it has several groups;
so concurrency pays exactly when ops are too small to fill the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir import Graph, Node
from ..ir.nodes import Conv, Linear, Sequential
from ..schedule.schedule import Stage
from .signature import stage_nodes


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    peak_tflops: float
    bandwidth_gbs: float
    launch_us: float
    saturation: float  # output elements that fill the device
    sync_us: float


DEVICES = {
    "gpu": DeviceSpec("analytic-gpu", peak_tflops=50.0, bandwidth_gbs=2500.0, launch_us=2.5,
                      saturation=132 * 2048.0, sync_us=2.0),
    "cpu": DeviceSpec("analytic-cpu", peak_tflops=0.2, bandwidth_gbs=20.0, launch_us=10.0,
                      saturation=2 * 4096.0, sync_us=20.0),
}


class AnalyticCostModel:
    name = "analytic"
    thread_safe = True  # pure arithmetic: the DP may ask it from several threads (under one lock)

    def __init__(self, batch: int = 1, device: str | DeviceSpec = "gpu", itemsize: int = 4):
        self.batch = batch
        self.spec = DEVICES[device] if isinstance(device, str) else device
        self.itemsize = itemsize
        self.measurements = 0
        self.cache_hits = 0
        self._ops: dict[tuple[int, str], tuple[float, float]] = {}

    def op(self, graph: Graph, node: Node, in_shape) -> tuple[float, float]:
        """(latency ms, device share) of one unit run alone."""
        inner = node.nodes if isinstance(node, Sequential) else [node]
        total_t, busy = 0.0, 0.0
        shape = in_shape
        for n in inner:
            assert n.output_shape is not None
            out = float(np.prod(n.output_shape)) * self.batch
            flops = 2.0 * n.macs(shape) * self.batch
            w = _weight_elems(n, shape)
            nbytes = (float(np.prod(shape)) * self.batch + out + w) * self.itemsize
            u = min(1.0, out / self.spec.saturation)
            work_ms = max(flops / (self.spec.peak_tflops * 1e12 * u), nbytes / (self.spec.bandwidth_gbs * 1e9)) * 1e3
            total_t += self.spec.launch_us / 1e3 + work_ms
            busy += work_ms * u
            shape = n.output_shape
        return total_t, busy

    @property
    def sync_ms(self) -> float:
        """What a stage of several groups adds (the compiled DP core composes stages with it)."""
        return self.spec.sync_us / 1e3

    def unit_numbers(self, graph: Graph, name: str) -> tuple[float, float]:
        """(latency ms, device-busy ms) of one unit alone: a stage of groups takes
        max(longest group's latency sum, total busy) + sync_ms (see stage_latency)."""
        k = (id(graph), name)
        ops = self._ops
        if k not in ops:
            node = graph.node(name)
            ops[k] = self.op(graph, node, graph.input_shape_of(node))
        return ops[k]

    def stage_latency(self, graph: Graph, stage: Stage) -> float:
        self.measurements += 1
        ops = self._ops
        if stage.merge and len(stage.groups[0]) > 1:
            k = (id(graph), " ".join(stage.groups[0]))
            if k not in ops:
                node = stage_nodes(graph, stage)[0][0]
                ops[k] = self.op(graph, node, graph.input_shape_of(node))  # named after its first conv
            return ops[k][0]
        return compose(graph, stage, self.unit_numbers, self.sync_ms)

    def stats(self) -> dict[str, float]:
        return {"measurements": self.measurements, "cache_hits": self.cache_hits}

    def close(self) -> None:
        pass


def compose(graph: Graph, stage: Stage, unit_numbers: Callable[[Graph, str], tuple[float, float]],
            sync_ms: float) -> float:
    """A stage of concurrent groups from its units' (latency, device-busy) numbers: the longer of
    its longest group and its total busy work, plus ``sync_ms`` when it has several groups. The
    analytic and calibrated models share this rule, and the compiled DP core follows it in the
    same order of sums."""
    longest, work = 0.0, 0.0
    for group in stage.groups:
        t = 0.0
        for name in group:
            lt, busy = unit_numbers(graph, name)
            t += lt
            work += busy
        longest = max(longest, t)
    sync = sync_ms if len(stage.groups) > 1 else 0.0
    return max(longest, work) + sync


def _weight_elems(n: Node, in_shape) -> float:
    """Weight elements from the structure (the cost must not depend on weights being set)."""
    if isinstance(n, Conv):
        return n.out_channels * (in_shape[0] // n.groups) * n.kernel[0] * n.kernel[1] + n.out_channels
    if isinstance(n, Linear):
        return n.out_features * (int(np.prod(in_shape)) + 1)
    return 0.0
