"""Timing work on the device the way it runs in a model: the measured cost model's and
the in-situ selection's instrument.

:func:`time_work` times a callable that enqueues work on the current stream (a stage,
or a whole part of a schedule with its own forks and joins). On CUDA with capture it
captures ``number`` copies into one CUDA graph, each copy preceded by an L2 flush (a
write larger than the L2 cache, so weights come from HBM as they do when a model larger
than L2 runs) and by a touch of the copy's inputs (activations just produced by the
previous stage are in L2 in a real run), and brackets each copy with timing events
recorded inside the graph. The graph is replayed ``repeat`` times; the result is the
median over all ``number * repeat`` copies, robust to the odd slow or lucky sample.
Eager runtimes time ``number`` calls per repeat with CUDA events (the host clock on the
CPU); they run with weights hot, as ``cold`` applies to captured timing only.

:class:`StageTimer` times one candidate stage in isolation: external inputs are random
tensors of the right shapes, weights are the graph's (or random, for a merged conv).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import numpy as np
import torch

from ..interpreters.base import has_weights, node_params, weighted_nodes
from ..ir import Graph, Node
from .kernels import KernelTable
from .ops import Params, RuntimeOps, random_params
from .program import StreamProgram
from .streams import capture_stream
from .target import TorchTarget

_FLUSH: dict[int, torch.Tensor] = {}
_CAPTURES = 0


def l2_flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer 1.5x the device's L2 cache; zeroing it evicts everything else from L2."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _FLUSH:
        l2 = int(getattr(torch.cuda.get_device_properties(idx), "L2_cache_size", 0) or 50 * 2**20)
        _FLUSH[idx] = torch.empty(int(1.5 * l2) // 4 + 1, dtype=torch.float32, device=f"cuda:{idx}")
    return _FLUSH[idx]


def release_flush_buffers() -> None:
    """Drop the L2 flush buffers (tens of MB): made again when timing next needs one; held past a plan
    they counted as the model's memory in the timed loop."""
    _FLUSH.clear()


class TimingConfig:
    """How work is timed: copies per capture, replays, warmup replays, cold L2, and ``guard``:
    a context entered around each timing (a launcher's device lease: no other job times on the
    device meanwhile)."""

    def __init__(self, warmup: int = 2, number: int = 5, repeat: int = 3, cold: bool = True,
                 guard: Callable[[], contextlib.AbstractContextManager[object]] | None = None):
        self.warmup, self.number, self.repeat, self.cold = warmup, number, repeat, cold
        self.guard = guard or contextlib.nullcontext


Work = tuple[Callable[[], object], list[torch.Tensor]]  # (enqueue it on the current stream, inputs to touch)


def time_work(target: TorchTarget, run: Callable[[], object], touch: list[torch.Tensor], captured: bool,
              tc: TimingConfig) -> float:
    """Median milliseconds of one call of ``run`` (see the module docstring)."""
    return time_works(target, [(run, touch)], captured, tc)[0]


def time_works(target: TorchTarget, works: list[Work], captured: bool, tc: TimingConfig) -> list[float]:
    """Median milliseconds of each work. Captured, all of them go into one CUDA graph
    (each copy of each work behind its own flush and between its own events), so a batch
    of stages costs one capture, one instantiation and ``warmup + repeat`` replays."""
    with tc.guard(), torch.inference_mode():  # the flush buffer and the inputs are inference tensors
        if target.device.type == "cuda" and captured:
            return _time_captured(target, works, tc)
        return [_time_eager(target, run, tc) for run, _ in works]


def _time_eager(target: TorchTarget, run: Callable[[], object], tc: TimingConfig) -> float:
    cuda = target.device.type == "cuda"
    for _ in range(tc.warmup):
        run()
    target.synchronize()
    times = []
    for _ in range(tc.repeat):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            a.record()
            for _ in range(tc.number):
                run()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / tc.number)
        else:
            t = time.perf_counter()
            for _ in range(tc.number):
                run()
            times.append((time.perf_counter() - t) * 1e3 / tc.number)
    return float(np.median(times))


