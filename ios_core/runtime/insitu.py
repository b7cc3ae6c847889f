"""In-situ timing of a part's candidate schedules: the part runs as it will in the model
(merges applied, the same stream program with its events and barrier flags, captured as
a CUDA graph, weights cold), so the search's final choice rests on measurement, not on
a sum of isolated stage times."""

from __future__ import annotations

import numpy as np
import torch

from ..interpreters.base import has_weights, node_params, weighted_nodes
from ..ir import Graph, Node
from ..schedule.merge import rewrite_stages
from ..schedule.schedule import Stage
from .kernels import KernelTable
from .ops import RuntimeOps
from .program import StreamProgram, remaining_path
from .target import TorchTarget
from .timer import TimingConfig, time_work


class PartTimer:
    """``timer(stages) -> ms``: the ``measure_part`` callable of :func:`ios_core.schedule.optimize`. ``ahead``: each
    call first compiles the Triton programs its kernel choice needs at once (:meth:`KernelTable.ahead`; for the
    layouts' whole models, where a part's few would not repay the extra call)."""

    def __init__(self, graph: Graph, target: TorchTarget, batch: int, mode: str = "edges", captured: bool = True,
                 timing: TimingConfig | None = None, fuse: bool = True, follow_chains: bool = True,
                 kernels: KernelTable | None = None, ahead: bool = False):
        self.graph, self.target, self.batch = graph, target, batch
        self.kernels = kernels
        cuda = target.device.type == "cuda"
        self.ahead = ahead and cuda
        self.mode = mode if cuda else "threads"
        self.captured = captured and cuda
        self.timing = timing or TimingConfig(warmup=3, number=5, repeat=5, cold=cuda)
        self.fuse = fuse and cuda
        self.priority = remaining_path(graph)
        self.follow_chains = follow_chains
        self.rng = np.random.default_rng(1)
        self.weights: dict[str, tuple] = {}
        self.inputs: dict[str, torch.Tensor] = {}
        self.calls = 0

    def _params(self, node: Node) -> dict[str, tuple]:
        key = node.hint if " " in node.hint else node.name  # a merged conv: its members' names
        out = {}
        for i, x in enumerate(weighted_nodes([node])):
            k = f"{key}#{i}"
            if k not in self.weights:
                assert has_weights(x), f"node {x.name}: has no weights"
                self.weights[k] = node_params(x, self.target.tensor)
            out[x.name] = self.weights[k]
        return out

    def _input(self, name: str) -> torch.Tensor:
        if name not in self.inputs:
            shape = self.graph.node(name).output_shape
            assert shape is not None
            x = self.rng.standard_normal((self.batch, *shape), dtype=np.float32)
            self.inputs[name] = self.target.tensor(x)
        return self.inputs[name]

    def __call__(self, stages: list[Stage]) -> float:
        self.calls += 1
        groups = rewrite_stages(self.graph, stages)
        params: dict[str, tuple] = {}
        channels: dict[str, int] = {}
        inside = {n.name for st in groups for g in st for n in g}
        env: dict[str, torch.Tensor] = {}
        for st in groups:
            for g in st:
                for n in g:
                    params.update(self._params(n))
                    channels[n.name] = n.out_channels_
                    for t in n.inputs:
                        for v in t:
                            if v.node not in inside and v.node not in env:
                                env[v.node] = self._input(v.node)
                                channels[v.node] = env[v.node].shape[1]
        ops = RuntimeOps(channels, params, fuse=self.fuse, kernels=self.kernels)
        prog = StreamProgram(groups, ops, self.mode, barriers=[st.barrier for st in stages], priority=self.priority,
                             follow_chains=self.follow_chains)
        with torch.inference_mode():
            if self.ahead and self.kernels is not None:  # a whole model: its Triton programs compiled at once
                self.kernels.ahead(lambda: prog.run(dict(env)))
            return time_work(self.target, lambda: prog.run(dict(env)), list(env.values()), self.captured,
                             self.timing)
