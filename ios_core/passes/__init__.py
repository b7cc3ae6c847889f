"""Graph rewrite passes: fewer and cheaper kernels for the same function.

Each pass lives in its own module and is a function ``graph -> count`` that rewrites a graph
in place and returns how many rewrites it made; :func:`apply_passes` runs a list of them on a
copy, so the caller's graph (the float64 reference's ground truth) is never touched. Every pass
is exact in real arithmetic: the rewritten graph computes the same function up to floating-point
rounding (tests/test_passes.py checks each one against the float64 reference).

* ``fold_bias``: the bias of a conv without activation moves into the bias of the unpadded conv
  that alone reads it (NASNet's and RandWire's separable convs ran a separate bias kernel for
  every depthwise conv).
* ``pool_conv``: an average pool (stride 1, padding counted) read only by a 1x1 conv becomes one
  k x k conv with the weights / k^2 (Inception's pool branches lose a pool kernel and a buffer).
* ``attention``: ``softmax(q @ kt * scale [+ mask]) @ v`` becomes one ``attention`` operator (PyTorch's
  fused attention kernel on CUDA).
* ``fuse_pointwise``: connected pointwise operators with one output become one ``fused`` operator (one
  Inductor-compiled kernel on CUDA where it times faster: GELU's five operators, scales and gates).

BatchNorm is folded into the conv before it when an ONNX model is imported (ios_core.onnx), so
it never reaches the IR.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable

from ..ir import Graph
from . import attention, fold_bias, fuse_pointwise, pool_conv

GraphPass = Callable[[Graph], int]

#: every pass by name, in the order they are applied
PASSES: dict[str, GraphPass] = {"fold_bias": fold_bias.run, "pool_conv": pool_conv.run, "attention": attention.run,
                                "fuse_pointwise": fuse_pointwise.run}


def check_passes(names: Iterable[str]) -> list[str]:
    names = list(names)
    for name in names:
        if name not in PASSES:
            raise ValueError(f"unknown graph pass {name!r}; choose from: {', '.join(PASSES)}")
    return names


def apply_passes(graph: Graph, names: Iterable[str]) -> tuple[Graph, dict[str, int]]:
    """A rewritten copy of ``graph`` (the same object when no pass applies) and the number of
    rewrites per pass. Passes run in :data:`PASSES` order whatever the order of ``names``."""
    wanted = set(check_passes(names))
    counts: dict[str, int] = {}
    out = graph
    for name, fn in PASSES.items():
        if name not in wanted:
            continue
        if out is graph:
            out = copy.deepcopy(graph)
        counts[name] = fn(out)
    if out is not graph:
        if not any(counts.values()):
            return graph, counts
        out.lint()  # the passes edited it through the use-tracking API: the tracking and the structure hold
    return out, counts
