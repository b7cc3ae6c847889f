"""The IR as a torch ``nn.Module``: one converter, shared by every backend that
starts from torch (pytorch eager / CUDA graph / torch.compile, the IOS runtime,
torch.export-based importers)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..ir import Graph, Node
from ..ir.nodes import Activation, Conv, Flatten, Linear, Op, Pool
from ..ir.ops import apply_activation
from .base import Interpreter, weighted_nodes


def _safe(name: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in name)


def torch_pool(node: Pool, x):
    """``node`` with ATen's pooling kernels (the IOS runtime may time a Triton kernel against it)."""
    if node.pool_type == "global_avg":
        return x.mean(dim=(2, 3), keepdim=True)
    if node.pool_type == "global_max":
        return torch.amax(x, dim=(2, 3), keepdim=True)
    if node.pool_type == "max":
        return F.max_pool2d(x, node.kernel, node.stride, node.padding, ceil_mode=node.ceil_mode)
    return F.avg_pool2d(x, node.kernel, node.stride, node.padding, ceil_mode=node.ceil_mode,
                        count_include_pad=node.count_include_pad)


def torch_activation(x: torch.Tensor, act: str) -> torch.Tensor:
    return apply_activation("torch", x, act)


class WeightSource(Protocol):
    """Where :class:`TorchOps` reads a weighted node's (weight, bias) from."""

    def params_of(self, node: Node) -> tuple[torch.Tensor | None, ...]: ...


class TorchOps(Interpreter[torch.Tensor]):
    """Torch implementations of every node kind, reading weights from a module."""

    target = "torch"

    def __init__(self, graph: Graph, module: WeightSource):
        super().__init__(graph)
        self.module: WeightSource = module

    def slice(self, x, begin, end, channels):
        return x[:, begin:end]

    def concat(self, xs):
        return torch.cat(xs, dim=1)

    def visit_conv(self, node: Conv, x):
        w, b = self.module.params_of(node)
        assert w is not None, f"node {node.name}: has no weights"
        y = F.conv2d(x, w, b, node.stride, node.padding, node.dilation, node.groups)
        return torch_activation(y, node.act)

    def visit_pool(self, node: Pool, x):
        return torch_pool(node, x)

    def visit_activation(self, node: Activation, x):
        return torch_activation(x, node.act)

    def visit_flatten(self, node: Flatten, x):
        return x.reshape(x.shape[0], -1, 1, 1)

    def visit_linear(self, node: Linear, x):
        w, b = self.module.params_of(node)
        assert w is not None, f"node {node.name}: has no weights"
        return F.linear(x.reshape(x.shape[0], -1), w, b)[:, :, None, None]

    def visit_op(self, node: Op, xs):
        return node.opdef.torch(node.operands(xs, list(self.module.params_of(node))), node.params)


class GraphModule(nn.Module):
    """``nn.Module`` whose forward interprets the graph with torch ops.

    Weights are copied from the IR (float32) into parameters named after the nodes.
    """

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph
        self._names: dict[str, list[str]] = {}
        for node in weighted_nodes(graph.nodes(), require=True):
            keys = self._names[node.name] = []
            for wkey, array in node.weights().items():
                key = f"{_safe(node.name)}_{wkey}"
                keys.append(key)
                self.register_parameter(key, None if array is None else nn.Parameter(
                    torch.from_numpy(np.array(array, np.float32)), requires_grad=False))
        self.ops = TorchOps(graph, self)

    def params_of(self, node: Node) -> tuple[torch.Tensor | None, ...]:
        return tuple(getattr(self, key) for key in self._names.get(node.name, ()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ops.run(x)


def to_torch(graph: Graph) -> GraphModule:
    """Convert an IR graph (with weights) into an eval-mode ``nn.Module``."""
    return GraphModule(graph).eval()
