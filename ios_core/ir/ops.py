"""The operator registry: every tensor operator of the IR beyond its first-class kinds (conv, pool, linear,
concatenation and sums, which the schedule rewrites see) is one :class:`OpDef` here.

An entry gives the output shape, the float64 numpy implementation (the reference), the torch
implementation (every torch-based runtime), the cost (multiply-accumulates per sample, for the
analytic model and the issue order) and the ONNX op it exports to. The ONNX importer maps ONNX
nodes to these names; adding an operator is one ``OPS`` entry (and an import rule where its ONNX
form is not one-to-one).

Shapes are per sample (the batch axis implicit); ``params`` axes are per-sample axes (the ONNX form
adds the batch axis). The numpy and torch functions get operands *with* the batch axis first; a
constant operand has no batch axis and broadcasts from the right (its rank is at most the per-sample rank).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Shape = tuple[int, ...]
Params = dict[str, Any]

_erf = np.frompyfunc(math.erf, 1, 1)


def np_erf(x: np.ndarray) -> np.ndarray:
    """float64 erf without scipy (math.erf is correctly rounded; the reference runs on small inputs)."""
    return np.asarray(_erf(np.asarray(x, np.float64)), np.float64)


@dataclass(frozen=True)
class OpDef:
    """One operator: ``infer(shapes, params)`` the per-sample output shape from the operands' (constants
    included, as stored), ``numpy``/``torch`` ``(operands, params) -> output``, ``macs(shapes, out, params)``
    per sample, and the ONNX op (``onnx``) with ``onnx_attrs(params)`` for export (``None``: no export)."""

    name: str
    arity: int | None  # None: any number of operands
    infer: Callable[[Sequence[Shape], Params], Shape]
    numpy: Callable[[list, Params], Any]
    torch: Callable[[list, Params], Any]
    onnx: str | None = None
    onnx_attrs: Callable[[Params], dict] = field(default=lambda p: {})
    export: Callable[[Any, list[str], Params], str] | None = None
    macs: Callable[[Sequence[Shape], Shape, Params], int] | None = None
    per_element: int = 1
    pointwise: bool = False
    activation: bool = False  # unary, no params: a conv may fuse it (``Conv.act``)
    # not pointwise, but a fused group may take it (Inductor fuses it with its neighbours): a view or copy
    # (transpose, reshape, slice), a reduction, a normalization
    fusable: bool = False
    mixed_ranks: bool = False  # its operands may differ in rank (a program whose steps line up their own axes)

    def to_onnx(self, ex: Any, names: list[str], params: Params) -> str:
        """Emit this operator through ``ex`` (``emit(op, inputs, **attrs)``, ``const(hint, array)``)."""
        if self.export is not None:
            return self.export(ex, names, params)
        if self.onnx is None:
            raise ValueError(f"operator {self.name!r} has no ONNX form")
        return ex.emit(self.onnx, names, self.name, **self.onnx_attrs(params))

    def cost(self, shapes: Sequence[Shape], out: Shape, params: Params) -> int:
        if self.macs is not None:
            return int(self.macs(shapes, out, params))
        return int(np.prod(out)) * self.per_element


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"operator {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def lookup(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"operator {name!r} is not in ios_core's registry; known: {', '.join(sorted(OPS))}") from None


def _torch():
    import torch
    return torch


def _F():
    import torch.nn.functional as F
    return F


# -- elementwise ---------------------------------------------------------------------------------------
def _same(shapes: Sequence[Shape], p: Params) -> Shape:
    return tuple(shapes[0])


def _broadcast(shapes: Sequence[Shape], p: Params) -> Shape:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ValueError(f"shapes {' and '.join(map(str, shapes))} do not broadcast") from None


def _unary(name: str, onnx: str | None, np_fn, torch_fn, per_element: int = 1, activation: bool = True,
           attrs: Callable[[Params], dict] = lambda p: {}, export=None) -> None:
    register(OpDef(name, 1, _same, lambda xs, p: np_fn(xs[0], p), lambda xs, p: torch_fn(xs[0], p), onnx, attrs,
                   export, per_element=per_element, pointwise=True, activation=activation))


def _f32(v: float) -> np.ndarray:
    return np.array(v, np.float32)


def _export_clip(ex, xs, lo: float, hi: float) -> str:
    return ex.emit("Clip", [xs[0], ex.const("min", _f32(lo)), ex.const("max", _f32(hi))], "clip")


def _export_gelu(ex, xs, p) -> str:
    x = xs[0]
    e = ex.emit("Erf", [ex.emit("Div", [x, ex.const("sqrt2", _f32(math.sqrt(2.0)))], "gelu")], "gelu")
    half = ex.emit("Mul", [x, ex.const("half", _f32(0.5))], "gelu")
    return ex.emit("Mul", [half, ex.emit("Add", [e, ex.const("one", _f32(1.0))], "gelu")], "gelu")


def _np_gelu_tanh(x):
    """GELU's tanh approximation (timm's MaxViT, SigLIP's NaFlex ViT, MobileNet-V5)."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _export_gelu_tanh(ex, x) -> str:
    cube = ex.emit("Mul", [x, ex.emit("Mul", [x, x], "gelu")], "gelu")
    inner = ex.emit("Add", [x, ex.emit("Mul", [cube, ex.const("c", _f32(0.044715))], "gelu")], "gelu")
    t = ex.emit("Tanh", [ex.emit("Mul", [inner, ex.const("k", _f32(math.sqrt(2.0 / math.pi)))], "gelu")], "gelu")
    half = ex.emit("Mul", [x, ex.const("half", _f32(0.5))], "gelu")
    return ex.emit("Mul", [half, ex.emit("Add", [t, ex.const("one", _f32(1.0))], "gelu")], "gelu")


