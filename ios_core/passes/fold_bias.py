"""Fold the bias of a conv without activation into the conv that alone reads it.

``conv_b(conv_a(x) + c) = conv_b(conv_a(x)) + sum_taps(W_b) c`` when ``conv_b`` has no
padding (every tap sees ``c``) and one group; ``conv_a`` then runs without a bias (one kernel
instead of two on CUDA, where cuDNN adds a bias in a separate kernel unless an activation is
fused). NASNet's and RandWire's separable convs (depthwise k x k, then pointwise 1x1, both
without activation) are the case this is for: inside a Sequential compound the pointwise conv
is the depthwise's only reader by construction."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Sequential
from ..ir.nodes import Conv, Value


def _foldable(a: object, b: object) -> bool:
    return (isinstance(a, Conv) and isinstance(b, Conv) and a.act == "identity" and a.bias is not None
            and b.weight is not None and b.groups == 1 and b.padding == (0, 0))


def _fold(a: Conv, b: Conv) -> None:
    assert a.bias is not None and b.weight is not None
    shift = b.weight.astype(np.float64).sum(axis=(2, 3)) @ a.bias.astype(np.float64)
    base = np.zeros(b.out_channels) if b.bias is None else b.bias.astype(np.float64)
    b.bias = (base + shift).astype(np.float32)
    a.bias = None


def run(graph: Graph) -> int:
    done = 0
    for block in graph.blocks:
        for n in block.nodes:
            if isinstance(n, Sequential):
                for a, b in zip(n.nodes, n.nodes[1:]):
                    if _foldable(a, b):
                        _fold(a, b)  # type: ignore[arg-type]
                        done += 1
    for block in graph.blocks:
        for a in block.nodes:
            readers = graph.users(a)
            if len(readers) != 1 or not isinstance(a, Conv):
                continue
            b = readers[0]
            if b.inputs == [[Value(a.name, 0, a.out_channels)]] and _foldable(a, b):
                _fold(a, b)  # type: ignore[arg-type]
                done += 1
    return done
