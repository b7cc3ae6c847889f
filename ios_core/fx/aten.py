"""Dynamo's graph as ATen operators: one spelling per operation (``aten.convolution`` for every conv form, batch
norm as ``_native_batch_norm_legit_no_training``), no in-place ops or views to track (functionalized), the real
weights at hand to fold into the IR."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from .canonical import canonical


@dataclass
class AtenGraph:
    """An ATen graph, the values of its inputs (the module's weights among them) and which inputs are weights."""

    module: fx.GraphModule
    inputs: list[Any]
    weights: set[int]  # positions of the inputs that are the module's parameters and buffers

    def placeholders(self) -> list[fx.Node]:
        return [n for n in self.module.graph.nodes if n.op == "placeholder"]


def is_weight(name: str, value: Any) -> bool:
    """A graph input that is the module's state (Dynamo lifts parameters and buffers to inputs): fixed once
    compiled, so IOS folds it into the plan."""
    if not isinstance(value, torch.Tensor):
        return False
    if isinstance(value, torch.nn.Parameter) or getattr(value, "_dynamo_static_input_type", None) is not None:
        return True
    return "_parameters_" in name or "_buffers_" in name


#: kept whole: one IR operator each (a conv fuses them), not the arithmetic ATen's core set spells them as
KEPT = ("silu", "hardswish", "hardsigmoid", "_safe_softmax")


def _decompositions() -> dict:
    from torch._decomp import core_aten_decompositions

    kept = {getattr(torch.ops.aten, name) for name in KEPT}
    return {op: fn for op, fn in core_aten_decompositions().items() if getattr(op, "overloadpacket", op) not in kept}


def to_aten(gm: fx.GraphModule, inputs: Sequence[Any]) -> AtenGraph:
    """``gm`` (Dynamo's graph) traced with ``inputs`` into a functional ATen graph with concrete shapes: a graph
    Dynamo made dynamic is specialised to these inputs (each batch size is planned on its own)."""
    from torch.func import functionalize
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    with torch.no_grad(), sdpa_kernel([SDPBackend.MATH]):  # attention as its products (CUDA picks a fused kernel)
        traced = make_fx(functionalize(gm, remove="mutations_and_views"),
                         decomposition_table=_decompositions())(*inputs)
    traced.graph.eliminate_dead_code()  # the pooling indices and batch statistics nothing reads
    canonical(traced)
    weights = {i for i, (name, v) in enumerate(zip(names, inputs)) if is_weight(name, v)}
    return AtenGraph(traced, list(inputs), weights)