def _np_sigmoid(x, p):
    return 1.0 / (1.0 + np.exp(-x))


_unary("relu", "Relu", lambda x, p: np.maximum(x, 0.0), lambda x, p: _F().relu(x))
_unary("sigmoid", "Sigmoid", _np_sigmoid, lambda x, p: _torch().sigmoid(x), 4)
_unary("tanh", "Tanh", lambda x, p: np.tanh(x), lambda x, p: _torch().tanh(x), 4)
_unary("relu6", None, lambda x, p: np.clip(x, 0.0, 6.0), lambda x, p: _F().relu6(x),
       export=lambda ex, xs, p: _export_clip(ex, xs, 0.0, 6.0))
_unary("hardswish", "HardSwish", lambda x, p: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0), lambda x, p: _F().hardswish(x), 3)
_unary("silu", None, lambda x, p: x * _np_sigmoid(x, p), lambda x, p: _F().silu(x), 5,
       export=lambda ex, xs, p: ex.emit("Mul", [xs[0], ex.emit("Sigmoid", xs, "silu")], "silu"))
_unary("gelu", None, lambda x, p: 0.5 * x * (1.0 + np_erf(x / math.sqrt(2.0))), lambda x, p: _F().gelu(x), 8,
       export=_export_gelu)
_unary("gelu_tanh", None, lambda x, p: _np_gelu_tanh(x), lambda x, p: _F().gelu(x, approximate="tanh"), 9,
       export=lambda ex, xs, p: _export_gelu_tanh(ex, xs[0]))
_unary("softplus", "Softplus", lambda x, p: np.logaddexp(0.0, x), lambda x, p: _F().softplus(x), 4)
_unary("erf", "Erf", lambda x, p: np_erf(x), lambda x, p: _torch().erf(x), 4, activation=False)
_unary("sqrt", "Sqrt", lambda x, p: np.sqrt(x), lambda x, p: _torch().sqrt(x), 2, activation=False)
_unary("exp", "Exp", lambda x, p: np.exp(x), lambda x, p: _torch().exp(x), 2, activation=False)
_unary("neg", "Neg", lambda x, p: -x, lambda x, p: -x, activation=False)
_unary("clip", None, lambda x, p: np.clip(x, p["min"], p["max"]),
       lambda x, p: _torch().clamp(x, p["min"], p["max"]), activation=False,
       export=lambda ex, xs, p: _export_clip(ex, xs, p["min"], p["max"]))
