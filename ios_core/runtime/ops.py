"""Torch ops for the runtime: the IR's torch interpreter reading weights and channel
counts from plain dicts (so a stage can run outside its graph, e.g. a merged conv being
measured), with cuDNN's fused conv + bias + ReLU where torch exposes it, and the kernel
:class:`~.kernels.KernelTable` chose for each convolution and pool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..interpreters.base import Interpreter
from ..interpreters.torch import TorchOps, torch_activation, torch_pool
from ..ir import Graph, Node
from ..ir.nodes import Conv, Linear, Op, Pool, Sequential
from .kernels import (
    KernelTable,
    conv_gemm,
    conv_native,
    depthwise_ok,
    fused_signature,
    pool_signature,
    sig_text,
    triton_conv,
    triton_fused,
)
from .triton_depthwise import triton_depthwise
from .triton_pool import triton_pool

Params = dict[str, tuple[torch.Tensor | None, ...]]  # a node's arrays, see interpreters.base.node_params


class RuntimeOps(TorchOps):
    target = "ios runtime"

    def __init__(self, channels: dict[str, int], params: Params, fuse: bool = True,
                 kernels: KernelTable | None = None):
        Interpreter.__init__(self, None)  # type: ignore[arg-type]
        self._channels = channels
        self.params = params
        self.fuse = fuse
        self.kernels = kernels
        self._nchw_weights: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id -> (weight, its NCHW copy)
        self.module = self  # TorchOps reads weights through module.params_of

    def params_of(self, node: Node) -> tuple[torch.Tensor | None, ...]:
        return self.params.get(node.name, ())  # an operator without constants has none

    def channels(self, name: str) -> int:
        return self._channels[name]

    def visit_conv(self, node: Conv, x):
        impl = "cudnn" if self.kernels is None else self.kernels.impl(node, x, lambda i: self.conv(i, node, x))
        return self.conv(impl, node, x)

    def conv(self, impl: str, node: Conv, x):
        """``node`` on ``x`` with the implementation ``impl`` (see :mod:`.kernels`)."""
        w, b = self.params[node.name]
        assert w is not None, f"node {node.name}: has no weights"
        if impl == "triton" and self.kernels is not None:
            if depthwise_ok(node, x):  # the hand-written depthwise kernel (a depthwise conv gets no template)
                return self.kernels.run_compiled(self.kernels.depthwise_key(node, x), lambda: triton_depthwise(node),
                                                 (x, self._nchw(w), b), lambda: self.conv("cudnn", node, x),
                                                 vendor="cudnn")
            return self.kernels.run_compiled(self.kernels.template_key(node, x), lambda: triton_conv(node),
                                             (x, w, b), lambda: self.conv("cudnn", node, x), vendor="cudnn")
        if impl == "gemm":
            y = conv_gemm(x, w, b)
            return torch_activation(y, node.act)
        if impl == "native":
            return torch_activation(conv_native(node, x, self._nchw(w), b), node.act)
        if self.fuse and node.act == "relu" and x.is_cuda:
            return torch.cudnn_convolution_relu(x, w, b, node.stride, node.padding, node.dilation, node.groups)
        return super().visit_conv(node, x)

    def _nchw(self, w: torch.Tensor) -> torch.Tensor:
        """``w`` in NCHW memory, copied once per weight (a copy made per call would be captured, and replayed)."""
        if w.is_contiguous():
            return w
        kept = self._nchw_weights.get(id(w))
        if kept is None or kept[0] is not w:
            kept = self._nchw_weights[id(w)] = (w, w.contiguous())
        return kept[1]

    def visit_pool(self, node: Pool, x):
        if self.kernels is None or node.pool_type not in ("max", "avg"):
            return super().visit_pool(node, x)
        return self.pool(self.kernels.pool_impl(node, x, lambda i: self.pool(i, node, x)), node, x)

    def pool(self, impl: str, node: Pool, x):
        """``node`` on ``x`` with ATen's kernel or its own Triton kernel (see :mod:`.kernels`)."""
        if impl == "triton" and self.kernels is not None:
            return self.kernels.run_compiled(sig_text(pool_signature(node, x)), lambda: triton_pool(node), (x,),
                                             lambda: torch_pool(node, x))
        return torch_pool(node, x)

    def visit_op(self, node: Op, xs):
        if node.op != "fused" or self.kernels is None:
            return super().visit_op(node, xs)
        operands = node.operands(xs, list(self.params_of(node)))
        return self.fused(self.kernels.fused_impl(node, operands, lambda i: self.fused(i, node, operands)), node,
                          operands)

    def fused(self, impl: str, node: Op, operands: list):
        """A fused pointwise program: its operators one by one, or Inductor's one kernel (see :mod:`.kernels`)."""
        if impl == "triton" and self.kernels is not None:
            return self.kernels.run_compiled(sig_text(fused_signature(node, operands)), lambda: triton_fused(node),
                                             tuple(operands), lambda: node.opdef.torch(operands, node.params))
        return node.opdef.torch(operands, node.params)


def graph_channels(graph: Graph) -> dict[str, int]:
    return {n.name: n.out_channels_ for n in graph.nodes()}


def random_params(node: Node, in_shape, random: Callable[[tuple[int, ...]], Any]) -> Params:
    """Weights of the right shapes for timing a node that has none (a merged conv): ``random(shape)`` makes
    one tensor (on the device: numpy's generator took 4 s of Inception v3's search for its merged convs)."""
    params: Params = {}
    shape = in_shape
    for x in (node.nodes if isinstance(node, Sequential) else [node]):
        if isinstance(x, Conv):
            params[x.name] = (random((x.out_channels, shape[0] // x.groups, *x.kernel)), random((x.out_channels,)))
        elif isinstance(x, Linear):
            params[x.name] = (random((x.out_features, int(np.prod(shape)))), random((x.out_features,)))
        shape = x.output_shape
    return params