def _time_captured(target: TorchTarget, works: list[Work], tc: TimingConfig) -> list[float]:
    cap = capture_stream()
    cap.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(cap):
        for run, _ in works:
            run()  # cuDNN picks its algorithms outside the capture
    torch.cuda.current_stream().wait_stream(cap)
    flush = l2_flush_buffer(target.device) if tc.cold else None
    marks = [[(torch.cuda.Event(enable_timing=True, external=True), torch.cuda.Event(enable_timing=True, external=True))
              for _ in range(tc.number)] for _ in works]
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=cap):
        for (run, touch), pairs in zip(works, marks):
            for a, b in pairs:
                if flush is not None:
                    flush.zero_()
                    for x in touch:
                        x.mul_(1.0)
                a.record(cap)
                run()
                b.record(cap)
    for _ in range(tc.warmup):
        g.replay()
    times: list[list[float]] = [[] for _ in works]
    for _ in range(tc.repeat):
        g.replay()
        torch.cuda.synchronize()
        for out, pairs in zip(times, marks):
            out.extend(a.elapsed_time(b) for a, b in pairs)
    del g
    global _CAPTURES
    _CAPTURES += 1
    if _CAPTURES % 64 == 0:  # each capture had a private memory pool: give the freed ones back
        torch.cuda.empty_cache()
    return [float(np.median(t)) for t in times]


def kernel_timer(target: TorchTarget, guard=None) -> Callable[[list[Callable[[], object]]], list[float]]:
    """The :class:`KernelTable`'s instrument: candidate convs captured together and replayed
    back to back (warm: a kernel's choice should not hinge on where its weights were)."""
    tc = TimingConfig(warmup=2, number=5, repeat=3, cold=False, guard=guard)
    cuda = target.device.type == "cuda"
    return lambda calls: time_works(target, [(c, []) for c in calls], cuda, tc)


class StageTimer:
    def __init__(self, target: TorchTarget, batch: int, mode: str = "edges", captured: bool = True,
                 warmup: int = 2, number: int = 5, repeat: int = 3, fuse: bool = True, cold: bool = True,
                 guard: Callable[[], contextlib.AbstractContextManager[object]] | None = None,
                 kernels: KernelTable | None = None):
        self.target, self.batch = target, batch
        self.kernels = kernels
        self.cuda = target.device.type == "cuda"
        self.mode = mode if self.cuda else "threads"
        self.captured = captured and self.cuda
        self.timing = TimingConfig(warmup, number, repeat, cold and self.cuda, guard)
        self.fuse = fuse and self.cuda
        self.params: dict[str, list[tuple[torch.Tensor | None, ...]]] = {}
        self.inputs: dict[tuple, torch.Tensor] = {}
        self.generator = target.generator()

    def _weights(self, graph: Graph, node: Node) -> None:
        # a merged conv carries its first conv's name: key it by its hint ("a b c") instead
        key = node.hint if " " in node.hint else node.name
        inner = list(weighted_nodes([node]))
        if key not in self.params:
            tensor = self.target.tensor
            if all(has_weights(x) for x in inner):
                self.params[key] = [node_params(x, tensor) for x in inner]
            else:  # a merged conv reads what its first conv reads, so the graph knows its input shape
                rp = random_params(node, graph.input_shape_of(node),
                                   lambda shape: self.target.random(shape, self.generator))
                self.params[key] = [rp[x.name] for x in inner]
        for x, p in zip(inner, self.params[key]):
            self.current[x.name] = p

    def _input(self, shape) -> torch.Tensor:
        key = tuple(shape)
        if key not in self.inputs:
            self.inputs[key] = self.target.random((self.batch, *shape), self.generator, scale=1.0)
        return self.inputs[key]

    def _work(self, graph: Graph, groups: list[list[Node]]) -> Work:
        """The stage as a program on random external inputs, ready to enqueue."""
        self.current: Params = {}
        env: dict[str, torch.Tensor] = {}
        channels: dict[str, int] = {}
        inside = {n.name for g in groups for n in g}
        for g in groups:
            for n in g:
                self._weights(graph, n)
                channels[n.name] = n.out_channels_
                for t in n.inputs:
                    for v in t:
                        if v.node not in inside and v.node not in env:
                            shape = graph.node(v.node).output_shape
                            assert shape is not None
                            env[v.node] = self._input(shape)
                            channels[v.node] = shape[0]
        ops = RuntimeOps(channels, self.current, fuse=self.fuse, kernels=self.kernels)
        prog = StreamProgram([groups], ops, self.mode)
        return (lambda: prog.run(dict(env))), list(env.values())

    def time(self, graph: Graph, groups: list[list[Node]]) -> float:
        """Median milliseconds of one run of the stage."""
        return self.time_many(graph, [groups])[0]

    def time_many(self, graph: Graph, stages: list[list[list[Node]]]) -> list[float]:
        """Median milliseconds of each stage, all timed in one captured graph."""
        return time_works(self.target, [self._work(graph, groups) for groups in stages], self.captured,
                          self.timing)