_unary("hardsigmoid", "HardSigmoid", lambda x, p: np.clip(p["alpha"] * x + p["beta"], 0.0, 1.0),
       lambda x, p: _torch().clamp(x * p["alpha"] + p["beta"], 0.0, 1.0), 2, activation=False,
       attrs=lambda p: {"alpha": p["alpha"], "beta": p["beta"]})
_unary("leaky_relu", "LeakyRelu", lambda x, p: np.where(x >= 0, x, p["alpha"] * x),
       lambda x, p: _F().leaky_relu(x, p["alpha"]), activation=False, attrs=lambda p: {"alpha": p["alpha"]})


def _binary(name: str, onnx: str, np_fn, torch_fn) -> None:
    register(OpDef(name, 2, _broadcast, lambda xs, p: np_fn(xs[0], xs[1]), lambda xs, p: torch_fn(xs[0], xs[1]),
                   onnx, pointwise=True))


_binary("add", "Add", np.add, lambda a, b: a + b)
_binary("sub", "Sub", np.subtract, lambda a, b: a - b)
_binary("mul", "Mul", np.multiply, lambda a, b: a * b)
_binary("div", "Div", np.divide, lambda a, b: a / b)
_binary("pow", "Pow", np.power, lambda a, b: a ** b)
_binary("max", "Max", np.maximum, lambda a, b: _torch().maximum(a, b))
_binary("min", "Min", np.minimum, lambda a, b: _torch().minimum(a, b))


# -- reductions and normalization ------------------------------------------------------------------------
def _reduced(shapes: Sequence[Shape], p: Params) -> Shape:
    shape, axes = list(shapes[0]), set(p["axes"])
    if p.get("keepdims", True):
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _axes1(p: Params) -> tuple[int, ...]:
    return tuple(a + 1 for a in p["axes"])


def _reduce_attrs(p: Params) -> dict:
    return {"axes": list(_axes1(p)), "keepdims": int(p.get("keepdims", True))}


register(OpDef("reduce_mean", 1, _reduced,
               lambda xs, p: xs[0].mean(axis=_axes1(p), keepdims=p.get("keepdims", True)),
               lambda xs, p: xs[0].mean(dim=_axes1(p), keepdim=p.get("keepdims", True)), "ReduceMean",
               _reduce_attrs, macs=lambda s, o, p: int(np.prod(s[0])), fusable=True))
register(OpDef("reduce_l2", 1, _reduced,
               lambda xs, p: np.sqrt((xs[0] * xs[0]).sum(axis=_axes1(p), keepdims=p.get("keepdims", True))),
               lambda xs, p: _torch().linalg.vector_norm(xs[0], dim=_axes1(p), keepdim=p.get("keepdims", True)),
               "ReduceL2",
               _reduce_attrs, macs=lambda s, o, p: 2 * int(np.prod(s[0])), fusable=True))


def _np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


register(OpDef("softmax", 1, _same, lambda xs, p: _np_softmax(xs[0], p["axis"] + 1),
               lambda xs, p: _torch().softmax(xs[0], p["axis"] + 1), "Softmax",
               lambda p: {"axis": p["axis"] + 1}, per_element=5))


