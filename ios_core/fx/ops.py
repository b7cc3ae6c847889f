"""The converters, one per ATen operator family: convolutions, batch norm folded into them, activations fused
into them, pools, the classifier's matrix products, element-wise arithmetic and the layout ops CNNs use."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
import torch
from torch import fx

from ..ir import Value
from ..ir.nodes import ACTIVATIONS, Conv, Flatten, Linear, Pool
from .convert import Fmap, Importer, Refused, _numpy, converter, ir_shape

aten = torch.ops.aten


def _pair(v: Any, default: int) -> tuple[int, int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if not v:
        v = [default]
    return (int(v[0]), int(v[-1])) if len(v) <= 2 else (-1, -1)


def _packet(fx_node: fx.Node) -> Any:
    return getattr(fx_node.target, "overloadpacket", fx_node.target)


def _fmap(fx_node: fx.Node, x: Any, what: str = "its input") -> Fmap:
    if not isinstance(x, Fmap):
        raise Refused(fx_node, f"{what} is not a feature map")
    return x


def _image(fx_node: fx.Node, x: Any) -> Fmap:
    x = _fmap(fx_node, x)
    if x.rank != 4:
        raise Refused(fx_node, f"it takes (N, C, H, W), not {x.full}")
    return x


def _own(fx_node: fx.Node, x: Any) -> Fmap:
    """A feature map in its own shape: the converters that read its axes refuse ATen's merged rows."""
    x = _fmap(fx_node, x)
    if x.merged:
        raise Refused(fx_node, f"its input is {x.merged} held as {x.full}")
    return x


