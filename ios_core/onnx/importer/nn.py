"""Converters of the network operators: convolution, normalization, activations, softmax, pooling, reductions,
padding and resizing."""

from __future__ import annotations

import numpy as np
import onnx

from ...ir.nodes import Activation, Conv, Pool
from ...ir.ops import ACTIVATIONS
from .registry import converter, text
from .state import Importer
from .symbols import BatchAxis, Expr

#: ONNX ops that become fusable activations (``Conv.act`` or an Activation node)
ACTS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "HardSwish": "hardswish", "Softplus": "softplus"}
assert set(ACTS.values()) <= set(ACTIVATIONS)
POOLS = {"MaxPool": "max", "AveragePool": "avg"}
GLOBAL_POOLS = {"GlobalAveragePool": "global_avg", "GlobalMaxPool": "global_max"}
REDUCTIONS = {"ReduceMean": "reduce_mean", "ReduceL2": "reduce_l2"}


# -- convolution, normalization, activations ------------------------------------------------
def _pads(imp: Importer, n: onnx.NodeProto, a: dict, kernel, dilations=(1, 1)) -> tuple[tuple[int, int], list[int]]:
    """(symmetric padding, the extra [top, left, bottom, right] beyond it) of a conv or pool."""
    auto = text(a.get("auto_pad", "NOTSET"))
    pads = list(a.get("pads", [0, 0, 0, 0]))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        _, h, w = imp.ir_shape(n, n.input[0])
        strides = a.get("strides", [1, 1])
        pads = [0, 0, 0, 0]
        for i, size in enumerate((h, w)):
            span = (kernel[i] - 1) * dilations[i] + 1
            total = max((-(-size // strides[i]) - 1) * strides[i] + span - size, 0)
            small = total // 2
            pads[i], pads[i + 2] = (small, total - small) if auto == "SAME_UPPER" else (total - small, small)
    elif auto not in ("NOTSET", "VALID"):
        raise imp.error(n, f"auto_pad {auto} is not supported")
    sym = (min(pads[0], pads[2]), min(pads[1], pads[3]))
    return sym, [pads[0] - sym[0], pads[1] - sym[1], pads[2] - sym[0], pads[3] - sym[1]]


def _padded(imp: Importer, n: onnx.NodeProto, x: Expr, extra: list[int], value: float = 0.0) -> Expr:
    if not any(extra):
        return x
    tmp = f"{n.output[0]}#pad"
    imp.op(n, "pad", [x], tmp, {"pads": [0, extra[0], extra[1], 0, extra[2], extra[3]], "value": value})
    return imp.symbols.expr(tmp)


@converter("Conv")
def conv(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    x, mode = imp.tensor(n, n.input[0])
    w = imp.required(n, 1)
    b = imp.const(n, 2)
    if len(w.shape) != 4 or mode is not BatchAxis.OWN or len(imp.full(n.input[0])) != 4:
        raise imp.error(n, f"only 2-D convolutions of NCHW tensors are supported (weight shape {w.shape})")
    kernel = tuple(a.get("kernel_shape", w.shape[2:]))
    dilations = tuple(a.get("dilations", [1, 1]))
    sym, extra = _pads(imp, n, a, kernel, dilations)
    node = Conv(name=imp.new_name(), inputs=_padded(imp, n, x, extra), out_channels=int(w.shape[0]),
                kernel=kernel, stride=tuple(a.get("strides", [1, 1])), padding=sym, dilation=dilations,
                groups=int(a.get("group", 1)), act="identity", weight=w.astype(np.float32),
                bias=(b if b is not None else np.zeros(w.shape[0])).astype(np.float32))
    imp.add(n, node, n.output[0])


@converter("BatchNormalization")
def batch_norm(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    gamma, beta, mean, var = (imp.required(n, i).astype(np.float64) for i in range(1, 5))
    scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
    shift = beta - mean * scale
    prev = imp.producer.get(n.input[0])
    if (isinstance(prev, Conv) and prev.act == "identity" and imp.sole_consumer(n.input[0])
            and prev.weight is not None and prev.bias is not None):
        prev.weight = (prev.weight * scale[:, None, None, None]).astype(np.float32)
        prev.bias = (prev.bias * scale + shift).astype(np.float32)
        imp.alias(n.output[0], n.input[0])
        return
    x, mode = imp.tensor(n, n.input[0])
    if mode is not BatchAxis.OWN:
        raise imp.error(n, "BatchNormalization of a tensor whose batch axis is merged is not supported")
    imp.op(n, "channel_affine", [x], n.output[0], consts=[scale, shift], args=("x0", "k0", "k1"))


def activation(imp: Importer, n: onnx.NodeProto, act: str) -> None:
    """``act`` fused into the conv before it where that conv's output is read only here, else an Activation."""
    prev = imp.producer.get(n.input[0])
    if isinstance(prev, Conv) and prev.act == "identity" and imp.sole_consumer(n.input[0]):
        prev.act = act
        imp.alias(n.output[0], n.input[0])
        return
    x = imp.expr(n, n.input[0])
    imp.add(n, Activation(name=imp.new_name(), inputs=x, act=act), n.output[0], imp.full(n.input[0]))


@converter(*ACTS)
def fusable_activation(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    activation(imp, n, ACTS[n.op_type])


@converter("Clip")
def clip(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    lo = imp.const(n, 1) if len(n.input) > 1 else a.get("min")
    hi = imp.const(n, 2) if len(n.input) > 2 else a.get("max")
    lo_f = -np.inf if lo is None else float(np.asarray(lo))
    hi_f = np.inf if hi is None else float(np.asarray(hi))
    if (lo_f, hi_f) == (0.0, 6.0):
        return activation(imp, n, "relu6")
    if (lo_f, hi_f) == (0.0, np.inf):
        return activation(imp, n, "relu")
    x, mode = imp.tensor(n, n.input[0])
    imp.op(n, "clip", [x], n.output[0], {"min": lo_f, "max": hi_f}, merged=mode is BatchAxis.MERGED)


@converter("HardSigmoid")
def hard_sigmoid(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    x, mode = imp.tensor(n, n.input[0])
    imp.op(n, "hardsigmoid", [x], n.output[0], {"alpha": float(a.get("alpha", 0.2)), "beta": float(a.get("beta", 0.5))},
           merged=mode is BatchAxis.MERGED)


@converter("LeakyRelu")
def leaky_relu(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    x, mode = imp.tensor(n, n.input[0])
    imp.op(n, "leaky_relu", [x], n.output[0], {"alpha": float(a.get("alpha", 0.01))}, merged=mode is BatchAxis.MERGED)


@converter("Gelu")
def gelu(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    if text(a.get("approximate", "none")) != "none":
        raise imp.error(n, "the tanh approximation of Gelu is not supported")
    activation(imp, n, "gelu")


@converter("LayerNormalization")
def layer_norm(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    x, mode = imp.tensor(n, n.input[0])
    rank = len(imp.full(n.input[0]))
    first = imp.axis(n, n.input[0], int(a.get("axis", -1)), mode)
    dims = rank - (first + (1 if mode is BatchAxis.OWN else 0))
    consts = [c for c in (imp.const(n, 1), imp.const(n, 2)) if c is not None]
    imp.op(n, "layer_norm", [x], n.output[0], {"dims": dims, "eps": float(a.get("epsilon", 1e-5))},
           consts=consts, args=("x0", *(f"k{i}" for i in range(len(consts)))), merged=mode is BatchAxis.MERGED)


@converter("Softmax")
def softmax(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    x, mode = imp.tensor(n, n.input[0])
    imp.op(n, "softmax", [x], n.output[0], {"axis": imp.axis(n, n.input[0], a.get("axis", -1), mode)},
           merged=mode is BatchAxis.MERGED)


# -- pooling and reductions ----------------------------------------------------------------
@converter(*POOLS)
def pool(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    kind = POOLS[n.op_type]
    if any(d != 1 for d in a.get("dilations", [1, 1])):
        raise imp.error(n, f"dilations {a['dilations']} are not supported")
    if len(n.output) > 1 and n.output[1]:
        raise imp.error(n, "MaxPool indices output is not supported")
    x, mode = imp.tensor(n, n.input[0])
    if mode is not BatchAxis.OWN or len(imp.full(n.input[0])) != 4:
        raise imp.error(n, "only 2-D pooling of NCHW tensors is supported")
    kernel = tuple(a["kernel_shape"])
    sym, extra = _pads(imp, n, a, kernel)
    include = bool(a.get("count_include_pad", 0))
    if any(extra) and kind == "avg" and not include:
        raise imp.error(n, f"average pooling with asymmetric padding {a.get('pads')} excluding the pads "
                           f"is not supported")
    x = _padded(imp, n, x, extra, -np.inf if kind == "max" else 0.0)
    node = Pool(name=imp.new_name(), inputs=x, pool_type=kind, kernel=kernel,
                stride=tuple(a.get("strides", [1, 1])), padding=sym, ceil_mode=bool(a.get("ceil_mode", 0)),
                count_include_pad=include)
    imp.add(n, node, n.output[0])


@converter(*GLOBAL_POOLS)
def global_pool(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    imp.add(n, Pool(name=imp.new_name(), inputs=imp.expr(n, n.input[0]), pool_type=GLOBAL_POOLS[n.op_type]),
            n.output[0])


def _reduce_axes(imp: Importer, n: onnx.NodeProto, a: dict, mode: BatchAxis) -> list[int]:
    axes = a.get("axes")
    if axes is None and len(n.input) > 1 and n.input[1]:
        axes = imp.required(n, 1).tolist()
    if axes is None:
        raise imp.error(n, "a reduction over every axis (the batch too) is not supported")
    return sorted(imp.axis(n, n.input[0], x, mode) for x in axes)


@converter(*REDUCTIONS)
def reduce(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    op = REDUCTIONS[n.op_type]
    x, mode = imp.tensor(n, n.input[0])
    axes = _reduce_axes(imp, n, a, mode)
    keep = bool(a.get("keepdims", 1))
    if op == "reduce_mean" and mode is BatchAxis.OWN and axes == [1, 2] and len(imp.full(n.input[0])) == 4:
        c = imp.full(n.input[0])[1]
        imp.add(n, Pool(name=imp.new_name(), inputs=x, pool_type="global_avg"), n.output[0],
                (imp.batch, c, 1, 1) if keep else (imp.batch, c))
        return
    imp.op(n, op, [x], n.output[0], {"axes": axes, "keepdims": keep}, merged=mode is BatchAxis.MERGED)


# -- padding and resizing ----------------------------------------------------------------------
@converter("Pad")
def pad(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    mode_attr = text(a.get("mode", "constant"))
    if mode_attr != "constant":
        raise imp.error(n, f"Pad mode {mode_attr!r} is not supported")
    x, mode = imp.tensor(n, n.input[0])
    pads = [int(p) for p in imp.required(n, 1).tolist()]
    value = imp.const(n, 2)
    axes = imp.const(n, 3)
    full = list(imp.full(n.input[0]))
    rank = len(full)
    axes_l = [int(v) % rank for v in axes.tolist()] if axes is not None else list(range(rank))
    k = len(axes_l)
    begin, end = [0] * rank, [0] * rank
    for j, ax in enumerate(axes_l):
        begin[ax], end[ax] = pads[j], pads[j + k]
    if mode is BatchAxis.OWN:
        if begin[0] or end[0]:
            raise imp.error(n, "padding the batch axis is not supported")
        ir_pads = begin[1:] + end[1:]
    else:
        if begin[0] or end[0]:
            raise imp.error(n, "padding a merged batch axis is not supported")
        ir_pads = begin + end
    if not any(ir_pads):
        return imp.alias(n.output[0], n.input[0])
    out_full = tuple(d + begin[i] + end[i] for i, d in enumerate(full))
    imp.op(n, "pad", [x], n.output[0], {"pads": ir_pads, "value": float(value) if value is not None else 0.0},
           full=out_full)


@converter("Resize")
def resize(imp: Importer, n: onnx.NodeProto, a: dict) -> None:
    x, mode = imp.tensor(n, n.input[0])
    full = imp.full(n.input[0])
    if mode is not BatchAxis.OWN or len(full) != 4:
        raise imp.error(n, "only resizing NCHW feature maps is supported")
    if text(a.get("mode", "nearest")) != "nearest":
        raise imp.error(n, f"Resize mode {text(a.get('mode'))!r} is not supported (nearest only)")
    given = imp.const(n, 3)
    if given is None:
        given = np.floor(np.asarray(full) * imp.required(n, 2)).astype(np.int64)
    sizes = [int(s) for s in given]
    if sizes[:2] != list(full[:2]):
        raise imp.error(n, "Resize may change only the spatial size")
    imp.op(n, "resize_nearest", [x], n.output[0], {"size": sizes[2:]})