def _np_layer_norm(xs, p):
    x, axes = xs[0], tuple(range(xs[0].ndim - p["dims"], xs[0].ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + p["eps"])
    for k in xs[1:]:
        y = y * k if k is xs[1] else y + k
    return y


def _torch_layer_norm(xs, p):
    shape = tuple(xs[0].shape[-p["dims"]:])
    return _F().layer_norm(xs[0], shape, xs[1] if len(xs) > 1 else None, xs[2] if len(xs) > 2 else None, p["eps"])


register(OpDef("layer_norm", None, _same, _np_layer_norm, _torch_layer_norm, "LayerNormalization",
               lambda p: {"axis": -p["dims"], "epsilon": p["eps"]}, per_element=8, fusable=True))


def _channel_shape(x, k):
    return k.reshape((-1,) + (1,) * (x.ndim - 2))


def _export_affine(ex, xs, p) -> str:
    x, scale, shift = xs
    shape = ex.const("shape", np.array([-1, 1, 1], np.int64))
    y = ex.emit("Mul", [x, ex.emit("Reshape", [scale, shape], "affine")], "affine")
    return ex.emit("Add", [y, ex.emit("Reshape", [shift, shape], "affine")], "affine")


#: a per-channel scale and shift (a BatchNormalization no conv could absorb); channels are axis 0
register(OpDef("channel_affine", 3, lambda s, p: tuple(s[0]),
               lambda xs, p: xs[0] * _channel_shape(xs[0], xs[1]) + _channel_shape(xs[0], xs[2]),
               lambda xs, p: xs[0] * _channel_shape(xs[0], xs[1]) + _channel_shape(xs[0], xs[2]),
               None, export=_export_affine, per_element=2, pointwise=True))


# -- layout ------------------------------------------------------------------------------------------------
def _transposed(shapes: Sequence[Shape], p: Params) -> Shape:
    return tuple(shapes[0][a] for a in p["perm"])


def _perm1(p: Params) -> tuple[int, ...]:
    return (0, *(a + 1 for a in p["perm"]))


register(OpDef("transpose", 1, _transposed, lambda xs, p: np.transpose(xs[0], _perm1(p)),
               lambda xs, p: xs[0].permute(_perm1(p)), "Transpose", lambda p: {"perm": list(_perm1(p))},
               macs=lambda s, o, p: 0, fusable=True))


def _reshaped(shapes: Sequence[Shape], p: Params) -> Shape:
    shape = tuple(p["shape"])
    if int(np.prod(shape)) != int(np.prod(shapes[0])):
        raise ValueError(f"cannot reshape {tuple(shapes[0])} to {shape}")
    return shape


register(OpDef("reshape", 1, _reshaped, lambda xs, p: xs[0].reshape((xs[0].shape[0], *p["shape"])),
               lambda xs, p: xs[0].reshape((xs[0].shape[0], *p["shape"])), "Reshape",
               export=lambda ex, xs, p: ex.emit("Reshape", [xs[0], ex.const("shape", np.array([0, *p["shape"]],
                                                                                              np.int64))], "reshape"),
               macs=lambda s, o, p: 0, fusable=True))


def _sliced(shapes: Sequence[Shape], p: Params) -> Shape:
    shape = list(shapes[0])
    for a, b, e, st in zip(p["axes"], p["starts"], p["ends"], p["steps"]):
        shape[a] = len(range(*slice(b, e, st).indices(shape[a])))
    if min(shape) <= 0:
        raise ValueError(f"slice of {tuple(shapes[0])} is empty")
    return tuple(shape)


def _ints(v) -> np.ndarray:
    return np.array(v, np.int64)


def _export_slice(ex, xs, p) -> str:
    return ex.emit("Slice", [xs[0], ex.const("starts", _ints(p["starts"])), ex.const("ends", _ints(p["ends"])),
                             ex.const("axes", _ints([a + 1 for a in p["axes"]])), ex.const("steps", _ints(p["steps"]))],
                   "slice")


def _slice_index(ndim: int, p: Params) -> tuple:
    idx: list[Any] = [slice(None)] * ndim
    for a, b, e, st in zip(p["axes"], p["starts"], p["ends"], p["steps"]):
        idx[a + 1] = slice(b, e, st)
    return tuple(idx)


register(OpDef("slice", 1, _sliced, lambda xs, p: xs[0][_slice_index(xs[0].ndim, p)],
               lambda xs, p: xs[0][_slice_index(xs[0].ndim, p)], "Slice", export=_export_slice,
               macs=lambda s, o, p: 0, fusable=True))


def _expanded(shapes: Sequence[Shape], p: Params) -> Shape:
    shape = tuple(int(d) for d in p["shape"])
    if len(shape) != len(shapes[0]) or _broadcast([shapes[0], shape], p) != shape:
        raise ValueError(f"cannot expand {tuple(shapes[0])} to {shape}")
    return shape


register(OpDef("expand", 1, _expanded, lambda xs, p: np.broadcast_to(xs[0], (xs[0].shape[0], *p["shape"])).copy(),
               lambda xs, p: xs[0].expand((xs[0].shape[0], *p["shape"])), "Expand",
               export=lambda ex, xs, p: ex.emit("Expand", [xs[0], ex.const("shape", np.array([1, *p["shape"]],
                                                                                            np.int64))], "expand"),
               macs=lambda s, o, p: 0, fusable=True))  # a broadcast view (F.normalize's norm in Swin V2)


def _gathered(shapes: Sequence[Shape], p: Params) -> Shape:
    shape, idx = list(shapes[0]), np.asarray(p["index"])
    return tuple(shape[:p["axis"]] + list(idx.shape) + shape[p["axis"] + 1:])


def _np_gather(xs, p):
    return np.take(xs[0], np.asarray(p["index"]), axis=p["axis"] + 1)


@functools.lru_cache(maxsize=256)
def _index_tensor(flat: tuple[int, ...], device: Any) -> Any:
    """Gather indices on the device, made once (outside CUDA-graph capture: the first call is eager)."""
    return _torch().tensor(flat, dtype=_torch().long, device=device)


def _torch_gather(xs, p):
    idx = p["index"]
    if isinstance(idx, int):
        return xs[0].select(p["axis"] + 1, idx)
    flat = tuple(int(i) for i in np.asarray(idx).reshape(-1))
    if flat == tuple(range(flat[0], flat[0] + len(flat))):  # a contiguous run: a view, no kernel
        out = xs[0].narrow(p["axis"] + 1, flat[0], len(flat))
    else:
        out = xs[0].index_select(p["axis"] + 1, _index_tensor(flat, xs[0].device))
    return out.reshape(tuple(xs[0].shape[:p["axis"] + 1]) + np.asarray(idx).shape + tuple(xs[0].shape[p["axis"] + 2:]))


register(OpDef("gather", 1, _gathered, _np_gather, _torch_gather, "Gather",
               export=lambda ex, xs, p: ex.emit("Gather", [xs[0], ex.const("index", _ints(p["index"]))], "gather",
                                                axis=p["axis"] + 1),
               macs=lambda s, o, p: 0))


def _concatenated(shapes: Sequence[Shape], p: Params) -> Shape:
    a = p["axis"]
    rest = {tuple(s[:a]) + tuple(s[a + 1:]) for s in shapes}
    if len(rest) != 1:
        raise ValueError(f"cannot concatenate {' and '.join(map(str, shapes))} on axis {a}")
    out = list(shapes[0])
    out[a] = sum(s[a] for s in shapes)
    return tuple(out)


def _batched(xs: list, lib) -> list:
    """Constant operands (one axis short) broadcast over the batch of the tensor operands."""
    full = max(x.ndim for x in xs)
    n = next(x.shape[0] for x in xs if x.ndim == full)
    if lib is np:
        return [x if x.ndim == full else np.broadcast_to(x, (n, *x.shape)) for x in xs]
    return [x if x.ndim == full else x.expand((n, *x.shape)) for x in xs]


def _export_concat(ex, xs, p) -> str:
    tensor = next(x for x in xs if not ex.is_const(x))
    return ex.emit("Concat", [ex.batched(x, tensor) if ex.is_const(x) else x for x in xs], "concat",
                   axis=p["axis"] + 1)


register(OpDef("concat", None, _concatenated, lambda xs, p: np.concatenate(_batched(xs, np), axis=p["axis"] + 1),
               lambda xs, p: _torch().cat(_batched(xs, _torch()), dim=p["axis"] + 1), "Concat",
               export=_export_concat, macs=lambda s, o, p: 0))


def _padded(shapes: Sequence[Shape], p: Params) -> Shape:
    pads = p["pads"]  # per-sample axes: [begin..., end...]
    n = len(shapes[0])
    return tuple(d + pads[i] + pads[i + n] for i, d in enumerate(shapes[0]))


def _np_pad(xs, p):
    n = xs[0].ndim - 1
    widths = [(0, 0)] + [(p["pads"][i], p["pads"][i + n]) for i in range(n)]
    return np.pad(xs[0], widths, constant_values=p.get("value", 0.0))


def _torch_pad(xs, p):
    n = xs[0].ndim - 1
    flat: list[int] = []
    for i in reversed(range(n)):  # torch's order: last axis first, (begin, end) each
        flat += [p["pads"][i], p["pads"][i + n]]
    return _F().pad(xs[0], flat, value=p.get("value", 0.0))


def _export_pad(ex, xs, p) -> str:
    n = len(p["pads"]) // 2
    pads = [0, *p["pads"][:n], 0, *p["pads"][n:]]
    return ex.emit("Pad", [xs[0], ex.const("pads", _ints(pads)), ex.const("value", _f32(p.get("value", 0.0)))], "pad")


register(OpDef("pad", 1, _padded, _np_pad, _torch_pad, "Pad", export=_export_pad, macs=lambda s, o, p: 0))


def _matmul_shape(shapes: Sequence[Shape], p: Params) -> Shape:
    a, b = shapes
    if len(a) < 2 and len(b) < 2:
        raise ValueError("matmul of two vectors")
    if a[-1] != b[-2 if len(b) > 1 else -1]:
        raise ValueError(f"matmul of {tuple(a)} and {tuple(b)}: inner sizes {a[-1]} and {b[-2]} differ")
    batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    return tuple(int(d) for d in (*batch, a[-2], b[-1]))


register(OpDef("matmul", 2, _matmul_shape, lambda xs, p: np.matmul(xs[0], xs[1]),
               lambda xs, p: _torch().matmul(xs[0], xs[1]), "MatMul",
               macs=lambda s, o, p: int(np.prod(o)) * int(s[0][-1])))


def _dense_shape(shapes: Sequence[Shape], p: Params) -> Shape:
    x, w = shapes[0], shapes[1]
    if x[-1] != w[1]:
        raise ValueError(f"dense layer of {w[1]} inputs on features of size {x[-1]}")
    return (*x[:-1], w[0])


def _np_dense(xs, p):
    y = np.matmul(xs[0], xs[1].T)
    return y + xs[2] if len(xs) > 2 else y


def _export_dense(ex, xs, p) -> str:
    y = ex.emit("MatMul", [xs[0], ex.emit("Transpose", [xs[1]], "dense", perm=[1, 0])], "dense")
    return ex.emit("Add", [y, xs[2]], "dense") if len(xs) > 2 else y


#: ``x @ W.T + b`` on the last axis (a torch Linear on tokens): weight (out, in) and bias are constants
register(OpDef("dense", None, _dense_shape, _np_dense,
               lambda xs, p: _F().linear(xs[0], xs[1], xs[2] if len(xs) > 2 else None), None, export=_export_dense,
               macs=lambda s, o, p: int(np.prod(o)) * int(s[1][1])))


def _resized(shapes: Sequence[Shape], p: Params) -> Shape:
    return (shapes[0][0], *p["size"])


def _np_resize_nearest(xs, p):
    x = xs[0]
    h, w = x.shape[2:]
    oh, ow = p["size"]
    rows = np.minimum((np.arange(oh) * h / oh).astype(np.int64), h - 1)  # asymmetric, floor: torch's "nearest"
    cols = np.minimum((np.arange(ow) * w / ow).astype(np.int64), w - 1)
    return x[:, :, rows][:, :, :, cols]


register(OpDef("resize_nearest", 1, _resized, _np_resize_nearest,
               lambda xs, p: _F().interpolate(xs[0], size=tuple(p["size"]), mode="nearest"), None,
               macs=lambda s, o, p: 0))

# -- compounds the graph passes make (ios_core.passes) ---------------------------------------------------------
def _attention_shape(shapes: Sequence[Shape], p: Params) -> Shape:
    q, kt, v = shapes[:3]
    if q[-1] != kt[-2] or kt[-1] != v[-2]:
        raise ValueError(f"attention of queries {tuple(q)}, transposed keys {tuple(kt)} and values {tuple(v)}")
    return (*q[:-1], v[-1])


def _np_attention(xs, p):
    scores = np.matmul(xs[0], xs[1]) * p["scale"]
    if len(xs) > 3:
        scores = scores + xs[3]
    return np.matmul(_np_softmax(scores, -1), xs[2])


def _torch_attention(xs, p):
    """One fused attention kernel (``scaled_dot_product_attention``: flash or memory-efficient on CUDA) on
    (batch, heads, tokens, features); more leading axes (Swin's windows) are folded into the batch."""
    q, kt, v = xs[:3]
    mask = xs[3] if len(xs) > 3 else None
    k = kt.transpose(-1, -2)
    lead = q.shape[:-2]
    if q.dim() > 4:
        q, k, v = (t.reshape(-1, *t.shape[-3:]) for t in (q, k, v))
        if mask is not None and mask.dim() > 3:  # a per-window mask repeats over the batch
            mask = mask.expand(*lead, mask.shape[-2], mask.shape[-1]).reshape(*q.shape[:2], *mask.shape[-2:])
    out = _F().scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=p["scale"])
    return out.reshape(*lead, *out.shape[-2:])


