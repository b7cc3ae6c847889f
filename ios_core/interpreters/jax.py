"""The IR as a JAX function (jit-compiled by XLA on whatever device JAX has).

Weights are passed as a pytree argument, not baked in as constants, so XLA compiles
the network once and the weights stay device buffers. Layout is NCHW/OIHW with exact
explicit padding; pools pad with -inf (max) or divide by the exact window count (avg),
ceil_mode included.
"""

from __future__ import annotations

from typing import Any

from ..ir import Graph
from ..ir.nodes import Activation, Conv, Flatten, Linear, Pool
from .base import Interpreter, weight_params
from .pooling import avg_divisor, pool_pads


class JaxOps(Interpreter[Any]):
    target = "jax"

    def __init__(self, graph: Graph, params: dict[str, tuple[Any, Any]], precision=None):
        super().__init__(graph)
        import jax
        import jax.numpy as jnp

        self.jax, self.jnp, self.params, self.precision = jax, jnp, params, precision

    def slice(self, x, begin, end, channels):
        return x[:, begin:end]

    def concat(self, xs):
        return self.jnp.concatenate(xs, axis=1)

    def act(self, x, act: str):
        nn = self.jax.nn
        return {"relu": nn.relu, "sigmoid": nn.sigmoid, "tanh": self.jnp.tanh}.get(act, lambda v: v)(x)

    def visit_conv(self, node: Conv, x):
        w, b = self.params[node.name]
        y = self.jax.lax.conv_general_dilated(
            x, w, window_strides=node.stride, padding=[(node.padding[0],) * 2, (node.padding[1],) * 2],
            dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=node.groups, precision=self.precision)
        if b is not None:
            y = y + b[None, :, None, None]
        return self.act(y, node.act)

    def visit_pool(self, node: Pool, x):
        jnp, lax = self.jnp, self.jax.lax
        if node.pool_type == "global_avg":
            return x.mean(axis=(2, 3), keepdims=True)
        if node.pool_type == "global_max":
            return x.max(axis=(2, 3), keepdims=True)
        h, w = x.shape[2], x.shape[3]
        _, _, rh, rw = pool_pads(node, h, w)
        (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
        pads = [(0, 0), (0, 0), (ph, rh), (pw, rw)]
        if node.pool_type == "max":
            return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, kh, kw), (1, 1, sh, sw), pads)
        total = lax.reduce_window(x, 0.0, lax.add, (1, 1, kh, kw), (1, 1, sh, sw), pads)
        return total / jnp.asarray(avg_divisor(node, h, w), dtype=x.dtype)

    def visit_activation(self, node: Activation, x):
        return self.act(x, node.act)

    def visit_flatten(self, node: Flatten, x):
        return x.reshape(x.shape[0], -1, 1, 1)

    def visit_linear(self, node: Linear, x):
        w, b = self.params[node.name]
        y = self.jnp.matmul(x.reshape(x.shape[0], -1), w.T, precision=self.precision)
        return (y if b is None else y + b)[:, :, None, None]


def jax_params(graph: Graph, put) -> dict[str, tuple[Any, Any]]:
    """Every conv/linear weight through ``put`` (device placement and dtype)."""
    return weight_params(graph, put)


def to_jax(graph: Graph, precision=None):
    """``f(params, x)`` computing the graph; jit it yourself (the backend does)."""
    def forward(params, x):
        return JaxOps(graph, params, precision).run(x)
    return forward