@converter(operator.getitem)
def getitem(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Any:
    seq, i = args
    if not isinstance(seq, (tuple, list)) or seq[i] is None:  # the producer is refused: the partitioner keeps a
        producer = fx_node.args[0]  # getitem with the node it reads
        raise Refused(producer if isinstance(producer, fx.Node) else fx_node,
                      "its second output (pooling indices, batch statistics) is read")
    return seq[i]


@converter(aten.clone, aten.alias, aten.alias_copy, aten.detach, aten.detach_copy, aten._to_copy, aten.contiguous,
           aten.lift_fresh_copy, aten.dropout)
def same(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """Copies, casts and eval-mode dropout: the IR's value itself (the plan runs in its own precision)."""
    src = fx_node.args[0].meta.get("val") if isinstance(fx_node.args[0], fx.Node) else None
    moved = kwargs.get("device") is not None and src is not None and torch.device(kwargs["device"]) != src.device
    if moved or kwargs.get("layout") not in (None, torch.strided):
        raise Refused(fx_node, "it moves the tensor to another device or layout")
    if fx_node.target is aten.dropout.default and args[2]:
        raise Refused(fx_node, "dropout in training mode")
    return _fmap(fx_node, args[0])


# -- convolution and what folds into it ----------------------------------------------------------------
@converter(aten.convolution)
def convolution(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    x, w, b, stride, padding, dilation, transposed, _output_padding, groups = args
    x = _image(fx_node, x)
    if transposed or not isinstance(w, torch.Tensor) or w.dim() != 4:
        raise Refused(fx_node, "only 2-D convolutions with fixed weights are taken (no transposed convolution)")
    if b is not None and not isinstance(b, torch.Tensor):
        raise Refused(fx_node, "its bias is computed from the input")
    conv = Conv(name=cv.name(), inputs=[[cv.value(x)]], out_channels=int(w.shape[0]),
                kernel=(int(w.shape[2]), int(w.shape[3])), stride=_pair(stride, 1), padding=_pair(padding, 0),
                dilation=_pair(dilation, 1), groups=int(groups), act="identity", weight=_numpy(w),
                bias=_numpy(b) if b is not None else np.zeros(int(w.shape[0]), np.float32))
    return cv.add(fx_node, conv)


@converter(aten._native_batch_norm_legit_no_training, aten.native_batch_norm)
def batch_norm(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> tuple:
    if _packet(fx_node) is aten.native_batch_norm:
        if args[5]:
            raise Refused(fx_node, "batch norm in training mode (call model.eval() first)")
        args = args[:5] + args[6:]
    x, weight, bias, mean, var, _momentum, eps = args
    x = _fmap(fx_node, x)
    if any(not isinstance(t, torch.Tensor) for t in (mean, var)):
        raise Refused(fx_node, "its statistics are computed from the input")
    c = int(mean.shape[0])
    scale = _numpy(weight) if weight is not None else np.ones(c, np.float32)
    scale = scale / np.sqrt(_numpy(var).astype(np.float64) + float(eps))
    shift = (_numpy(bias) if bias is not None else np.zeros(c, np.float32)) - _numpy(mean) * scale
    conv = cv.sole_conv(fx_node, x)
    if conv is not None and conv.weight is not None and conv.bias is not None:
        conv.weight = (conv.weight * scale.reshape(-1, 1, 1, 1)).astype(np.float32)
        conv.bias = (conv.bias * scale + shift).astype(np.float32)
        return (x, None, None)
    shape = (c,) + (1,) * (len(x.full) - 2)
    y = cv.op(fx_node, "channel_affine", [x], consts=[scale.reshape(shape), shift.reshape(shape)],
              args=("x0", "k0", "k1"), full=x.full)
    return (y, None, None)


def _act(cv: Importer, fx_node: fx.Node, x: Any, act: str, op: str | None = None, params: dict | None = None) -> Fmap:
    """An activation: fused into the conv that alone makes its input, else a registry op (``op``, or ``act``)."""
    x = _fmap(fx_node, x)
    conv = cv.sole_conv(fx_node, x) if act in ACTIVATIONS and op is None else None
    if conv is not None:
        conv.act = act
        return x
    return cv.op(fx_node, op or act, [x], params)


UNARY = {aten.relu: "relu", aten.sigmoid: "sigmoid", aten.tanh: "tanh", aten.hardswish: "hardswish",
         aten.silu: "silu", aten.exp: "exp", aten.sqrt: "sqrt", aten.neg: "neg", aten.erf: "erf"}


@converter(*UNARY)
def unary(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    return _act(cv, fx_node, args[0], UNARY[_packet(fx_node)])


@converter(aten.gelu)
def gelu(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    return _act(cv, fx_node, args[0], "gelu_tanh" if approximate == "tanh" else "gelu")


@converter(aten.hardtanh, aten.clamp)
def clamp(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    lo = kwargs.get("min", args[1] if len(args) > 1 else None)
    hi = kwargs.get("max", args[2] if len(args) > 2 else None)
    if fx_node.target is aten.hardtanh.default and len(args) < 2:
        lo, hi = -1.0, 1.0
    if isinstance(lo, (torch.Tensor, Fmap)) or isinstance(hi, (torch.Tensor, Fmap)):
        raise Refused(fx_node, "tensor bounds are not taken")
    if (lo, hi) == (0, 6):
        return _act(cv, fx_node, args[0], "relu6")
    if (lo, hi) == (0, None):
        return _act(cv, fx_node, args[0], "relu")
    inf = math.inf
    return _act(cv, fx_node, args[0], "clip", "clip", {"min": -inf if lo is None else float(lo),
                                                      "max": inf if hi is None else float(hi)})


@converter(aten.hardsigmoid)
def hardsigmoid(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    return _act(cv, fx_node, args[0], "hardsigmoid", "hardsigmoid", {"alpha": 1.0 / 6.0, "beta": 0.5})


@converter(aten.leaky_relu)
def leaky_relu(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    return _act(cv, fx_node, args[0], "leaky_relu", "leaky_relu", {"alpha": float(args[1]) if len(args) > 1 else 0.01})


# -- arithmetic ----------------------------------------------------------------------------------------
BINARY = {aten.add: "add", aten.sub: "sub", aten.mul: "mul", aten.div: "div", aten.maximum: "max",
          aten.minimum: "min"}


@converter(*BINARY)
def binary(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    op = BINARY[_packet(fx_node)]
    a, b = args[0], args[1]
    alpha = kwargs.get("alpha", 1)
    if alpha != 1:
        if not isinstance(b, Fmap):
            b = b * alpha
        else:
            raise Refused(fx_node, "add/sub with alpha of two feature maps")
    if kwargs.get("rounding_mode") is not None:
        raise Refused(fx_node, "integer division")
    if isinstance(a, Fmap) and isinstance(b, Fmap):
        if op == "add" and (a.full, a.merged) == (b.full, b.merged) and len(a.expr) == 1 and len(b.expr) == 1:
            return Fmap([[*a.expr[0], *b.expr[0]]], a.full, a.merged)  # a sum: no node, its reader adds the values
        return cv.op(fx_node, op, [a, b])
    if isinstance(a, Fmap):
        return cv.op(fx_node, op, [a], consts=[cv.per_sample(fx_node, b, a)], args=("x0", "k0"))
    return cv.op(fx_node, op, [b], consts=[cv.per_sample(fx_node, a, b)], args=("k0", "x0"))


@converter(aten.rsub)
def rsub(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    x, other = _fmap(fx_node, args[0]), args[1]
    if isinstance(other, Fmap):
        raise Refused(fx_node, "rsub of two feature maps")
    return cv.op(fx_node, "sub", [x], consts=[cv.per_sample(fx_node, other, x)], args=("k0", "x0"))


@converter(aten.cat)
def cat(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    xs, dim = args[0], kwargs.get("dim", args[1] if len(args) > 1 else 0)
    full = cv.full_of(fx_node)
    maps = [x for x in xs if isinstance(x, Fmap)]
    ref = _own(fx_node, maps[0])
    axis = ref.axis(dim)
    if axis is None:
        raise Refused(fx_node, "it concatenates along the batch axis")
    if len(maps) == len(xs) and axis == 0 and len(full) in (2, 4):  # channels: the terms side by side, no node
        return Fmap([t for x in xs for t in x.expr], full)
    names: list[str] = []
    consts: list[np.ndarray] = []
    for x in xs:  # a constant (ViT's class token) is one sample's, broadcast over the batch
        if isinstance(x, Fmap):
            names.append(f"x{len(names) - len(consts)}")
        else:
            names.append(f"k{len(consts)}")
            consts.append(cv.per_sample(fx_node, x, ref))
    return cv.op(fx_node, "concat", [_own(fx_node, x) for x in maps], {"axis": axis}, consts=consts,
                 args=tuple(names))


# -- pooling -------------------------------------------------------------------------------------------
@converter(aten.max_pool2d_with_indices)
def max_pool(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> tuple:
    x = _image(fx_node, args[0])
    kernel = _pair(args[1], 1)
    stride = _pair(args[2] if len(args) > 2 and args[2] else kernel, 1)
    padding = _pair(args[3] if len(args) > 3 else 0, 0)
    dilation = _pair(args[4] if len(args) > 4 else 1, 1)
    ceil = bool(args[5]) if len(args) > 5 else False
    if dilation != (1, 1):
        raise Refused(fx_node, "dilated max pooling is not in the IR")
    pool = Pool(name=cv.name(), inputs=[[cv.value(x)]], pool_type="max", kernel=kernel, stride=stride,
                padding=padding, ceil_mode=ceil)
    val = fx_node.meta.get("val")
    return (cv.add(fx_node, pool, tuple(val[0].shape) if isinstance(val, (tuple, list)) else None), None)


@converter(aten.avg_pool2d)
def avg_pool(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    x = _image(fx_node, args[0])
    kernel = _pair(args[1], 1)
    stride = _pair(args[2] if len(args) > 2 and args[2] else kernel, 1)
    rest = list(args[3:]) + [None] * 4
    padding = _pair(rest[0] if rest[0] is not None else 0, 0)
    ceil = bool(rest[1]) if rest[1] is not None else False
    include = bool(rest[2]) if rest[2] is not None else True
    if rest[3] is not None:
        raise Refused(fx_node, "avg_pool2d's divisor_override is not in the IR")
    return cv.add(fx_node, Pool(name=cv.name(), inputs=[[cv.value(x)]], pool_type="avg", kernel=kernel,
                                stride=stride, padding=padding, ceil_mode=ceil, count_include_pad=include))


def _global(cv: Importer, fx_node: fx.Node, x: Any, dims: Any, kind: str) -> Fmap:
    x = _image(fx_node, x)
    if sorted(int(d) % 4 for d in dims) != [2, 3]:
        raise Refused(fx_node, f"it reduces axes {list(dims)}, not the spatial ones")
    return cv.add(fx_node, Pool(name=cv.name(), inputs=[[cv.value(x)]], pool_type=kind))


def _reduce(cv: Importer, fx_node: fx.Node, x: Any, dims: Any, op: str) -> Fmap:
    """A mean or L2 norm over per-sample axes (tokens, ConvNeXt-V2's global response norm): kept axes first,
    reshaped to ATen's shape where it drops them."""
    x = _own(fx_node, x)
    dims = sorted({int(d) % x.rank for d in (dims if isinstance(dims, (list, tuple)) else [dims])})
    axes = [x.axis(d) for d in dims]
    if not dims or None in axes or x.rank == 2:
        raise Refused(fx_node, f"a reduction over axes {dims} of {x.full}")
    full = cv.full_of(fx_node)
    kept = tuple(1 if i in dims else d for i, d in enumerate(x.full))
    y = cv.op(fx_node, op, [x], {"axes": axes, "keepdims": True}, full=kept)
    return y if kept == full else cv.op(fx_node, "reshape", [y], {"shape": list(ir_shape(full))})


@converter(aten.mean)
def mean(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    if len(args) < 2 or kwargs.get("dtype") is not None:
        raise Refused(fx_node, "a mean over all axes or with a dtype")
    x = _fmap(fx_node, args[0])
    if x.rank == 4 and not x.merged and sorted(int(d) % 4 for d in args[1]) == [2, 3]:
        return _global(cv, fx_node, x, args[1], "global_avg")
    return _reduce(cv, fx_node, x, args[1], "reduce_mean")


@converter(aten.sum)
def sum_(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """A sum over per-sample axes: their mean times their count."""
    if len(args) < 2 or kwargs.get("dtype") is not None:
        raise Refused(fx_node, "a sum over all axes or with a dtype")
    x = _own(fx_node, args[0])
    dims = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
    count = float(np.prod([x.full[int(d) % x.rank] for d in dims]))
    y = _reduce(cv, fx_node, x, dims, "reduce_mean")
    return cv.op(fx_node, "mul", [y], consts=[np.array(count, np.float32)], args=("x0", "k0"))


@converter(aten.pow)
def power(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    x, exponent = _fmap(fx_node, args[0]), args[1]
    if not isinstance(exponent, (int, float)):
        raise Refused(fx_node, "a power with a tensor exponent")
    return cv.op(fx_node, "pow", [x], consts=[np.array(float(exponent), np.float32)], args=("x0", "k0"))


@converter(aten.rsqrt)
def rsqrt(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    return cv.op(fx_node, "pow", [_fmap(fx_node, args[0])], consts=[np.array(-0.5, np.float32)], args=("x0", "k0"))


@converter(aten.linalg_vector_norm)
def vector_norm(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    order = kwargs.get("ord", args[1] if len(args) > 1 else 2)
    dims = kwargs.get("dim", args[2] if len(args) > 2 else None)
    if order != 2 or dims is None or kwargs.get("dtype") is not None:
        raise Refused(fx_node, "a norm other than L2 over given axes")
    return _reduce(cv, fx_node, args[0], dims, "reduce_l2")


@converter(aten.amax)
def amax(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    return _global(cv, fx_node, args[0], args[1] if len(args) > 1 else [], "global_max")


@converter(aten._adaptive_avg_pool2d)
def adaptive_avg(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    x = _image(fx_node, args[0])
    if tuple(args[1]) == (1, 1):
        return _global(cv, fx_node, x, [2, 3], "global_avg")
    h, w = x.full[2:]
    oh, ow = args[1]
    if h % oh or w % ow:
        raise Refused(fx_node, f"adaptive pooling of {h}x{w} to {oh}x{ow} has uneven windows")
    k = (h // oh, w // ow)
    return cv.add(fx_node, Pool(name=cv.name(), inputs=[[cv.value(x)]], pool_type="avg", kernel=k, stride=k))


# -- layout --------------------------------------------------------------------------------------------
@converter(aten.view, aten.view_copy, aten._unsafe_view, aten.reshape, aten.squeeze, aten.squeeze_copy, aten.unsqueeze,
           aten.unsqueeze_copy, aten.flatten)
def reshape(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    x = _fmap(fx_node, args[0])
    full = cv.full_of(fx_node)
    if full == x.full:
        return x
    own = x.own().full
    if full == own:
        return Fmap(x.expr, full)
    for k in range(2, len(own)):  # its first k axes as one: (B, H, N, D) as attention's (B x H, N, D), or as
        if full == (int(np.prod(own[:k])), *own[k:]):  # rows (B x H x N, D) for a linear layer
            return Fmap(x.expr, full, own)
    if x.merged:
        raise Refused(fx_node, f"a reshape of rows of {x.merged} to {full}")
    if not full or full[0] != cv.batch:
        raise Refused(fx_node, f"it reshapes {x.full} to {full}, moving the batch axis")
    spatial_one = x.rank == 4 and x.full[2:] == (1, 1)
    if len(full) == 2 and (x.rank == 2 or spatial_one):  # (B, C, 1, 1) <-> (B, C): the same IR value
        return Fmap(x.expr, full)
    if len(full) == 4 and full[2:] == (1, 1) and x.rank == 2:
        return Fmap(x.expr, full)
    if len(full) == 2 and x.rank == 4:  # a CNN's flatten
        return cv.add(fx_node, Flatten(name=cv.name(), inputs=[[cv.value(x)]]))
    return cv.op(fx_node, "reshape", [x], {"shape": list(ir_shape(full))})  # a (B, F) vector is (F, 1, 1)


@converter(aten.addmm, aten.mm)
def matmul(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    bias, x, w = (args[0], args[1], args[2]) if _packet(fx_node) is aten.addmm else (None, *args[:2])
    if kwargs.get("beta", 1) != 1 or kwargs.get("alpha", 1) != 1:
        raise Refused(fx_node, "addmm with alpha or beta")
    x = _fmap(fx_node, x)
    if not isinstance(w, torch.Tensor) or (bias is not None and not isinstance(bias, torch.Tensor)):
        raise Refused(fx_node, "a product of two feature maps")
    weight = _numpy(w).T.copy()
    b = _numpy(bias).reshape(-1) if bias is not None else np.zeros(weight.shape[0], np.float32)
    if b.shape[0] != weight.shape[0]:
        raise Refused(fx_node, f"a bias of {b.shape[0]} values for {weight.shape[0]} outputs")
    if x.merged:  # a linear layer on every token or pixel
        return cv.op(fx_node, "dense", [x], consts=[weight, b], args=("x0", "k0", "k1"),
                     full=(*x.merged[:-1], weight.shape[0]))
    return cv.add(fx_node, Linear(name=cv.name(), inputs=[[cv.value(x)]], out_features=int(weight.shape[0]),
                                  weight=weight, bias=b.astype(np.float32)))


@converter(aten.permute, aten.permute_copy)
def permute(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    x, dims = _fmap(fx_node, args[0]), [int(d) % len(args[0].full) for d in args[1]]
    if dims[0] != 0:
        raise Refused(fx_node, "it moves the batch axis")
    if dims == sorted(dims):
        return x
    if x.rank == 2:
        raise Refused(fx_node, "a transpose of a (B, F) matrix")
    return cv.op(fx_node, "transpose", [x], {"perm": [d - 1 for d in dims[1:]]})


@converter(aten.native_layer_norm)
def layer_norm(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> tuple:
    x, shape, weight, bias, eps = _fmap(fx_node, args[0]), list(args[1]), *args[2:5]
    own = x.own()
    if len(shape) >= own.rank:
        raise Refused(fx_node, f"a layer norm over {shape} of {x.full}")
    consts = [_numpy(t) if t is not None else np.full(shape, v, np.float32) for t, v in ((weight, 1.0), (bias, 0.0))]
    params = {"dims": len(shape), "eps": float(eps)}
    if own.rank == 2:  # a (B, F) vector, the IR's (F, 1, 1): normalized as one row (1, F)
        b, f = own.full
        row = cv.op(fx_node, "reshape", [own], {"shape": [1, f]}, full=(b, 1, f))
        y = cv.op(fx_node, "layer_norm", [row], params, consts=consts, args=("x0", "k0", "k1"), full=(b, 1, f))
        return (cv.op(fx_node, "reshape", [y], {"shape": [f, 1, 1]}, full=own.full), None, None)
    y = cv.op(fx_node, "layer_norm", [own], params, consts=consts, args=("x0", "k0", "k1"), full=own.full)
    return (Fmap(y.expr, x.full, x.merged), None, None)


@converter(aten._softmax, aten._safe_softmax)
def softmax(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """Softmax (``_safe_softmax``, SDPA's, differs only on a row that is all -inf: no vision model masks one)."""
    x = _fmap(fx_node, args[0])
    axis = x.axis(int(args[1]))
    if axis is None or (x.rank == 2 and not x.merged):
        raise Refused(fx_node, "a softmax over the batch or a (B, F) matrix")
    return cv.op(fx_node, "softmax", [x], {"axis": axis})


@converter(aten.bmm)
def bmm(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """Attention's products: both operands (B x H, N, D) views of (B, H, N, D) feature maps, one matmul per sample."""
    a, b = args[0], args[1]
    if not isinstance(a, Fmap) and not isinstance(b, Fmap):
        raise Refused(fx_node, "its input is not a feature map")
    if not isinstance(a, Fmap) or not isinstance(b, Fmap):  # a learned query (SigLIP's attention pooling)
        x = a if isinstance(a, Fmap) else b
        if not x.merged or len(x.merged) < 4:
            raise Refused(fx_node, "a batched product that is not per sample")
        c = _numpy(b if x is a else a)
        c = cv.per_sample(fx_node, c.reshape(*x.merged[:-2], *c.shape[1:]), x)
        own = (*x.merged[:-1], c.shape[-1]) if x is a else (*x.merged[:-2], c.shape[-2], x.merged[-1])
        y = cv.op(fx_node, "matmul", [x.own()], consts=[c], args=("x0", "k0") if x is a else ("k0", "x0"), full=own)
        return Fmap(y.expr, cv.full_of(fx_node), own)
    if not a.merged or not b.merged or a.merged[:-2] != b.merged[:-2] or len(a.merged) < 4:
        raise Refused(fx_node, "a batched product that is not per sample")
    own = (*a.merged[:-1], b.merged[-1])
    y = cv.op(fx_node, "matmul", [a.own(), b.own()], full=own)
    return Fmap(y.expr, cv.full_of(fx_node), own)


@converter(aten.select, aten.select_copy)
def select(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """One index along an axis (ViT's class token, ``x[:, 0]``)."""
    x = _own(fx_node, args[0])
    dim = int(args[1]) % x.rank
    axis = x.axis(dim)
    if axis is None or x.rank < 3:
        raise Refused(fx_node, f"a select along axis {dim} of {x.full}")
    index = int(args[2]) % x.full[dim]
    if x.rank > 3:
        return cv.op(fx_node, "gather", [x], {"axis": axis, "index": index})
    kept = tuple(1 if i == dim else d for i, d in enumerate(x.full))  # (B, F) left: the IR's (F, 1, 1)
    y = cv.op(fx_node, "gather", [x], {"axis": axis, "index": [index]}, full=kept)
    return cv.op(fx_node, "reshape", [y], {"shape": [*ir_shape(cv.full_of(fx_node))]})


def _channels(cv: Importer, x: Fmap, begin: int, end: int) -> Fmap:
    """Channels [begin, end) of ``x``: a slice of the value that holds them (no node)."""
    v = cv.value(x)
    return Fmap([[Value(v.node, v.begin + begin, v.begin + end)]], (x.full[0], end - begin, *x.full[2:]))


@converter(aten.split, aten.split_copy, aten.split_with_sizes, aten.split_with_sizes_copy)
def split(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> tuple:
    """Channels of an image for free; pieces along another per-sample axis (gMLP's gate, EVA's SwiGLU), slices."""
    x, sizes = _fmap(fx_node, args[0]), args[1]
    dim = int(kwargs.get("dim", args[2] if len(args) > 2 else 0)) % x.rank
    n = x.full[dim]
    sizes = [int(s) for s in sizes] if isinstance(sizes, (list, tuple)) else [int(sizes)] * -(-n // int(sizes))
    bounds, begin = [], 0
    for size in sizes:
        bounds.append((begin, min(begin + size, n)))
        begin = bounds[-1][1]
    if dim == 1 and x.rank == 4 and not x.merged:
        return tuple(_channels(cv, x, b, e) for b, e in bounds)
    x = _own(fx_node, x)
    axis = x.axis(dim)
    if axis is None or x.rank == 2:
        raise Refused(fx_node, f"a split along axis {dim} of {x.full}")
    pieces = []
    for b, e in bounds:
        full = tuple(e - b if i == dim else d for i, d in enumerate(x.full))
        pieces.append(cv.op(fx_node, "slice", [x], {"axes": [axis], "starts": [b], "ends": [e], "steps": [1]},
                            full=full))
    return tuple(pieces)


@converter(aten.expand, aten.expand_copy)
def expand(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """A broadcast along per-sample axes (a gate over tokens)."""
    x, full = _own(fx_node, args[0]), cv.full_of(fx_node)
    if full == x.full:
        return x
    if full[0] != x.full[0] or len(full) != x.rank or x.rank == 2:
        raise Refused(fx_node, f"an expand of {x.full} to {full}")
    return cv.op(fx_node, "expand", [x], {"shape": list(full[1:])})


@converter(aten.slice, aten.slice_copy)
def slice_(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """Channels of an image for free (a slice of the value); along another per-sample axis, the IR's slice."""
    x = _fmap(fx_node, args[0])
    dim, start, end, step = (list(args[1:]) + [0, None, None, 1][len(args) - 1:])[:4]
    full = cv.full_of(fx_node)
    dim = int(dim) % x.rank
    if full == x.full:
        return x
    begin, stop, step = slice(start, end, step).indices(x.full[dim])
    if dim == 1 and x.rank == 4 and step == 1 and not x.merged:
        return _channels(cv, x, begin, begin + full[1])
    x = _own(fx_node, x)
    axis = x.axis(dim)
    if axis is None or x.rank == 2:
        raise Refused(fx_node, f"a slice along axis {dim} of {x.full}")
    return cv.op(fx_node, "slice", [x], {"axes": [axis], "starts": [begin], "ends": [stop], "steps": [step]})


@converter(aten.as_strided, aten.as_strided_, aten.as_strided_copy)
def restride(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """A tensor given a memory format (a mean kept NHWC after a channels-last input): the same values to the IR."""
    x = _fmap(fx_node, args[0])
    offset = kwargs.get("storage_offset", args[3] if len(args) > 3 else None)
    if tuple(int(d) for d in args[1]) != x.full or offset not in (None, 0):
        raise Refused(fx_node, "a strided view that is not its input's shape")
    return x


@converter(aten.constant_pad_nd)
def pad(cv: Importer, fx_node: fx.Node, args: list, kwargs: dict) -> Fmap:
    """TF-style "same" padding (timm's tf_ models): ATen's pairs run from the last axis back."""
    x, pairs = _own(fx_node, args[0]), [int(p) for p in args[1]]
    if x.rank == 2:  # the IR's (F, 1, 1) has axes ATen's pairs do not name
        raise Refused(fx_node, f"a pad of a {x.full} vector")
    value = float(args[2]) if len(args) > 2 else 0.0
    n = x.rank - 1  # per-sample axes
    begin, end = [0] * n, [0] * n
    for i in range(len(pairs) // 2):
        axis = n - 1 - i
        if axis < 0:
            raise Refused(fx_node, "it pads the batch axis")
        begin[axis], end[axis] = pairs[2 * i], pairs[2 * i + 1]
    if min(begin + end) >= 0:
        return cv.op(fx_node, "pad", [x], {"pads": begin + end, "value": value})
    grown = [d + max(b, 0) + max(e, 0) for d, b, e in zip(x.full[1:], begin, end)]  # NASNet's crops: the pad, then
    y = cv.op(fx_node, "pad", [x], {"pads": [max(v, 0) for v in begin + end], "value": value},  # a slice
              full=(x.full[0], *grown)) if max(begin + end) > 0 else x
    axes = [i for i in range(n) if begin[i] < 0 or end[i] < 0]
    return cv.op(fx_node, "slice", [y], {"axes": axes, "starts": [max(-begin[i], 0) for i in axes],
                                         "ends": [grown[i] - max(-end[i], 0) for i in axes], "steps": [1] * len(axes)})