def _export_attention(ex, xs, p) -> str:
    s = ex.emit("Mul", [ex.emit("MatMul", xs[:2], "attention"), ex.const("scale", _f32(p["scale"]))], "attention")
    if len(xs) > 3:
        s = ex.emit("Add", [s, xs[3]], "attention")
    return ex.emit("MatMul", [ex.emit("Softmax", [s], "attention", axis=-1), xs[2]], "attention")


#: softmax(q @ kt * scale [+ mask]) @ v: queries (..., L, D), keys transposed (..., D, S), values (..., S, E) and an
#: optional additive mask (relative position bias, shifted windows); the ``attention`` pass makes it
register(OpDef("attention", None, _attention_shape, _np_attention, _torch_attention, None, export=_export_attention,
               macs=lambda s, o, p: int(np.prod(o[:-1])) * int(s[1][-1]) * (int(s[0][-1]) + int(o[-1]))))


def _steps(xs: list, p: Params, run: Callable[[OpDef, list, Params], Any]) -> Any:
    """Run a fused program: each step reads operands (``o<i>``) or earlier steps' results (``s<j>``)."""
    out: list = []
    for step in p["steps"]:
        args = [xs[int(a[1:])] if a[0] == "o" else out[int(a[1:])] for a in step["args"]]
        out.append(run(OPS[step["op"]], args, step["params"]))
    return out[-1]


