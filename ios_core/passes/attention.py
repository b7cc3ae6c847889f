"""``softmax(q @ kt * scale [+ masks]) @ v`` becomes one ``attention`` operator.

A transformer's attention imports as a matrix product of the queries and the transposed keys (each
often scaled by a constant first: timm exports ``scaled_dot_product_attention`` as a Mul by
sqrt(scale) on both sides), additive constants (Swin's and BEiT's relative position bias, and Swin's
shifted-window mask after it: summed into one), a softmax on the last axis and a product with the
values: four to six kernels and an (L, S) score matrix in memory per head. As one operator the CUDA
runtime calls PyTorch's fused attention (flash or memory-efficient), which never materializes the
scores; the float64 reference computes the same formula step by step. The absorbed nodes must have no other reader."""

from __future__ import annotations

import numpy as np

from ..ir import Graph
from ..ir.nodes import Node, Op, Value
from .users import block_exits, whole


def _scalar(node: Node) -> float | None:
    """The factor of a Mul by one constant number (a scalar or an array of a single value)."""
    if not isinstance(node, Op) or node.op != "mul" or len(node.inputs) != 1 or len(node.consts) != 1:
        return None
    c = node.consts[0]
    return float(np.asarray(c).reshape(-1)[0]) if c is not None and np.asarray(c).size == 1 else None


def run(graph: Graph) -> int:
    exits = block_exits(graph)
    nodes = {n.name: n for n in graph.nodes()}

    def sole(term: list[Value], reader: Node) -> Node | None:
        """The node ``term`` reads whole, when ``reader`` is its only reader and it ends no block."""
        if len(term) != 1 or term[0].node not in nodes:
            return None
        node = nodes[term[0].node]
        if node.name in exits or graph.users(node) != [reader] or not whole(term, node):
            return None
        return node

    done = 0
    for out in list(graph.nodes()):
        if not isinstance(out, Op) or out.op != "matmul" or len(out.inputs) != 2 or out.consts:
            continue
        soft = sole(out.inputs[0], out)
        if not isinstance(soft, Op) or soft.op != "softmax" or soft.params["axis"] != len(soft.output_shape or ()) - 1:
            continue
        absorbed: list[Node] = [soft]
        post, mask = 1.0, None
        scores = sole(soft.inputs[0], soft)
        while isinstance(scores, Op) and scores.op in ("mul", "add"):  # scalings and additive constants
            k = _scalar(scores)
            if k is not None:
                post *= k
            elif scores.op == "add" and len(scores.inputs) == 1 and len(scores.consts) == 1:
                c = np.asarray(scores.consts[0], np.float32) * post  # the scalings after it scale it too
                mask = c if mask is None else mask + c  # Swin's shifted windows: position bias, then the shift mask
            else:
                break
            absorbed.append(scores)
            scores = sole(scores.inputs[0], scores)
        if not isinstance(scores, Op) or scores.op != "matmul" or len(scores.inputs) != 2 or scores.consts:
            continue
        absorbed.append(scores)
        scale, sides = post, []
        for term in scores.inputs:  # the scale of either side moves into the operator
            side = sole(term, scores)
            k = _scalar(side) if side is not None else None
            if k is not None and side is not None:
                absorbed.append(side)
                scale *= k
                sides.append(side.inputs[0])
            else:
                sides.append(term)
        out.op, out.params = "attention", {"scale": scale}
        graph.set_inputs(out, [*sides, out.inputs[1]])
        out.args = ("x0", "x1", "x2", *(("k0",) if mask is not None else ()))
        out.consts = [mask] if mask is not None else []
        out.const_shapes = [tuple(np.asarray(mask).shape)] if mask is not None else []
        out.hint = out.hint or "Attention"
        graph.erase(absorbed)
        done += 1
    return done
