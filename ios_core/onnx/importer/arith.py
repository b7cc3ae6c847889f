"""Converters of the arithmetic operators: elementwise unary and binary ops, sums (and a constant added to a
dense op, folded into its bias), and the matrix products (Gemm, MatMul, Einsum)."""

from __future__ import annotations

import numpy as np
import onnx

from ...ir.nodes import Element, Linear, Op
from .registry import converter, text
from .state import Importer
from .symbols import BatchAxis

#: ONNX ops that are registry operators one to one (no attributes beyond what the converter reads)
UNARY = {"Erf": "erf", "Sqrt": "sqrt", "Exp": "exp", "Neg": "neg"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Max": "max", "Min": "min"}


@converter(*UNARY)
def unary(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    x, mode = imp.tensor(n, n.input[0])
    imp.op(n, UNARY[n.op_type], [x], n.output[0], merged=mode is BatchAxis.MERGED)


@converter(*BINARY)
def binary(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    name = BINARY[n.op_type]
    tensors = [i for i in n.input if i not in imp.consts]
    if name == "add" and len(tensors) == 1 and _bias(imp, n, tensors[0]):
        return
    if name in ("add", "mul") and len(tensors) == 2:
        shapes = [imp.ir_shape(n, t) for t in tensors]
        if shapes[0] == shapes[1] and imp.full(tensors[0]) == imp.full(tensors[1]):
            if name == "add":
                return _sum(imp, n, tensors)
            vals = [imp.materialize(imp.expr(n, i)) for i in tensors]
            imp.add(n, Element(name=imp.new_name(), inputs=[vals], op="mul"), n.output[0], imp.full(tensors[0]))
            return
    views = {t: imp.tensor(n, t) for t in tensors}
    modes = {m for _, m in views.values()}
    ranks = {len(imp.full(t)) for t in tensors}
    if len(modes) > 1 or len(ranks) > 1:
        raise imp.error(n, f"broadcasting {' and '.join(str(imp.full(t)) for t in tensors)} across the batch "
                           f"axis is not supported")
    mode, rank = modes.pop(), ranks.pop()
    inputs, consts, args = imp.operands(n, {t: x for t, (x, _) in views.items()}, rank, mode)
    imp.op(n, name, inputs, n.output[0], consts=consts, args=args, merged=mode is BatchAxis.MERGED)


def _sum(imp: Importer, n: onnx.NodeProto, names: list[str]) -> None:
    """A sum of equal shapes as one expression: no node."""
    exprs = [imp.expr(n, i) for i in names]
    if all(len(e) == 1 for e in exprs):
        expr = [[v for e in exprs for v in e[0]]]
    else:
        expr = [[imp.materialize(e) for e in exprs]]
    imp.define(n.output[0], expr, imp.full(names[0]))


@converter("Sum")
def sum_(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    _sum(imp, n, list(n.input))


def _bias(imp: Importer, n: onnx.NodeProto, other: str) -> bool:
    """A constant added to a Linear's or dense op's output folds into its bias."""
    const = next(i for i in n.input if i != other)
    lin = imp.producer.get(other)
    if not imp.sole_consumer(other) or not isinstance(lin, (Linear, Op)):
        return False
    bias = np.asarray(imp.consts[const], np.float32)
    if isinstance(lin, Linear) and bias.size == lin.out_features:
        lin.bias = (lin.bias + bias.reshape(-1)).astype(np.float32)  # type: ignore[operator]
    elif isinstance(lin, Op) and lin.op == "dense" and bias.shape == (lin.const_shapes[0][0],):
        if len(lin.consts) == 1:
            lin.consts.append(bias)
            lin.const_shapes.append(bias.shape)
            lin.args = (*lin.args, "k1")
        else:
            lin.consts[1] = lin.consts[1] + bias  # type: ignore[operator]
    else:
        return False
    imp.alias(n.output[0], other)
    return True


# -- matrix products --------------------------------------------------------------------------
def _linear(imp: Importer, n: onnx.NodeProto, src: str, w: np.ndarray, b: np.ndarray | None) -> None:
    imp.expr(n, src)
    if len(imp.full(src)) != 2 or imp.mode(n, src) not in (BatchAxis.OWN, BatchAxis.VECTOR):
        raise imp.error(n, "Gemm must follow a Flatten or a global pool")
    x = imp.expr(n, src)  # a vector kept as (F, 1, 1) as it is: Linear flattens its input
    lin = Linear(name=imp.new_name(), inputs=x, out_features=int(w.shape[0]), weight=w.astype(np.float32),
                 bias=(b if b is not None else np.zeros(w.shape[0])).astype(np.float32))
    imp.add(n, lin, n.output[0], (imp.batch, int(w.shape[0])))


@converter("Gemm")
def gemm(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    if a.get("transA", 0):
        raise imp.error(n, "transA=1 is not supported")
    w = imp.required(n, 1)
    w = w if a.get("transB", 0) else w.T
    b = imp.const(n, 2)
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    _linear(imp, n, n.input[0], alpha * w, None if b is None else beta * np.broadcast_to(b, (w.shape[0],)))


@converter("MatMul")
def matmul(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    _matmul(imp, n, n.input[0], n.input[1])


@converter("Einsum")
def einsum(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    """A batched matrix product written as an einsum (MaxViT's attention: ``bghid,bghjd->bghij`` and
    ``bghij,bghjd->bghid``): a matmul, after swapping the right operand's last two axes where it is the
    ``...jk`` form. Other equations are refused in one line."""
    eq = text(a.get("equation", "")).replace(" ", "")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(n.input) != 2 or len(terms) != 2 or len(out) < 3 or "." in eq or \
            len({len(terms[0]), len(terms[1]), len(out)}) != 1 or not terms[0][:-2] == terms[1][:-2] == out[:-2] \
            or terms[0][-2] != out[-2] or sorted(terms[1][-2:]) != sorted(terms[0][-1] + out[-1]):
        raise imp.error(n, f"Einsum {eq!r} is not supported: only batched matrix products "
                           f"(...ik,...kj->...ij and ...ik,...jk->...ij)")
    right = n.input[1]
    if terms[1][-2:] == out[-1] + terms[0][-1]:  # ...jk: the right operand transposed
        x, mode = imp.tensor(n, right)
        rank, swapped = len(imp.full(right)), f"{n.output[0]}#right"
        imp.transpose(n, right, x, mode, (*range(rank - 2), rank - 1, rank - 2), swapped)
        right = swapped
    _matmul(imp, n, n.input[0], right)


def _matmul(imp: Importer, n: onnx.NodeProto, left: str, right: str) -> None:
    if right in imp.consts and imp.consts[right].ndim == 2:
        w = imp.consts[right].T
        if len(imp.full(left)) == 2 and imp.mode(n, left) in (BatchAxis.OWN, BatchAxis.VECTOR):
            return _linear(imp, n, left, w, None)
        x, mode = imp.tensor(n, left)
        imp.op(n, "dense", [x], n.output[0], consts=[w], args=("x0", "k0"), merged=mode is BatchAxis.MERGED)
        return
    if left in imp.consts or right in imp.consts:
        t = right if left in imp.consts else left
        x, mode = imp.tensor(n, t)
        inputs, consts, args = imp.operands(n, {t: x}, len(imp.full(t)), mode)
        imp.op(n, "matmul", inputs, n.output[0], consts=consts, args=args, merged=mode is BatchAxis.MERGED)
        return
    (xa, ma), (xb, mb) = imp.tensor(n, left), imp.tensor(n, right)
    if ma != mb or len(imp.full(left)) != len(imp.full(right)) or len(imp.full(left)) < 3:
        raise imp.error(n, f"a matrix product of {imp.full(left)} and {imp.full(right)} across the batch "
                           f"axis is not supported")
    imp.op(n, "matmul", [xa, xb], n.output[0], merged=ma is BatchAxis.MERGED)
