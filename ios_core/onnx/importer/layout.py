"""Converters of the operators on constants, shapes and layout: Constant, Shape, Cast, Identity and Dropout,
reshapes (Reshape, Flatten, Squeeze, Unsqueeze), Expand, Transpose, Slice, Gather, Split and Concat."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from . import lazy
from .registry import converter
from .state import Importer
from .symbols import BatchAxis, Expr


# -- constants and aliases ---------------------------------------------------------------
@converter("Constant")
def constant(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    imp.consts[n.output[0]] = numpy_helper.to_array(a["value"]) if "value" in a else np.array(
        a.get("value_float", a.get("value_int", a.get("value_floats", a.get("value_ints")))))


@converter("Shape")
def shape(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    imp.expr(n, n.input[0])  # a held-back transpose is made real: its shape is known then
    imp.consts[n.output[0]] = np.array(imp.full(n.input[0]), np.int64)[a.get("start", 0):a.get("end")]


@converter("Identity", "Dropout")
def pass_through(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    imp.expr(n, n.input[0])
    imp.alias(n.output[0], n.input[0])


@converter("Cast")
def cast(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    if a.get("to") not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                           onnx.TensorProto.BFLOAT16):
        raise imp.error(n, f"casting a feature map to type {a.get('to')} is not supported")
    pass_through(imp, n, a)


# -- reshapes ------------------------------------------------------------------------------------
def _target(imp: Importer, src: str, shape: list[int], allowzero: bool) -> tuple[int, ...]:
    full = imp.full(src)
    out = [full[i] if (d == 0 and not allowzero) else int(d) for i, d in enumerate(shape)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(full)) // max(known, 1)
    return tuple(out)


@converter("Reshape")
def reshape(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    src = n.input[0]
    imp.reshape_to(n, src, _target(imp, src, imp.required(n, 1).tolist(), bool(a.get("allowzero", 0))), n.output[0])


@converter("Flatten")
def flatten(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    src = n.input[0]
    imp.expr(n, src)
    full = imp.full(src)
    ax = int(a.get("axis", 1)) % len(full)
    imp.reshape_to(n, src, (int(np.prod(full[:ax])), int(np.prod(full[ax:]))), n.output[0])


def _axes_arg(imp: Importer, n: onnx.NodeProto, a: dict) -> list[int]:
    axes = a.get("axes")
    if axes is None and len(n.input) > 1 and n.input[1]:
        axes = imp.required(n, 1).tolist()
    return [int(x) for x in axes] if axes is not None else []


@converter("Squeeze")
def squeeze(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    src = n.input[0]
    axes = _axes_arg(imp, n, a)
    if src in imp.lazy:
        return lazy.squeeze(imp, n, src, axes, n.output[0])
    imp.expr(n, src)
    full = imp.full(src)
    axes = [x % len(full) for x in axes] if axes else [i for i, d in enumerate(full) if d == 1]
    if any(full[x] != 1 for x in axes):
        raise imp.error(n, f"Squeeze of axes {axes} of a {full} tensor")
    imp.reshape_to(n, src, tuple(d for i, d in enumerate(full) if i not in axes), n.output[0])


@converter("Unsqueeze")
def unsqueeze(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    src = n.input[0]
    imp.expr(n, src)
    full = list(imp.full(src))
    rank = len(full) + len(_axes_arg(imp, n, a))
    for x in sorted(x % rank for x in _axes_arg(imp, n, a)):
        full.insert(x, 1)
    imp.reshape_to(n, src, tuple(full), n.output[0])


@converter("Expand")
def expand(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    """A broadcast of a feature map to a shape of the same rank (``F.normalize``'s norm before its division in
    Swin V2); growing the rank or the batch axis is refused."""
    src = n.input[0]
    x, mode = imp.tensor(n, src)
    full = imp.full(src)
    shape = tuple(int(d) for d in imp.required(n, 1).tolist())
    try:
        target = tuple(int(d) for d in np.broadcast_shapes(full, shape))
    except ValueError:
        raise imp.error(n, f"cannot expand {full} to {shape}") from None
    if len(target) != len(full) or target[0] != full[0]:
        raise imp.error(n, f"an Expand of {full} to {shape} adds axes or grows the batch axis; not supported")
    if target == full:
        imp.define(n.output[0], x, full)
        return
    per_sample = (target[0] // imp.batch, *target[1:]) if mode is BatchAxis.MERGED else target[1:]
    imp.op(n, "expand", [x], n.output[0], {"shape": list(per_sample)}, full=target)


# -- transposes, slices, gathers (which read a held-back Transpose: lazy.py) --------------------------
@converter("Transpose")
def transpose(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    """Without ``perm`` ONNX reverses the axes: a held-back source has no shape of its own, its rank is its
    permutation's."""
    src = n.input[0]
    rank = len(imp.lazy[src][1]) if src in imp.lazy else len(imp.full(src))
    perm = tuple(int(p) for p in a.get("perm", reversed(range(rank))))
    if sorted(perm) != list(range(rank)):
        raise imp.error(n, f"perm {list(perm)} is not a permutation of the {rank} axes of {src!r}")
    if src in imp.lazy:  # a transpose of a held-back transpose: compose them
        return lazy.compose(imp, src, perm, n.output[0])
    x, mode = imp.tensor(n, src)
    if perm == tuple(range(len(perm))):
        return imp.alias(n.output[0], src)
    if perm[0] != 0:
        return lazy.hold(imp, src, perm, n.output[0])
    imp.transpose(n, src, x, mode, perm, n.output[0])


