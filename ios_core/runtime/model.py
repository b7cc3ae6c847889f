"""A graph and its schedule, ready to run on a device: the merge rewrite applied,
weights on the device in the target precision, and a :class:`StreamProgram` for the
stages; on CUDA the whole forward is captured as one CUDA graph by default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..interpreters.base import weight_params
from ..ir import Graph
from ..schedule import Schedule, apply_merges
from .kernels import KernelTable
from .modes import RUNTIMES
from .ops import RuntimeOps, graph_channels
from .program import StreamProgram, remaining_path
from .target import TorchTarget


class ScheduledModel:
    """Runs ``graph`` by ``schedule``. ``runtime`` is one of :data:`RUNTIMES` (on the CPU
    every runtime runs multi-group stages on a thread pool)."""

    def __init__(self, graph: Graph, schedule: Schedule, device: str = "cpu", precision: str = "fp32",
                 runtime: str = "graph", channels_last: bool = False, fuse: bool = True, follow_chains: bool = True,
                 kernels: KernelTable | None = None):
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown runtime {runtime!r}; choose one of: {', '.join(RUNTIMES)}")
        schedule.check(graph)
        self.source, self.schedule = graph, schedule
        self.graph, self.plan = apply_merges(graph, schedule)
        self.target = TorchTarget(device, precision, channels_last)
        self.runtime = runtime
        on_cuda = self.target.device.type == "cuda"
        mode, self.captured = RUNTIMES[runtime] if on_cuda else ("threads", False)
        params = weight_params(self.graph, self.target.tensor)
        self.ops = RuntimeOps(graph_channels(self.graph), params, fuse=fuse and on_cuda, kernels=kernels)
        plan_stages = self.plan.stages()
        self.stages = [[[self.graph.node(n) for n in g] for g in st.groups] for st in plan_stages]
        self.program = StreamProgram(self.stages, self.ops, mode, barriers=[st.barrier for st in plan_stages],
                                     priority=remaining_path(self.graph), follow_chains=follow_chains)
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        env = {self.graph.input.name: x}
        self.program.run(env)
        return env[self.graph.output.name]

    __call__ = forward

    def prepare(self, batch: int) -> tuple[Callable[[Any], Any], Callable[[np.ndarray], Any]]:
        """(infer, load_input): on CUDA with a graph runtime, capture one CUDA graph on a
        static input; otherwise run eagerly under inference_mode (after one call, which settles the
        kernel choices, see :mod:`.kernels`; on CUDA a call before compiles their Triton programs at once)."""
        example = self.target.tensor(np.zeros((batch, *self.graph.input_shape), np.float32))
        kernels = self.ops.kernels
        if kernels is not None and self.target.device.type == "cuda":  # its Triton programs compiled at once
            with torch.inference_mode():
                kernels.ahead(lambda: self.forward(example))
        if self.captured:
            return self.target.capture(self.forward, example)
        with torch.inference_mode():  # one call settles every conv's kernel choice before it is recorded
            self.forward(example)
        self.target.synchronize()
        return self.target.infer_fn(self.forward), self.target.tensor

    def run(self, x: np.ndarray) -> np.ndarray:
        """One inference on a numpy input (eager; for checks and examples)."""
        with torch.inference_mode():
            y = self.forward(self.target.tensor(x))
        self.target.synchronize()
        return self.target.to_numpy(y)
