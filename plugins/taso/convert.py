"""The IR as TASO graph-builder calls (``taso.new_graph()``'s ``PyGraph`` methods).

The converter only calls builder methods, so the same code drives the real ``taso`` module
or the tests' recording fake. Every mapping is exact:

- conv: ``conv2d`` with no fused activation, then ``add`` of the bias as a (1, C, 1, 1)
  weight, then the activation as its own op. TASO's conv has no bias, and fusing the
  activation into it would apply it before the bias; its ``export_onnx`` also drops fused
  activations (``operator_attrs['Conv']`` has none), so separate ops survive the export.
- padding: ``SAME`` or ``VALID`` where one is exact (padding.py); otherwise the IR's padding
  is made explicit by concatenating constant weights on H and W (zeros; float32's lowest
  value for max pooling, which ignores it as cuDNN does) and the op runs VALID. TASO's
  Python API has no pad op (core.pyx has none; its ONNX importer turns Pad into a no-op).
- average pooling: TASO's divides by the window cells inside its input
  (CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, src/cudnn/pool2d_kernel.cu); where the IR's
  divisor differs (count_include_pad, ceil_mode) the result is multiplied by a constant
  (1, 1, OH, OW) map of the ratio.
- global pooling: a VALID pool whose kernel is the whole map (as TASO's own importer does).
- channel slices: one ``split`` per producer at every cut point its consumers need; a
  slice spanning several pieces is re-concatenated.
- concat and sum: ``concat`` on axis 1 (in a tree: TASO's Concat takes at most 6 inputs,
  MAX_NUM_INPUTS in include/taso/ops.h; Split likewise 6 outputs) and chains of ``add``.
- flatten / linear: ``reshape`` to (N, K), ``matmul`` with the (K, M) weight, ``add`` of
  the bias, ``reshape`` back to (N, M, 1, 1).

Tensors stay NCHW with the batch as TASO's first dimension (its graphs have fixed shapes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from harness.backend import BackendError
from ios_core.interpreters.base import Interpreter
from ios_core.interpreters.pooling import avg_divisor, pool_pads
from ios_core.ir import Graph, Node
from ios_core.ir.nodes import Activation, Conv, Flatten, Linear, Pool

from .padding import VALID, exact_mode, mode_pad

MAX_INPUTS = 6  # include/taso/ops.h MAX_NUM_INPUTS (Concat asserts it)
MAX_OUTPUTS = 6  # include/taso/ops.h MAX_NUM_OUTPUTS (Graph::split asserts it)
MAX_FILL = float(np.finfo(np.float32).min)  # padding that never wins a max

Shape4 = tuple[int, int, int, int]


@dataclass(frozen=True)
class Tv:
    """A TASO tensor handle with the NCHW shape the converter expects it to have."""

    handle: Any
    shape: Shape4

    def with_dim(self, axis: int, size: int) -> Shape4:
        dims = list(self.shape)
        dims[axis] = size
        return (dims[0], dims[1], dims[2], dims[3])


def chunks(items: Sequence[Any], most: int) -> list[list[Any]]:
    """``items`` in at most ``most`` contiguous groups (for TASO's 6-input limits)."""
    size = -(-len(items) // most)
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def cut_points(graph: Graph) -> dict[str, list[int]]:
    """Per producer read through a channel slice: every channel offset where a slice starts or
    ends, with 0 and the channel count; one split at these points serves all its readers."""
    cuts: dict[str, set[int]] = {}
    for node in graph.nodes():
        for term in node.inputs:
            for v in term:
                full = graph.node(v.node).out_channels_
                if (v.begin, v.end) != (0, full):
                    cuts.setdefault(v.node, {0, full}).update((v.begin, v.end))
    return {name: sorted(points) for name, points in cuts.items()}


class TasoConverter(Interpreter[Tv]):
    """Walks the IR and calls the builder; ``convert`` is the entry point."""

    target = "TASO"

    def __init__(self, graph: Graph, builder: Any, batch: int):
        super().__init__(graph)
        self.g, self.batch = builder, batch
        self.cuts = cut_points(graph)
        self.pieces: dict[str, list[Tv]] = {}

    # -- tensors --------------------------------------------------------------------
    def input(self) -> Tv:
        c, h, w = self.graph.input_shape
        shape = (self.batch, c, h, w)
        return Tv(self.g.new_input(dims=shape), shape)

    def const(self, data: np.ndarray) -> Any:
        """A weight holding ``data`` (TASO copies it to the GPU as float32)."""
        data = np.ascontiguousarray(data, dtype=np.float32)
        return self.g.new_weight(dims=tuple(data.shape), data=data)

    def out(self, handle: Any, node: Node) -> Tv:
        assert node.output_shape is not None  # set by shape inference
        c, h, w = node.output_shape
        return Tv(handle, (self.batch, c, h, w))

    def value(self, env: dict[str, Tv], v) -> Tv:
        x = env[v.node]
        if v.node not in self.cuts or (v.begin, v.end) == (0, x.shape[1]):
            return x
        points = self.cuts[v.node]
        if v.node not in self.pieces:
            self.pieces[v.node] = self.split(x, [b - a for a, b in zip(points, points[1:])])
        return self.concat(self.pieces[v.node][points.index(v.begin):points.index(v.end)])

    def split(self, x: Tv, sizes: list[int]) -> list[Tv]:
        if len(sizes) == 1:
            return [x]
        if len(sizes) > MAX_OUTPUTS:
            groups = chunks(sizes, MAX_OUTPUTS)
            outer = self.split(x, [sum(g) for g in groups])
            return [piece for part, g in zip(outer, groups) for piece in self.split(part, g)]
        handles = self.g.split(x.handle, 1, list(sizes))
        return [Tv(h, x.with_dim(1, c)) for h, c in zip(handles, sizes)]

    def concat(self, xs: list[Tv], axis: int = 1) -> Tv:
        if len(xs) == 1:
            return xs[0]
        if len(xs) > MAX_INPUTS:
            xs = [self.concat(g, axis) for g in chunks(xs, MAX_INPUTS)]
        handle = self.g.concat(axis, [x.handle for x in xs])
        return Tv(handle, xs[0].with_dim(axis, sum(x.shape[axis] for x in xs)))

    def add(self, xs: list[Tv]) -> Tv:
        out = xs[0]  # the full-size operand first: cuDNN's OpTensor broadcasts only the second
        for x in xs[1:]:
            out = Tv(self.g.add(out.handle, x.handle), out.shape)
        return out

    def mul(self, xs: list[Tv]) -> Tv:
        out = xs[0]
        for x in xs[1:]:
            out = Tv(self.g.mul(out.handle, x.handle), out.shape)
        return out

    def act(self, x: Tv, act: str) -> Tv:
        if act == "identity":
            return x
        return Tv(getattr(self.g, act)(x.handle), x.shape)  # PyGraph.relu / sigmoid / tanh

    def pad(self, x: Tv, lo: Sequence[int], hi: Sequence[int], fill: float) -> Tv:
        """``x`` with constant rows and columns around it (concats of weights on H, then W)."""
        for axis, before, after in ((2, lo[0], hi[0]), (3, lo[1], hi[1])):
            parts = [Tv(self.const(np.full(x.with_dim(axis, n), fill)), x.with_dim(axis, n)) if n else None
                     for n in (before, after)]
            x = self.concat([p for p in (parts[0], x, parts[1]) if p is not None], axis)
        return x

    def windowed(self, node: Conv | Pool, x: Tv, hi: Sequence[int], fill: float) -> tuple[Tv, str]:
        """The input TASO's op reads and its padding mode: ``x`` itself where SAME or VALID is
        exact, else ``x`` padded as the IR pads it (``hi`` at the end) and VALID."""
        assert node.output_shape is not None
        mode = exact_mode(x.shape[2:], node.kernel, node.stride, node.padding, node.output_shape[1:])
        if mode is not None:
            return x, mode
        padded = self.pad(x, node.padding, hi, fill)
        (kh, kw), (sh, sw) = node.kernel, node.stride
        if ((padded.shape[2] - kh) // sh + 1, (padded.shape[3] - kw) // sw + 1) != tuple(node.output_shape[1:]):
            raise BackendError(f"node {node.name}: {node.label()} with kernel {node.kernel}, stride {node.stride}, "
                               f"padding {node.padding} has no exact TASO form (output {node.output_shape[1:]})")
        return padded, VALID

    # -- nodes ------------------------------------------------------------------------
    def apply(self, node: Node, x: Tv) -> Tv:
        if getattr(self, f"visit_{node.kind}", None) is None:
            raise BackendError(f"node {node.name}: IR op {node.kind!r} ({node.label()}) has no TASO equivalent "
                               f"in this backend")
        return super().apply(node, x)

    def visit_conv(self, node: Conv, x: Tv) -> Tv:
        if node.weight is None:
            raise BackendError(f"node {node.name}: has no weights; call graph.init_weights(seed)")
        inp, mode = self.windowed(node, x, node.padding, 0.0)
        y = self.out(self.g.conv2d(input=inp.handle, weight=self.const(node.weight), strides=node.stride,
                                   padding=mode, activation="NONE"), node)
        if node.bias is not None:
            y = self.add([y, Tv(self.const(node.bias.reshape(1, -1, 1, 1)), y.shape)])
        return self.act(y, node.act)

    def visit_pool(self, node: Pool, x: Tv) -> Tv:
        n, c, h, w = x.shape
        is_max = node.pool_type in ("max", "global_max")
        pool = self.g.maxpool2d if is_max else self.g.avgpool2d
        if node.is_global:
            return Tv(pool(input=x.handle, kernels=(h, w), strides=(1, 1), padding=VALID), (n, c, 1, 1))
        _, _, rh, rw = pool_pads(node, h, w)
        inp, mode = self.windowed(node, x, (rh, rw), MAX_FILL if is_max else 0.0)
        y = self.out(pool(input=inp.handle, kernels=node.kernel, strides=node.stride, padding=mode), node)
        return y if is_max else self.rescale(node, y, inp, mode, (h, w))

    def rescale(self, node: Pool, y: Tv, inp: Tv, mode: str, size: tuple[int, int]) -> Tv:
        """Multiply by (TASO's divisor / the IR's) where they differ; ``size`` is the IR's input H, W."""
        seen = inp.shape[2:]
        as_taso = replace(node, padding=mode_pad(mode, seen, node.kernel, node.stride), count_include_pad=False,
                          ceil_mode=False)
        ratio = avg_divisor(as_taso, *seen) / avg_divisor(node, *size)
        if np.array_equal(ratio, np.ones_like(ratio)):
            return y
        return self.mul([y, Tv(self.const(ratio[None, None]), y.shape)])

    def visit_activation(self, node: Activation, x: Tv) -> Tv:
        return self.act(x, node.act)

    def visit_flatten(self, node: Flatten, x: Tv) -> Tv:
        return self.out(self.g.reshape(x.handle, (x.shape[0], int(np.prod(x.shape[1:])), 1, 1)), node)

    def visit_linear(self, node: Linear, x: Tv) -> Tv:
        if node.weight is None:
            raise BackendError(f"node {node.name}: has no weights; call graph.init_weights(seed)")
        flat = self.g.reshape(x.handle, (x.shape[0], int(np.prod(x.shape[1:]))))
        y = self.g.matmul(flat, self.const(node.weight.T))
        if node.bias is not None:
            y = self.g.add(y, self.const(node.bias))
        return self.out(self.g.reshape(y, (x.shape[0], node.out_features, 1, 1)), node)


def convert(graph: Graph, builder: Any, batch: int) -> Any:
    """Build ``graph`` at ``batch`` into ``builder`` (``taso.new_graph()`` or a fake); returns the
    output tensor's handle. Raises BackendError naming the node that TASO cannot express."""
    conv = TasoConverter(graph, builder, batch)
    out = conv.run(conv.input())
    if out.shape != (batch, *graph.output_shape):
        raise BackendError(f"internal error: the TASO graph of {graph.name} ends in {out.shape}, "
                           f"not {(batch, *graph.output_shape)}")
    return out.handle