@converter("Slice")
def slice_(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    src = n.input[0]
    starts, ends = imp.required(n, 1).tolist(), imp.required(n, 2).tolist()
    given_axes, given_steps = imp.const(n, 3), imp.const(n, 4)
    axes = given_axes.tolist() if given_axes is not None else list(range(len(starts)))
    steps = given_steps.tolist() if given_steps is not None else [1] * len(starts)
    if src in imp.lazy:
        return lazy.slice_held(imp, n, src, axes, starts, ends, steps)
    imp.expr(n, src)
    imp.slice_src(n, src, axes, starts, ends, steps, n.output[0])


def _gather_per_sample(imp: Importer, n: onnx.NodeProto, src: str, x: Expr, index: np.ndarray) -> None:
    """A gather on a merged batch axis whose indices pick, for each sample, from that sample's own rows
    (torch's ``as_strided`` after a full flatten exports this way): the same per-sample gather for each."""
    k = imp.expr_shape(x)[0]
    per = index[0] % (imp.batch * k)
    for b in range(imp.batch):
        if not np.array_equal(index[b] % (imp.batch * k) - b * k, per):
            raise imp.error(n, "a gather along a merged batch axis that mixes samples")
    if per.min() < 0 or per.max() >= k:
        raise imp.error(n, "a gather along a merged batch axis that mixes samples")
    rest = imp.full(src)[1:]
    imp.op(n, "gather", [x], n.output[0], {"axis": 0, "index": per.tolist()}, full=(imp.batch, *per.shape, *rest))


@converter("Gather")
def gather(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    src, index = n.input[0], imp.required(n, 1)
    ax = int(a.get("axis", 0))
    if src in imp.lazy:  # one index of a leading axis: a slice of the source and a squeeze
        return lazy.gather(imp, n, src, index, ax)
    x, mode = imp.tensor(n, src)
    rank = len(imp.full(src))
    if mode is BatchAxis.MERGED and ax % rank == 0 and index.ndim >= 1 and index.shape[0] == imp.batch:
        return _gather_per_sample(imp, n, src, x, index)
    ir_ax = imp.axis(n, src, ax, mode)
    idx = index.tolist()
    full = list(imp.full(src))
    dim = full[ax % len(full)]
    idx = (idx % dim) if isinstance(idx, int) else (np.asarray(idx) % dim).tolist()
    out_full = tuple(full[:ax % len(full)] + list(np.asarray(idx).shape) + full[ax % len(full) + 1:])
    imp.op(n, "gather", [x], n.output[0], {"axis": ir_ax, "index": idx}, full=out_full)


@converter("Split")
def split(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    src = n.input[0]
    imp.expr(n, src)
    ax = int(a.get("axis", 0)) % len(imp.full(src))
    sizes = imp.const(n, 1) if len(n.input) > 1 and n.input[1] else a.get("split")
    dim = imp.full(src)[ax]
    if sizes is None:
        parts = int(a.get("num_outputs", len(n.output)))
        step = -(-dim // parts)
        sizes = [min(step, dim - i * step) for i in range(parts)]
    start = 0
    for out, size in zip(n.output, [int(s) for s in np.asarray(sizes).reshape(-1)]):
        if out:
            imp.slice_src(n, src, [ax], [start], [start + size], [1], out)
        start += size


@converter("Concat")
def concat(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    tensors = [i for i in n.input if i not in imp.consts]
    if not tensors:
        raise imp.error(n, "internal: a constant concat was not folded")
    views = {t: imp.tensor(n, t) for t in tensors}
    modes = {m for _, m in views.values()}
    if len(modes) > 1:
        raise imp.error(n, "concatenation of tensors whose batch axes differ")
    mode = modes.pop()
    ref = tensors[0]
    rank = len(imp.full(ref))
    ax = int(a.get("axis", 1)) % rank
    ir_ax = imp.axis(n, ref, ax, mode)
    full = list(imp.full(ref))
    full[ax] = sum(imp.full(i)[ax] if i in imp.symbols else int(imp.consts[i].shape[ax]) for i in n.input)
    if ir_ax == 0 and len(tensors) == len(n.input):
        imp.define(n.output[0], [t for i in n.input for t in views[i][0]], tuple(full))
        return
    inputs, consts, args = imp.operands(n, {t: x for t, (x, _) in views.items()}, rank, mode,
                                        const_rank=len(imp.expr_shape(views[ref][0])))
    imp.op(n, "concat", inputs, n.output[0], {"axis": ir_ax}, consts=consts, args=args, full=tuple(full))
