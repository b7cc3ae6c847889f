"""Timing one stage in isolation on the device, through the same runtime that runs the
model: the measured cost model's instrument.

On CUDA with a graph runtime the stage is captured ``number`` times back to back (with a
join/fork of its streams in between, the stage barrier the DP assumes) into one CUDA
graph, replayed ``warmup`` times, then timed ``repeat`` times with CUDA events; the
result is the median per-stage time. Eager runtimes and the CPU time ``number`` runs
per repeat directly. External inputs are random tensors of the right shapes; weights
are the graph's (or random, for a merged conv that has none).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..interpreters.base import weighted_nodes
from ..ir import Graph, Node
from .ops import RuntimeOps, random_params
from .program import StreamProgram
from .target import TorchTarget


class StageTimer:
    def __init__(self, target: TorchTarget, batch: int, mode: str = "edges", captured: bool = True,
                 warmup: int = 2, number: int = 6, repeat: int = 6, fuse: bool = True):
        self.target, self.batch = target, batch
        self.cuda = target.device.type == "cuda"
        self.mode = mode if self.cuda else "threads"
        self.captured = captured and self.cuda
        self.warmup, self.number, self.repeat = warmup, number, repeat
        self.fuse = fuse and self.cuda
        self.params: dict[str, tuple] = {}
        self.inputs: dict[tuple, torch.Tensor] = {}
        self.rng = np.random.default_rng(0)
        self.streams = [torch.cuda.Stream() for _ in range(16)] if self.cuda else None

    def _weights(self, graph: Graph, node: Node) -> None:
        # a merged conv carries its first conv's name: key it by its hint ("a b c") instead
        key = node.hint if " " in node.hint else node.name
        inner = list(weighted_nodes([node]))
        if key not in self.params:
            tensor = self.target.tensor
            if all(x.weight is not None for x in inner):
                self.params[key] = [(tensor(x.weight), None if x.bias is None else tensor(x.bias)) for x in inner]
            else:  # a merged conv reads what its first conv reads, so the graph knows its input shape
                rp = random_params(node, graph.input_shape_of(node), tensor, self.rng)
                self.params[key] = [rp[x.name] for x in inner]
        for x, p in zip(inner, self.params[key]):
            self.current[x.name] = p

    def _input(self, shape) -> torch.Tensor:
        key = tuple(shape)
        if key not in self.inputs:
            self.inputs[key] = self.target.tensor(self.rng.standard_normal((self.batch, *shape), dtype=np.float32))
        return self.inputs[key]

    def time(self, graph: Graph, groups: list[list[Node]]) -> float:
        """Median milliseconds of one run of the stage."""
        self.current: dict[str, tuple] = {}
        env: dict[str, torch.Tensor] = {}
        channels: dict[str, int] = {}
        inside = {n.name for g in groups for n in g}
        for g in groups:
            for n in g:
                self._weights(graph, n)
                channels[n.name] = n.output_shape[0]
                for t in n.inputs:
                    for v in t:
                        if v.node not in inside and v.node not in env:
                            shape = graph.node(v.node).output_shape
                            env[v.node] = self._input(shape)
                            channels[v.node] = shape[0]
        ops = RuntimeOps(channels, self.current, fuse=self.fuse)
        prog = StreamProgram([groups], ops, self.mode, streams=self.streams)
        with torch.inference_mode():
            if self.captured:
                return self._time_graph(prog, env)
            return self._time_eager(prog, env)

    def _time_eager(self, prog: StreamProgram, env: dict) -> float:
        for _ in range(self.warmup):
            prog.run(dict(env))
        self.target.synchronize()
        times = []
        for _ in range(self.repeat):
            if self.cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                a.record()
                for _ in range(self.number):
                    prog.run(dict(env))
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / self.number)
            else:
                t = time.perf_counter()
                for _ in range(self.number):
                    prog.run(dict(env))
                times.append((time.perf_counter() - t) * 1e3 / self.number)
        return float(np.median(times))

    def _time_graph(self, prog: StreamProgram, env: dict) -> float:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            prog.run(dict(env))  # warm cuDNN's algorithm choice outside the capture
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(self.number):
                prog.run(dict(env))
        for _ in range(self.warmup):
            g.replay()
        times = []
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(self.repeat):
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / self.number)
        del g
        return float(np.median(times))
