"""The float64 CPU reference executor: plain numpy, the ground truth for every
correctness check. It shares no arithmetic with torch, so agreeing with it means
something."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..ir import Graph
from ..ir.nodes import Activation, Conv, Flatten, Linear, Pool
from .base import Interpreter


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride, padding, groups: int) -> np.ndarray:
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
    if act == "relu":
        return np.maximum(x, 0.0)
    if act == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if act == "tanh":
        return np.tanh(x)
    return x


def pool_pads(node: Pool, h: int, w: int) -> tuple[int, int, int, int]:
    """(out h, out w, right pad h, right pad w): the right padding is large enough for
    ceil_mode's last window. Shared by every converter that pools with explicit pads."""
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    oh, ow = node.out_size(h, 0), node.out_size(w, 1)
    return oh, ow, max(ph, (oh - 1) * sh + kh - h - ph), max(pw, (ow - 1) * sw + kw - w - pw)


def avg_divisor(node: Pool, h: int, w: int) -> np.ndarray:
    """(oh, ow) divisor of an average pool: window cells inside the padded input
    (count_include_pad) or inside the input itself, never in ceil_mode's extension."""
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    oh, ow, rh, rw = pool_pads(node, h, w)
    pad_h, pad_w = (ph, pw) if node.count_include_pad else (0, 0)
    mask = np.zeros((h + ph + rh, w + pw + rw))
    mask[ph - pad_h:ph + h + pad_h, pw - pad_w:pw + w + pad_w] = 1.0
    return sliding_window_view(mask, (kh, kw))[::sh, ::sw][:oh, :ow].sum(axis=(2, 3))


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
                   node.stride, node.padding, node.groups)
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


def reference_forward(graph: Graph, x: np.ndarray) -> np.ndarray:
    """Float64 output of ``graph`` for the NCHW input ``x``."""
    if x.ndim != 4 or tuple(x.shape[1:]) != tuple(graph.input_shape):
        raise ValueError(f"input of shape {tuple(x.shape)} does not match graph {graph.name}'s "
                         f"(N, {', '.join(map(str, graph.input_shape))})")
    return ReferenceExecutor(graph).run(np.asarray(x, dtype=np.float64))


def seeded_input(graph: Graph, batch: int, seed: int = 0) -> np.ndarray:
    """The seeded float32 input every correctness check uses."""
    rng = np.random.default_rng(seed + 1_000_003)
    return rng.standard_normal((batch, *graph.input_shape)).astype(np.float32)
