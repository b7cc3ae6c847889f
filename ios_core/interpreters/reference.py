"""The float64 CPU reference executor: plain numpy, the ground truth for every
correctness check. It shares no arithmetic with torch, so agreeing with it means
something."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..ir import Graph
from ..ir.nodes import Activation, Conv, Flatten, Linear, Op, Pool
from ..ir.ops import apply_activation
from .base import Interpreter
from .pooling import avg_divisor, pool_pads


def dilate(w: np.ndarray, dilation) -> np.ndarray:
    """A dilated kernel as the plain kernel it equals (zeros between the taps)."""
    dh, dw = dilation
    if (dh, dw) == (1, 1):
        return w
    o, cg, kh, kw = w.shape
    out = np.zeros((o, cg, (kh - 1) * dh + 1, (kw - 1) * dw + 1), w.dtype)
    out[:, :, ::dh, ::dw] = w
    return out


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride, padding, groups: int,
           dilation=(1, 1)) -> np.ndarray:
    w = dilate(w, dilation)
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]  # N C OH OW kh kw
    oh, ow = win.shape[2], win.shape[3]
    if groups == c and cg == 1 and o == c:  # depthwise: accumulate over kernel taps
        out = np.zeros((n, c, oh, ow))
        for i in range(kh):
            for j in range(kw):
                out += win[..., i, j] * w[None, :, 0, i, j, None, None]
    elif groups == 1:
        out = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    else:
        og = o // groups
        outs = [np.tensordot(win[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og], axes=([1, 4, 5], [1, 2, 3]))
                for g in range(groups)]
        out = np.concatenate(outs, axis=3).transpose(0, 3, 1, 2)
    if b is not None:
        out = out + b[None, :, None, None]
    return np.ascontiguousarray(out)


def activation(x: np.ndarray, act: str) -> np.ndarray:
    return apply_activation("numpy", x, act)


def pool2d(x: np.ndarray, node: Pool) -> np.ndarray:
    if node.pool_type == "global_avg":
        return x.mean(axis=(2, 3), keepdims=True)
    if node.pool_type == "global_max":
        return x.max(axis=(2, 3), keepdims=True)
    _, _, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    oh, ow, rh, rw = pool_pads(node, h, w)
    fill = -np.inf if node.pool_type == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (ph, rh), (pw, rw)), constant_values=fill)
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw][:, :, :oh, :ow]
    if node.pool_type == "max":
        return win.max(axis=(4, 5))
    return win.sum(axis=(4, 5)) / avg_divisor(node, h, w)


class ReferenceExecutor(Interpreter[np.ndarray]):
    """Evaluates a graph in float64 on NCHW numpy arrays."""

    target = "reference"

    def slice(self, x, begin, end, channels):
        return x[:, begin:end]

    def add(self, xs):
        out = xs[0].copy()
        for x in xs[1:]:
            out += x
        return out

    def mul(self, xs):
        out = xs[0].copy()
        for x in xs[1:]:
            out *= x
        return out

    def concat(self, xs):
        return np.concatenate(xs, axis=1)

    def visit_conv(self, node: Conv, x):
        if node.weight is None:
            raise ValueError(f"node {node.name}: has no weights; call graph.init_weights(seed)")
        y = conv2d(x, node.weight.astype(np.float64), None if node.bias is None else node.bias.astype(np.float64),
                   node.stride, node.padding, node.groups, node.dilation)
        return activation(y, node.act)

    def visit_pool(self, node: Pool, x):
        return pool2d(x, node)

    def visit_activation(self, node: Activation, x):
        return activation(x, node.act)

    def visit_flatten(self, node: Flatten, x):
        return x.reshape(x.shape[0], -1, 1, 1)

    def visit_linear(self, node: Linear, x):
        assert node.weight is not None, f"node {node.name}: has no weights"
        y = x.reshape(x.shape[0], -1) @ node.weight.astype(np.float64).T
        if node.bias is not None:
            y = y + node.bias
        return y[:, :, None, None]

    def visit_op(self, node: Op, xs):
        consts = [np.asarray(c, np.float64) for c in node.consts]
        return np.asarray(node.opdef.numpy(node.operands(xs, consts), node.params), np.float64)


def reference_forward(graph: Graph, x: np.ndarray) -> np.ndarray:
    """Float64 output of ``graph`` for the NCHW input ``x``."""
    if x.ndim != 4 or tuple(x.shape[1:]) != tuple(graph.input_shape):
        raise ValueError(f"input of shape {tuple(x.shape)} does not match graph {graph.name}'s "
                         f"(N, {', '.join(map(str, graph.input_shape))})")
    return ReferenceExecutor(graph).run(np.asarray(x, dtype=np.float64))
