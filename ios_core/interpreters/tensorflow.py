"""The IR as TensorFlow ops (a ``tf.function``; ``jit_compile=True`` gives XLA).

TF's CPU kernels only take NHWC, so the converter runs NHWC inside (one transpose in,
one out); channel slices and concats are on the last axis. Convs use explicit padding
(exact, unlike the original's SAME/VALID approximation); depthwise convs use
``depthwise_conv2d``, other grouped convs run per group. Pools pad explicitly (-inf for
max) and divide by the exact window count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Graph
from ..ir.nodes import Activation, Conv, Flatten, Linear, Pool
from .base import Interpreter, weighted_nodes
from .pooling import avg_divisor, pool_pads


class TfOps(Interpreter[Any]):
    target = "tensorflow"

    def __init__(self, graph: Graph, params: dict[str, tuple[Any, Any]]):
        super().__init__(graph)
        import tensorflow as tf

        self.tf, self.params = tf, params

    def placeholder(self, node, x):
        return self.tf.transpose(x, (0, 2, 3, 1))

    def run(self, x):
        return self.tf.transpose(super().run(x), (0, 3, 1, 2))

    def slice(self, x, begin, end, channels):
        return x[..., begin:end]

    def add(self, xs):
        return self.tf.add_n(xs) if len(xs) > 1 else xs[0]

    def concat(self, xs):
        return self.tf.concat(xs, axis=-1)

    def act(self, x, act: str):
        tf = self.tf
        return {"relu": tf.nn.relu, "sigmoid": tf.sigmoid, "tanh": tf.tanh}.get(act, lambda v: v)(x)

    def visit_conv(self, node: Conv, x):
        tf = self.tf
        w, b = self.params[node.name]  # HWIO (depthwise: HW C 1)
        (ph, pw), (sh, sw) = node.padding, node.stride
        pad = [[0, 0], [ph, ph], [pw, pw], [0, 0]]
        cin = x.shape[-1]
        if node.groups == 1:
            y = tf.nn.conv2d(x, w, (1, sh, sw, 1), pad)
        elif node.groups == cin and node.out_channels == cin:
            y = tf.nn.depthwise_conv2d(tf.pad(x, pad), w, (1, sh, sw, 1), "VALID")
        else:
            xs = tf.split(x, node.groups, axis=-1)
            ws = tf.split(w, node.groups, axis=-1)
            y = tf.concat([tf.nn.conv2d(a, k, (1, sh, sw, 1), pad) for a, k in zip(xs, ws)], axis=-1)
        if b is not None:
            y = tf.nn.bias_add(y, b)
        return self.act(y, node.act)

    def visit_pool(self, node: Pool, x):
        tf = self.tf
        if node.pool_type == "global_avg":
            return tf.reduce_mean(x, axis=(1, 2), keepdims=True)
        if node.pool_type == "global_max":
            return tf.reduce_max(x, axis=(1, 2), keepdims=True)
        h, w = int(x.shape[1]), int(x.shape[2])
        _, _, rh, rw = pool_pads(node, h, w)
        (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
        pad = [[0, 0], [ph, rh], [pw, rw], [0, 0]]
        if node.pool_type == "max":
            return tf.nn.max_pool2d(tf.pad(x, pad, constant_values=-np.inf), (kh, kw), (sh, sw), "VALID")
        total = tf.nn.avg_pool2d(tf.pad(x, pad), (kh, kw), (sh, sw), "VALID") * float(kh * kw)
        div = avg_divisor(node, h, w)[None, :, :, None]
        return total / tf.constant(div, dtype=x.dtype)

    def visit_activation(self, node: Activation, x):
        return self.act(x, node.act)

    def visit_flatten(self, node: Flatten, x):
        # flatten in NCHW order, as the IR means it
        y = self.tf.reshape(self.tf.transpose(x, (0, 3, 1, 2)), (-1, int(np.prod(x.shape[1:]))))
        return y[:, None, None, :]

    def visit_linear(self, node: Linear, x):
        tf = self.tf
        w, b = self.params[node.name]
        flat = tf.reshape(tf.transpose(x, (0, 3, 1, 2)), (-1, w.shape[0]))
        y = tf.matmul(flat, w)
        return (y if b is None else y + b)[:, None, None, :]


def tf_params(graph: Graph, to_tensor) -> dict[str, tuple[Any, Any]]:
    """Weights in TF layouts: conv HWIO (depthwise HW C 1), linear (in, out)."""
    out = {}
    for n in weighted_nodes(graph.nodes(), require=True):
        if not isinstance(n, (Conv, Linear)):
            continue  # an operator's constants: the converter refuses the operator itself
        w = np.asarray(n.weight)
        if isinstance(n, Linear):
            w = w.T
        elif n.groups > 1 and n.groups == n.out_channels and w.shape[1] == 1:
            w = w.transpose(2, 3, 0, 1)  # (C,1,kh,kw) -> (kh,kw,C,1)
        else:
            w = w.transpose(2, 3, 1, 0)  # OIHW -> HWIO
        out[n.name] = (to_tensor(w), None if n.bias is None else to_tensor(np.asarray(n.bias)))
    return out


def to_tensorflow(graph: Graph, params, jit_compile: bool = False):
    """A ``tf.function`` computing the graph on NCHW input (XLA with ``jit_compile``)."""
    import tensorflow as tf

    @tf.function(jit_compile=jit_compile, reduce_retracing=True)
    def forward(x):
        return TfOps(graph, params).run(x)
    return forward