def _fused_macs(shapes: Sequence[Shape], out: Shape, p: Params) -> int:
    total = 0

    def cost(op: OpDef, args: list, params: Params) -> Shape:
        nonlocal total
        shape = tuple(op.infer(args, params))
        total += op.cost(args, shape, params)
        return shape
    _steps(list(shapes), p, cost)
    return total


def _export_fused(ex, xs, p) -> str:
    return _steps(xs, p, lambda op, args, params: op.to_onnx(ex, args, params))


#: a connected group of pointwise operators with one output (GELU's five, a scale and shift, a gate), as a
#: program of registry operators: one kernel where a compiler fuses it (Inductor on CUDA), the steps one by one
#: elsewhere; the ``fuse_pointwise`` pass makes it
register(OpDef("fused", None, lambda s, p: _steps(list(s), p, lambda op, a, q: tuple(op.infer(a, q))),
               lambda xs, p: _steps(xs, p, lambda op, a, q: op.numpy(a, q)),
               lambda xs, p: _steps(xs, p, lambda op, a, q: op.torch(a, q)), None, export=_export_fused,
               macs=_fused_macs, mixed_ranks=True))

#: the activations a conv (and the Activation node) may apply: unary operators without parameters
ACTIVATIONS: tuple[str, ...] = ("identity", *(name for name, op in OPS.items() if op.activation))


def apply_activation(lib: str, x: Any, act: str) -> Any:
    """``act`` (one of :data:`ACTIVATIONS`) on ``x`` with ``lib`` ("numpy" or "torch")."""
    if act == "identity":
        return x
    op = OPS[act]
    return (op.numpy if lib == "numpy" else op.torch)([x], {})
