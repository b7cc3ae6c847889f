"""Import ONNX vision models (CNNs and transformers) into the IR.

Each ONNX tensor maps to an *expression*: a list of terms (concatenated) of values (summed), so Concat
on channels and Add of equal shapes cost no node and consumers read them directly, the way IOS writes
graphs. BatchNormalization folds into the conv before it (else it is a per-channel affine op),
activations fuse into a conv whose only consumer they are, Dropout/Identity vanish, and every other
operator becomes an :class:`~ios_core.ir.Op` of the registry (:mod:`ios_core.ir.ops`).

The IR's shapes are per sample. The importer imports for one batch size ``B`` and keeps, for every ONNX
tensor, its full shape: the batch is ONNX axis 0 ("own": IR shape = shape[1:]), or axis 0 is the batch
times the IR's first axis ("merged", after a reshape such as Swin's window partition), or a (B, F) vector
kept as the IR's (F, 1, 1). A Transpose that moves the batch off axis 0 (timm's ``qkv.permute(2, 0, 3, 1,
4)``) is held back and resolved through the slices, squeezes and gathers that follow it. Nodes whose
inputs are all constants (weight standardization, shape arithmetic) are folded with onnx's reference
evaluator. Blocks are cut where a single tensor is live (every path crosses it).
"""

from __future__ import annotations

from collections.abc import Container
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
from onnx import numpy_helper

from ..ir import Block, Graph, GraphError, Value
from ..ir.nodes import Activation, Conv, Element, Flatten, Identity, Linear, Node, Op, Placeholder, Pool, Shape
from ..ir.ops import ACTIVATIONS

Expr = list[list[Value]]

#: ONNX ops that become fusable activations (``Conv.act`` or an Activation node)
_ACTS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "HardSwish": "hardswish", "Softplus": "softplus"}
#: ONNX ops that are registry operators one to one (no attributes beyond what the handler reads)
_UNARY = {"Erf": "erf", "Sqrt": "sqrt", "Exp": "exp", "Neg": "neg"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Max": "max", "Min": "min"}
_ALIASES = ("Identity", "Dropout")


class OnnxImportError(GraphError):
    """The ONNX file cannot be read or uses something the IR cannot express."""


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _key(expr: Expr) -> tuple[tuple[Value, ...], ...]:
    """An expression as a dict key (its terms and values, in order)."""
    return tuple(tuple(t) for t in expr)


#: the operators that read a held-back Transpose as it is (through the batch-moving permutation)
_LAZY_READERS = frozenset({"Transpose", "Slice", "Squeeze", "Gather"})


class _Importer:
    def __init__(self, model: onnx.ModelProto, batch: int):
        self.model, self.batch = model, batch
        g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
        self.consts: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.uses: dict[str, int] = {}
        for n in g.node:
            for i in n.input:
                self.uses[i] = self.uses.get(i, 0) + 1
        for o in g.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1
        self.exprs: dict[str, Expr] = {}
        self.full: dict[str, tuple[int, ...]] = {}  # ONNX tensor -> its full ONNX shape (batch included)
        self.lazy: dict[str, tuple[str, tuple[int, ...]]] = {}  # held-back Transpose: (source, perm)
        self.shapes: dict[str, Shape] = {}
        self.nodes: list[Node] = []
        self.producer: dict[str, Node] = {}  # ONNX tensor -> IR node that is exactly it
        self.made: dict[tuple[tuple[Value, ...], ...], Value] = {}  # _key(expression) -> its Identity node's value
        self._count = 0

    # -- helpers -----------------------------------------------------------------
    def error(self, node: onnx.NodeProto, why: str) -> OnnxImportError:
        return OnnxImportError(_at(node, why))

    def new_name(self) -> str:
        self._count += 1
        return str(self._count)

    def define(self, out: str, expr: Expr, full: tuple[int, ...]) -> None:
        self.exprs[out] = expr
        self.full[out] = tuple(int(d) for d in full)

    def add(self, n: onnx.NodeProto, node: Node, out: str, full: tuple[int, ...] | None = None) -> Node:
        """Append ``node`` as ONNX tensor ``out``; ``full`` its ONNX shape (default: batch + its IR shape)."""
        try:
            node.output_shape = node.infer_from(self.shapes)[1]
        except GraphError as exc:
            raise self.error(n, str(exc)) from None
        self.shapes[node.name] = node.output_shape
        self.nodes.append(node)
        self.define(out, [[Value(node.name, 0, node.output_shape[0])]],
                    full if full is not None else (self.batch, *node.output_shape))
        self.producer[out] = node
        return node

    def op(self, n: onnx.NodeProto, name: str, inputs: list[Expr], out: str, params: dict | None = None,
           consts: list[np.ndarray] | None = None, args: tuple[str, ...] = (), full: tuple[int, ...] | None = None,
           merged: bool = False) -> Node:
        """A registry operator; ``merged``: the output keeps the input's merged batch (ONNX axis 0 = B x IR axis 0)."""
        terms = [[self.materialize(e)] for e in inputs]
        node = self.add(n, Op(name=self.new_name(), inputs=terms, op=name, params=params or {}, args=args,
                              consts=[np.array(c, np.float32) for c in consts or []]),  # writable copies
                        out, full)
        if full is None and merged:
            shape = cast(Shape, node.output_shape)
            self.full[out] = (self.batch * shape[0], *shape[1:])
        return node

    def expr(self, node: onnx.NodeProto, name: str) -> Expr:
        if name in self.lazy:
            self.resolve_lazy(node, name)
        if name not in self.exprs:
            raise self.error(node, f"input {name!r} is a constant or unknown tensor where a feature map "
                                   f"is expected")
        expr = self.exprs[name]
        made = self.made.get(_key(expr))  # a sum or concatenation materialized already: its node
        return [[made]] if made is not None else expr

    def materialize(self, expr: Expr) -> Value:
        """One value for an expression: a concatenation or sum of several values becomes an Identity node, made
        once per expression (a pre-norm transformer's residual sum is read by its LayerNorm and by the next sum)."""
        if len(expr) == 1 and len(expr[0]) == 1:
            return expr[0][0]
        key = _key(expr)
        if key in self.made:
            return self.made[key]
        node = Identity(name=self.new_name(), inputs=[list(t) for t in expr])
        node.output_shape = node.infer_from(self.shapes)[1]
        self.shapes[node.name] = node.output_shape
        self.nodes.append(node)
        self.made[key] = Value(node.name, 0, node.output_shape[0])
        return self.made[key]

    def expr_shape(self, expr: Expr) -> Shape:
        return Identity(name="?", inputs=expr).infer_from(self.shapes)[0]

    def ir_shape(self, n: onnx.NodeProto, name: str) -> Shape:
        return self.expr_shape(self.expr(n, name))

    def mode(self, n: onnx.NodeProto, name: str) -> str:
        """How ``name``'s ONNX axes map to the IR's: "own", "merged" or "vector" (see the module doc)."""
        shape, full = self.ir_shape(n, name), self.full[name]
        if shape == full[1:] and full[0] == self.batch:
            return "own"
        if len(full) == 2 and full[0] == self.batch and shape == (full[1], 1, 1):
            return "vector"
        if full[0] == self.batch * shape[0] and shape[1:] == full[1:]:
            return "merged"
        raise self.error(n, f"internal: IR shape {shape} does not match ONNX shape {full} of {name!r}")

    def tensor(self, n: onnx.NodeProto, name: str) -> tuple[Expr, str]:
        """The expression of ``name`` with its ONNX axes mapping to IR axes ("own" or "merged"): a vector
        kept as (F, 1, 1) is reshaped to (F,) here."""
        expr, mode = self.expr(n, name), self.mode(n, name)
        if mode == "vector":
            tmp = f"{name}#vec"
            if tmp not in self.exprs:
                self.op(n, "reshape", [expr], tmp, {"shape": [self.full[name][1]]})
            return self.exprs[tmp], "own"
        return expr, mode

    def axis(self, n: onnx.NodeProto, name: str, a: int, mode: str | None = None) -> int:
        """The IR axis of ONNX axis ``a`` of ``name``."""
        rank = len(self.full[name])
        mode = mode or self.tensor(n, name)[1]
        a = int(a) % rank if -rank <= int(a) < rank else -1
        if a < 0:
            raise self.error(n, f"axis out of range for a rank-{rank} tensor")
        if a == 0 and not (mode == "merged" and self.batch == 1):
            raise self.error(n, "it works along the batch axis, which the IR keeps implicit")
        return a - 1 if mode == "own" else a

    def const(self, node: onnx.NodeProto, idx: int) -> np.ndarray | None:
        if idx >= len(node.input) or not node.input[idx]:
            return None
        name = node.input[idx]
        if name not in self.consts:
            raise self.error(node, f"input {name!r} must be a constant (initializer)")
        return self.consts[name]

    def required(self, node: onnx.NodeProto, idx: int) -> np.ndarray:
        """A constant input the operator cannot do without."""
        value = self.const(node, idx)
        if value is None:
            raise self.error(node, f"input {idx} is missing ({node.op_type} needs it)")
        return value

    def sole_consumer(self, tensor: str) -> bool:
        return self.uses.get(tensor, 0) == 1

    def _alias(self, out: str, src: str) -> None:
        self.exprs[out] = self.exprs[src]
        self.full[out] = self.full[src]
        if src in self.producer:
            self.producer[out] = self.producer[src]

    def per_sample_const(self, n: onnx.NodeProto, c: np.ndarray, rank: int, mode: str) -> np.ndarray:
        """A constant operand of a broadcasting op on tensors of ONNX rank ``rank``, without a batch axis."""
        c = np.asarray(c)
        if c.ndim == rank and mode == "own":
            if c.shape[0] not in (1, self.batch):
                raise self.error(n, f"constant of shape {c.shape} does not broadcast over the batch")
            if c.shape[0] > 1 and not np.all(c == c[:1]):
                raise self.error(n, f"constant of shape {c.shape} differs between samples of the batch")
            c = c[0]
        elif c.ndim == rank and c.shape[0] != 1:
            raise self.error(n, f"constant of shape {c.shape} does not broadcast over a merged batch axis")
        elif c.ndim > rank:
            raise self.error(n, f"constant of shape {c.shape} has more axes than the tensor ({rank})")
        return c.astype(np.float32)

    # -- the walk ------------------------------------------------------------------
    def run(self, name: str) -> Graph:
        g = self.model.graph
        inputs = [i for i in g.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise OnnxImportError(f"expected one graph input, found {len(inputs)}: {[i.name for i in inputs]}")
        dims = inputs[0].type.tensor_type.shape.dim
        if len(dims) != 4 or any(not d.HasField("dim_value") for d in dims[1:]):
            raise OnnxImportError(f"input {inputs[0].name!r} must be NCHW with known C, H, W")
        shape = cast(Shape, tuple(int(d.dim_value) for d in dims[1:]))  # len(dims) == 4 checked above
        placeholder = Placeholder(name="0", output_shape=shape)
        self.shapes["0"] = shape
        self.define(inputs[0].name, [[Value("0", 0, shape[0])]], (self.batch, *shape))
        for n in g.node:
            if n.domain not in ("", "ai.onnx"):
                raise self.error(n, _foreign(n))
            if n.op_type != "Constant" and _folds(n, self.consts):
                self.fold(n)
                continue
            if n.op_type not in _LAZY_READERS:  # a held-back transpose is made real (or refused) first
                for i in n.input:
                    if i in self.lazy:
                        self.resolve_lazy(n, i)
            handler = getattr(self, f"op_{n.op_type}", None)
            if handler is not None:
                handler(n, _attrs(n))
            elif n.op_type in _ACTS:
                self._activation(n, _ACTS[n.op_type])
            elif n.op_type in _UNARY:
                x, mode = self.tensor(n, n.input[0])
                self.op(n, _UNARY[n.op_type], [x], n.output[0], merged=mode == "merged")
            elif n.op_type in _BINARY:
                self._binary(n, _BINARY[n.op_type])
            elif n.op_type in _ALIASES:
                self._pass_through(n)
            else:
                raise self.error(n, _unknown(n))
        if len(g.output) != 1:
            raise OnnxImportError(f"expected one graph output, found {len(g.output)}")
        if not g.node:
            raise OnnxImportError("the model has no operators")
        out = self.expr(g.node[-1], g.output[0].name)
        last = self.materialize(out)
        if not self.nodes:
            raise OnnxImportError("the model computes nothing: its output is its input")
        if last.begin != 0 or last.end != self.shapes[last.node][0] or self.nodes[-1].name != last.node:
            node = Identity(name=self.new_name(), inputs=[[last]])
            self.add(g.node[-1], node, g.output[0].name)
        return Graph(name, placeholder, _blocks(placeholder, self.nodes))

    def fold(self, n: onnx.NodeProto) -> None:
        """Evaluate a node whose inputs are all constants with onnx's reference evaluator."""
        from onnx.reference import ReferenceEvaluator

        names = [i for i in n.input if i]
        feeds = {i: self.consts[i] for i in names}
        graph = onnx.helper.make_graph(
            [n], "fold", [onnx.helper.make_tensor_value_info(i, onnx.helper.np_dtype_to_tensor_dtype(v.dtype),
                                                             v.shape) for i, v in feeds.items()],
            [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in n.output if o])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", self.opset)])
        try:
            outs = ReferenceEvaluator(model).run(None, feeds)
        except Exception as exc:  # noqa: BLE001 - the evaluator's own refusal, said in one line
            raise self.error(n, f"folding a constant subgraph failed ({type(exc).__name__}: {exc})") from None
        for o, v in zip([o for o in n.output if o], outs):
            self.consts[o] = np.asarray(v)

    # -- constants and aliases ---------------------------------------------------------------
    def op_Constant(self, n, a):
        self.consts[n.output[0]] = numpy_helper.to_array(a["value"]) if "value" in a else np.array(
            a.get("value_float", a.get("value_int", a.get("value_floats", a.get("value_ints")))))

    def op_Shape(self, n, a):
        self.expr(n, n.input[0])  # a held-back transpose is made real: its shape is known then
        self.consts[n.output[0]] = np.array(self.full[n.input[0]], np.int64)[a.get("start", 0):a.get("end")]

    def _pass_through(self, n) -> None:
        self.expr(n, n.input[0])
        self._alias(n.output[0], n.input[0])

    def op_Cast(self, n, a):
        if a.get("to") not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                               onnx.TensorProto.BFLOAT16):
            raise self.error(n, f"casting a feature map to type {a.get('to')} is not supported")
        self._pass_through(n)

    # -- convolution, normalization, activations ------------------------------------------------
    def _pads(self, n, a, kernel, dilations=(1, 1)) -> tuple[tuple[int, int], list[int]]:
        """(symmetric padding, the extra [top, left, bottom, right] beyond it) of a conv or pool."""
        auto = _text(a.get("auto_pad", "NOTSET"))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            _, h, w = self.ir_shape(n, n.input[0])
            strides = a.get("strides", [1, 1])
            pads = [0, 0, 0, 0]
            for i, size in enumerate((h, w)):
                span = (kernel[i] - 1) * dilations[i] + 1
                total = max((-(-size // strides[i]) - 1) * strides[i] + span - size, 0)
                small = total // 2
                pads[i], pads[i + 2] = (small, total - small) if auto == "SAME_UPPER" else (total - small, small)
        elif auto not in ("NOTSET", "VALID"):
            raise self.error(n, f"auto_pad {auto} is not supported")
        sym = (min(pads[0], pads[2]), min(pads[1], pads[3]))
        return sym, [pads[0] - sym[0], pads[1] - sym[1], pads[2] - sym[0], pads[3] - sym[1]]

    def _padded(self, n, x: Expr, extra: list[int], value: float = 0.0) -> Expr:
        if not any(extra):
            return x
        tmp = f"{n.output[0]}#pad"
        self.op(n, "pad", [x], tmp, {"pads": [0, extra[0], extra[1], 0, extra[2], extra[3]], "value": value})
        return self.exprs[tmp]

    def op_Conv(self, n, a):
        x, mode = self.tensor(n, n.input[0])
        w = self.required(n, 1)
        b = self.const(n, 2)
        if len(w.shape) != 4 or mode != "own" or len(self.full[n.input[0]]) != 4:
            raise self.error(n, f"only 2-D convolutions of NCHW tensors are supported (weight shape {w.shape})")
        kernel = tuple(a.get("kernel_shape", w.shape[2:]))
        dilations = tuple(a.get("dilations", [1, 1]))
        sym, extra = self._pads(n, a, kernel, dilations)
        conv = Conv(name=self.new_name(), inputs=self._padded(n, x, extra), out_channels=int(w.shape[0]),
                    kernel=kernel, stride=tuple(a.get("strides", [1, 1])), padding=sym, dilation=dilations,
                    groups=int(a.get("group", 1)), act="identity", weight=w.astype(np.float32),
                    bias=(b if b is not None else np.zeros(w.shape[0])).astype(np.float32))
        self.add(n, conv, n.output[0])

    def op_BatchNormalization(self, n, a):
        gamma, beta, mean, var = (self.required(n, i).astype(np.float64) for i in range(1, 5))
        scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
        shift = beta - mean * scale
        conv = self.producer.get(n.input[0])
        if (isinstance(conv, Conv) and conv.act == "identity" and self.sole_consumer(n.input[0])
                and conv.weight is not None and conv.bias is not None):
            conv.weight = (conv.weight * scale[:, None, None, None]).astype(np.float32)
            conv.bias = (conv.bias * scale + shift).astype(np.float32)
            self._alias(n.output[0], n.input[0])
            return
        x, mode = self.tensor(n, n.input[0])
        if mode != "own":
            raise self.error(n, "BatchNormalization of a tensor whose batch axis is merged is not supported")
        self.op(n, "channel_affine", [x], n.output[0], consts=[scale, shift], args=("x0", "k0", "k1"))

    def _activation(self, n, act: str):
        conv = self.producer.get(n.input[0])
        if isinstance(conv, Conv) and conv.act == "identity" and self.sole_consumer(n.input[0]):
            conv.act = act
            self._alias(n.output[0], n.input[0])
            return
        x = self.expr(n, n.input[0])
        self.add(n, Activation(name=self.new_name(), inputs=x, act=act), n.output[0], self.full[n.input[0]])

    def op_Clip(self, n, a):
        lo = self.const(n, 1) if len(n.input) > 1 else a.get("min")
        hi = self.const(n, 2) if len(n.input) > 2 else a.get("max")
        lo_f = -np.inf if lo is None else float(np.asarray(lo))
        hi_f = np.inf if hi is None else float(np.asarray(hi))
        if (lo_f, hi_f) == (0.0, 6.0):
            return self._activation(n, "relu6")
        if (lo_f, hi_f) == (0.0, np.inf):
            return self._activation(n, "relu")
        x, mode = self.tensor(n, n.input[0])
        self.op(n, "clip", [x], n.output[0], {"min": lo_f, "max": hi_f}, merged=mode == "merged")

    def op_HardSigmoid(self, n, a):
        x, mode = self.tensor(n, n.input[0])
        self.op(n, "hardsigmoid", [x], n.output[0], {"alpha": float(a.get("alpha", 0.2)),
                                                       "beta": float(a.get("beta", 0.5))}, merged=mode == "merged")

    def op_LeakyRelu(self, n, a):
        x, mode = self.tensor(n, n.input[0])
        self.op(n, "leaky_relu", [x], n.output[0], {"alpha": float(a.get("alpha", 0.01))}, merged=mode == "merged")

    def op_Gelu(self, n, a):
        if _text(a.get("approximate", "none")) != "none":
            raise self.error(n, "the tanh approximation of Gelu is not supported")
        self._activation(n, "gelu")

    def op_LayerNormalization(self, n, a):
        x, mode = self.tensor(n, n.input[0])
        rank = len(self.full[n.input[0]])
        first = self.axis(n, n.input[0], int(a.get("axis", -1)), mode)
        dims = rank - (first + (1 if mode == "own" else 0))
        consts = [c for c in (self.const(n, 1), self.const(n, 2)) if c is not None]
        self.op(n, "layer_norm", [x], n.output[0], {"dims": dims, "eps": float(a.get("epsilon", 1e-5))},
                consts=consts, args=("x0", *(f"k{i}" for i in range(len(consts)))), merged=mode == "merged")

    def op_Softmax(self, n, a):
        x, mode = self.tensor(n, n.input[0])
        self.op(n, "softmax", [x], n.output[0], {"axis": self.axis(n, n.input[0], a.get("axis", -1), mode)},
                merged=mode == "merged")

    # -- pooling and reductions ----------------------------------------------------------------
    def _pool(self, n, a, kind: str):
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise self.error(n, f"dilations {a['dilations']} are not supported")
        if len(n.output) > 1 and n.output[1]:
            raise self.error(n, "MaxPool indices output is not supported")
        x, mode = self.tensor(n, n.input[0])
        if mode != "own" or len(self.full[n.input[0]]) != 4:
            raise self.error(n, "only 2-D pooling of NCHW tensors is supported")
        kernel = tuple(a["kernel_shape"])
        sym, extra = self._pads(n, a, kernel)
        include = bool(a.get("count_include_pad", 0))
        if any(extra) and kind == "avg" and not include:
            raise self.error(n, f"average pooling with asymmetric padding {a.get('pads')} excluding the pads "
                                f"is not supported")
        x = self._padded(n, x, extra, -np.inf if kind == "max" else 0.0)
        pool = Pool(name=self.new_name(), inputs=x, pool_type=kind, kernel=kernel,
                    stride=tuple(a.get("strides", [1, 1])), padding=sym, ceil_mode=bool(a.get("ceil_mode", 0)),
                    count_include_pad=include)
        self.add(n, pool, n.output[0])

    def op_MaxPool(self, n, a):
        self._pool(n, a, "max")

    def op_AveragePool(self, n, a):
        self._pool(n, a, "avg")

    def op_GlobalAveragePool(self, n, a):
        self.add(n, Pool(name=self.new_name(), inputs=self.expr(n, n.input[0]), pool_type="global_avg"), n.output[0])

    def op_GlobalMaxPool(self, n, a):
        self.add(n, Pool(name=self.new_name(), inputs=self.expr(n, n.input[0]), pool_type="global_max"), n.output[0])

    def _reduce_axes(self, n, a, mode) -> list[int]:
        axes = a.get("axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            axes = self.required(n, 1).tolist()
        if axes is None:
            raise self.error(n, "a reduction over every axis (the batch too) is not supported")
        return sorted(self.axis(n, n.input[0], x, mode) for x in axes)

    def _reduce(self, n, a, op: str):
        x, mode = self.tensor(n, n.input[0])
        axes = self._reduce_axes(n, a, mode)
        keep = bool(a.get("keepdims", 1))
        if op == "reduce_mean" and mode == "own" and axes == [1, 2] and len(self.full[n.input[0]]) == 4:
            c = self.full[n.input[0]][1]
            self.add(n, Pool(name=self.new_name(), inputs=x, pool_type="global_avg"), n.output[0],
                     (self.batch, c, 1, 1) if keep else (self.batch, c))
            return
        self.op(n, op, [x], n.output[0], {"axes": axes, "keepdims": keep}, merged=mode == "merged")

    def op_ReduceMean(self, n, a):
        self._reduce(n, a, "reduce_mean")

    def op_ReduceL2(self, n, a):
        self._reduce(n, a, "reduce_l2")

    # -- elementwise ----------------------------------------------------------------------------
    def _binary(self, n, name: str):
        tensors = [i for i in n.input if i not in self.consts]
        if name == "add" and len(tensors) == 1 and self._bias(n, tensors[0]):
            return
        if name in ("add", "mul") and len(tensors) == 2:
            shapes = [self.ir_shape(n, t) for t in tensors]
            if shapes[0] == shapes[1] and self.full[tensors[0]] == self.full[tensors[1]]:
                if name == "add":
                    return self._sum(n, tensors)
                vals = [self.materialize(self.expr(n, i)) for i in tensors]
                self.add(n, Element(name=self.new_name(), inputs=[vals], op="mul"), n.output[0], self.full[tensors[0]])
                return
        views = {t: self.tensor(n, t) for t in tensors}
        modes = {m for _, m in views.values()}
        ranks = {len(self.full[t]) for t in tensors}
        if len(modes) > 1 or len(ranks) > 1:
            raise self.error(n, f"broadcasting {' and '.join(str(self.full[t]) for t in tensors)} across the batch "
                                f"axis is not supported")
        mode, rank = modes.pop(), ranks.pop()
        inputs, consts, args = self._operands(n, {t: x for t, (x, _) in views.items()}, rank, mode)
        self.op(n, name, inputs, n.output[0], consts=consts, args=args, merged=mode == "merged")

    def _operands(self, n, exprs: dict[str, Expr], rank: int, mode: str, const_rank: int | None = None
                  ) -> tuple[list[Expr], list[np.ndarray], tuple[str, ...]]:
        """The ONNX node's inputs, in order, as an Op's tensor operands (``exprs``) and per-sample constants, with
        the ``args`` that order them; ``const_rank``: the rank every constant must have."""
        inputs: list[Expr] = []
        consts: list[np.ndarray] = []
        args: list[str] = []
        for i in n.input:
            if i in self.consts:
                c = self.per_sample_const(n, self.consts[i], rank, mode)
                if const_rank is not None and c.ndim != const_rank:
                    raise self.error(n, f"a constant of shape {self.consts[i].shape} in a concatenation")
                args.append(f"k{len(consts)}")
                consts.append(c)
            else:
                args.append(f"x{len(inputs)}")
                inputs.append(exprs[i])
        return inputs, consts, tuple(args)

    def _sum(self, n, names: list[str]):
        exprs = [self.expr(n, i) for i in names]
        if all(len(e) == 1 for e in exprs):
            expr = [[v for e in exprs for v in e[0]]]
        else:
            expr = [[self.materialize(e) for e in exprs]]
        self.define(n.output[0], expr, self.full[names[0]])

    def op_Sum(self, n, a):
        self._sum(n, list(n.input))

    def _bias(self, n, other: str) -> bool:
        """A constant added to a Linear's or dense op's output folds into its bias."""
        const = next(i for i in n.input if i != other)
        lin = self.producer.get(other)
        if not self.sole_consumer(other) or not isinstance(lin, (Linear, Op)):
            return False
        bias = np.asarray(self.consts[const], np.float32)
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
        self._alias(n.output[0], other)
        return True

    # -- matrix products --------------------------------------------------------------------------
    def _linear(self, n, src: str, w: np.ndarray, b: np.ndarray | None):
        self.expr(n, src)
        if len(self.full[src]) != 2 or self.mode(n, src) not in ("own", "vector"):
            raise self.error(n, "Gemm must follow a Flatten or a global pool")
        x = self.expr(n, src)  # a vector kept as (F, 1, 1) as it is: Linear flattens its input
        lin = Linear(name=self.new_name(), inputs=x, out_features=int(w.shape[0]), weight=w.astype(np.float32),
                     bias=(b if b is not None else np.zeros(w.shape[0])).astype(np.float32))
        self.add(n, lin, n.output[0], (self.batch, int(w.shape[0])))

    def op_Gemm(self, n, a):
        if a.get("transA", 0):
            raise self.error(n, "transA=1 is not supported")
        w = self.required(n, 1)
        w = w if a.get("transB", 0) else w.T
        b = self.const(n, 2)
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        self._linear(n, n.input[0], alpha * w, None if b is None else beta * np.broadcast_to(b, (w.shape[0],)))

    def op_MatMul(self, n, a):
        self._matmul(n, n.input[0], n.input[1])

    def op_Einsum(self, n, a):
        """A batched matrix product written as an einsum (MaxViT's attention: ``bghid,bghjd->bghij`` and
        ``bghij,bghjd->bghid``): a matmul, after swapping the right operand's last two axes where it is the
        ``...jk`` form. Other equations are refused in one line."""
        eq = _text(a.get("equation", "")).replace(" ", "")
        lhs, _, out = eq.partition("->")
        terms = lhs.split(",")
        if len(n.input) != 2 or len(terms) != 2 or len(out) < 3 or "." in eq or \
                len({len(terms[0]), len(terms[1]), len(out)}) != 1 or not terms[0][:-2] == terms[1][:-2] == out[:-2] \
                or terms[0][-2] != out[-2] or sorted(terms[1][-2:]) != sorted(terms[0][-1] + out[-1]):
            raise self.error(n, f"Einsum {eq!r} is not supported: only batched matrix products "
                                f"(...ik,...kj->...ij and ...ik,...jk->...ij)")
        right = n.input[1]
        if terms[1][-2:] == out[-1] + terms[0][-1]:  # ...jk: the right operand transposed
            x, mode = self.tensor(n, right)
            rank, swapped = len(self.full[right]), f"{n.output[0]}#right"
            self._transpose(n, right, x, mode, (*range(rank - 2), rank - 1, rank - 2), swapped)
            right = swapped
        self._matmul(n, n.input[0], right)

    def _matmul(self, n, left: str, right: str) -> None:
        if right in self.consts and self.consts[right].ndim == 2:
            w = self.consts[right].T
            if len(self.full[left]) == 2 and self.mode(n, left) in ("own", "vector"):
                return self._linear(n, left, w, None)
            x, mode = self.tensor(n, left)
            self.op(n, "dense", [x], n.output[0], consts=[w], args=("x0", "k0"), merged=mode == "merged")
            return
        if left in self.consts or right in self.consts:
            t = right if left in self.consts else left
            x, mode = self.tensor(n, t)
            inputs, consts, args = self._operands(n, {t: x}, len(self.full[t]), mode)
            self.op(n, "matmul", inputs, n.output[0], consts=consts, args=args, merged=mode == "merged")
            return
        (xa, ma), (xb, mb) = self.tensor(n, left), self.tensor(n, right)
        if ma != mb or len(self.full[left]) != len(self.full[right]) or len(self.full[left]) < 3:
            raise self.error(n, f"a matrix product of {self.full[left]} and {self.full[right]} across the batch "
                                f"axis is not supported")
        self.op(n, "matmul", [xa, xb], n.output[0], merged=ma == "merged")

    # -- layout ------------------------------------------------------------------------------------
    def reshape_to(self, n, src: str, target: tuple[int, ...], out: str) -> None:
        """``src`` as the ONNX shape ``target`` (row-major): an alias where the IR shape stays, else a reshape."""
        full = self.full[src]
        if int(np.prod(target)) != int(np.prod(full)):
            raise self.error(n, f"cannot reshape {full} to {target}")
        b = self.batch
        x = self.expr(n, src)
        shape = self.expr_shape(x)
        if target[0] == b:
            want = tuple(target[1:])
            if not want:
                raise self.error(n, f"a reshape to {target} leaves one number per sample; not supported")
            if len(want) == 1 and shape[1:] == (1, 1) and shape[0] == want[0]:
                self.define(out, x, target)  # a vector kept as (F, 1, 1)
                return
            if len(want) == 1 and len(shape) == 3 and self.mode(n, src) == "own":
                self.add(n, Flatten(name=self.new_name(), inputs=x), out, target)
                return
        elif target[0] % b == 0:
            want = (target[0] // b, *target[1:])
        else:
            raise self.error(n, f"a reshape of {full} to {target} mixes samples of the batch")
        if want == shape:
            self.define(out, x, target)
            return
        self.op(n, "reshape", [x], out, {"shape": list(want)}, full=target)

    def _target(self, n, src: str, shape: list[int], allowzero: bool) -> tuple[int, ...]:
        full = self.full[src]
        out = [full[i] if (d == 0 and not allowzero) else int(d) for i, d in enumerate(shape)]
        if -1 in out:
            known = int(np.prod([d for d in out if d != -1]))
            out[out.index(-1)] = int(np.prod(full)) // max(known, 1)
        return tuple(out)

    def op_Reshape(self, n, a):
        src = n.input[0]
        self.reshape_to(n, src, self._target(n, src, self.required(n, 1).tolist(), bool(a.get("allowzero", 0))),
                        n.output[0])

    def op_Flatten(self, n, a):
        src = n.input[0]
        self.expr(n, src)
        full = self.full[src]
        ax = int(a.get("axis", 1)) % len(full)
        self.reshape_to(n, src, (int(np.prod(full[:ax])), int(np.prod(full[ax:]))), n.output[0])

    def _axes_arg(self, n, a) -> list[int]:
        axes = a.get("axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            axes = self.required(n, 1).tolist()
        return [int(x) for x in axes] if axes is not None else []

    def op_Squeeze(self, n, a):
        src = n.input[0]
        axes = self._axes_arg(n, a)
        if src in self.lazy:
            return self._lazy_squeeze(n, src, axes, n.output[0])
        self.expr(n, src)
        full = self.full[src]
        axes = [x % len(full) for x in axes] if axes else [i for i, d in enumerate(full) if d == 1]
        if any(full[x] != 1 for x in axes):
            raise self.error(n, f"Squeeze of axes {axes} of a {full} tensor")
        self.reshape_to(n, src, tuple(d for i, d in enumerate(full) if i not in axes), n.output[0])

    def op_Unsqueeze(self, n, a):
        src = n.input[0]
        self.expr(n, src)
        full = list(self.full[src])
        rank = len(full) + len(self._axes_arg(n, a))
        for x in sorted(x % rank for x in self._axes_arg(n, a)):
            full.insert(x, 1)
        self.reshape_to(n, src, tuple(full), n.output[0])

    def op_Expand(self, n, a):
        """A broadcast of a feature map to a shape of the same rank (``F.normalize``'s norm before its division in
        Swin V2); growing the rank or the batch axis is refused."""
        src = n.input[0]
        x, mode = self.tensor(n, src)
        full = self.full[src]
        shape = tuple(int(d) for d in self.required(n, 1).tolist())
        try:
            target = tuple(int(d) for d in np.broadcast_shapes(full, shape))
        except ValueError:
            raise self.error(n, f"cannot expand {full} to {shape}") from None
        if len(target) != len(full) or target[0] != full[0]:
            raise self.error(n, f"an Expand of {full} to {shape} adds axes or grows the batch axis; not supported")
        if target == full:
            self.define(n.output[0], x, full)
            return
        per_sample = (target[0] // self.batch, *target[1:]) if mode == "merged" else target[1:]
        self.op(n, "expand", [x], n.output[0], {"shape": list(per_sample)}, full=target)

    def op_Transpose(self, n, a):
        src = n.input[0]
        perm = tuple(int(p) for p in a.get("perm", reversed(range(len(self.full.get(src, ()))))))
        if src in self.lazy:  # a transpose of a held-back transpose: compose them
            base, first = self.lazy[src]
            self.lazy[n.output[0]] = (base, tuple(first[p] for p in perm))
            return
        x, mode = self.tensor(n, src)
        if perm == tuple(range(len(perm))):
            return self._alias(n.output[0], src)
        if perm[0] != 0:
            self.lazy[n.output[0]] = (src, perm)
            return
        self._transpose(n, src, x, mode, perm, n.output[0])

    def _transpose(self, n, src: str, x: Expr, mode: str, perm: tuple[int, ...], out: str) -> None:
        """``src`` (its expression ``x`` and axis mode) transposed by ``perm``, which keeps the batch axis on
        axis 0, as a transpose operator."""
        ir_perm = [p - 1 for p in perm[1:]] if mode == "own" else list(perm)
        full = tuple(self.full[src][p] for p in perm)
        self.op(n, "transpose", [x], out, {"perm": ir_perm}, full=full)

    def resolve_lazy(self, n, name: str) -> None:
        """A held-back Transpose used other than through slices of its leading axes: made real, which it can
        be only once the batch is back on axis 0."""
        base, perm = self.lazy.pop(name)
        if perm[0] != 0:
            raise self.error(n, f"it reads {name!r}, a Transpose {list(perm)} that moves the batch axis off axis 0; "
                                f"only slices, squeezes and gathers of the leading axes are supported after one")
        x, mode = self.tensor(n, base)
        full = tuple(self.full[base][p] for p in perm)
        if perm == tuple(range(len(perm))):
            self.define(name, x, full)
            return
        self.op(n, "transpose", [x], name, {"perm": [p - 1 for p in perm[1:]] if mode == "own" else list(perm)},
                full=full)

    def _slice_src(self, n, src: str, axes: list[int], starts: list[int], ends: list[int], steps: list[int],
                   out: str) -> None:
        """``src`` sliced on ONNX axes: a channel slice of the value where it can be, else a slice op."""
        x, mode = self.tensor(n, src)
        full = list(self.full[src])
        ir_axes, norm = [], []
        for ax, b, e, st in zip(axes, starts, ends, steps):
            ax %= len(full)
            b, e, st = slice(b, e, st).indices(full[ax])
            if st > 0 and e < b:
                e = b
            size = len(range(b, e, st))
            if (b, size, st) == (0, full[ax], 1):
                continue
            full[ax] = size
            ir_axes.append(self.axis(n, src, ax, mode))
            norm.append((b, e, st))
        if not ir_axes:
            return self.define(out, x, tuple(full))
        if ir_axes == [0] and norm[0][2] == 1 and len(x) == 1 and len(x[0]) == 1:
            v = x[0][0]
            self.define(out, [[Value(v.node, v.begin + norm[0][0], v.begin + norm[0][1])]], tuple(full))
            return
        self.op(n, "slice", [x], out, {"axes": ir_axes, "starts": [s[0] for s in norm],
                                       "ends": [s[1] if s[1] >= 0 else -(2 ** 62) for s in norm],
                                       "steps": [s[2] for s in norm]}, full=tuple(full))

    def op_Slice(self, n, a):
        src = n.input[0]
        starts, ends = self.required(n, 1).tolist(), self.required(n, 2).tolist()
        given_axes, given_steps = self.const(n, 3), self.const(n, 4)
        axes = given_axes.tolist() if given_axes is not None else list(range(len(starts)))
        steps = given_steps.tolist() if given_steps is not None else [1] * len(starts)
        if src in self.lazy:
            base, perm = self.lazy[src]
            tmp = f"{n.output[0]}#base"
            rank = len(perm)
            self._slice_src(n, base, [perm[x % rank] for x in axes], starts, ends, steps, tmp)
            self.lazy[n.output[0]] = (tmp, perm)
            return
        self.expr(n, src)
        self._slice_src(n, src, axes, starts, ends, steps, n.output[0])

    def _gather_per_sample(self, n, src: str, x: Expr, index: np.ndarray) -> None:
        """A gather on a merged batch axis whose indices pick, for each sample, from that sample's own rows
        (torch's ``as_strided`` after a full flatten exports this way): the same per-sample gather for each."""
        k = self.expr_shape(x)[0]
        per = index[0] % (self.batch * k)
        for b in range(self.batch):
            if not np.array_equal(index[b] % (self.batch * k) - b * k, per):
                raise self.error(n, "a gather along a merged batch axis that mixes samples")
        if per.min() < 0 or per.max() >= k:
            raise self.error(n, "a gather along a merged batch axis that mixes samples")
        rest = self.full[src][1:]
        self.op(n, "gather", [x], n.output[0], {"axis": 0, "index": per.tolist()},
                full=(self.batch, *per.shape, *rest))

    def _lazy_squeeze(self, n, src: str, axes: list[int], out: str) -> None:
        base, perm = self.lazy[src]
        rank = len(perm)
        gone = sorted(perm[x % rank] for x in axes)
        full = self.full[base]
        if any(full[g] != 1 for g in gone):
            raise self.error(n, f"Squeeze of axes {axes} that are not of size 1")
        tmp = f"{out}#base"
        self.reshape_to(n, base, tuple(d for i, d in enumerate(full) if i not in gone), tmp)
        self.lazy[out] = (tmp, tuple(p - sum(g < p for g in gone) for p in perm if p not in gone))

    def op_Gather(self, n, a):
        src, index = n.input[0], self.required(n, 1)
        ax = int(a.get("axis", 0))
        if src in self.lazy:  # one index of a leading axis: a slice of the source and a squeeze
            if index.ndim != 0:
                raise self.error(n, "a gather of several indices after a Transpose that moves the batch axis")
            base, perm = self.lazy[src]
            bax = perm[ax % len(perm)]
            i = int(index) % self.full[base][bax]
            tmp = f"{n.output[0]}#slice"
            self._slice_src(n, base, [bax], [i], [i + 1], [1], tmp)
            self.lazy[f"{tmp}#view"] = (tmp, perm)
            return self._lazy_squeeze(n, f"{tmp}#view", [ax], n.output[0])
        x, mode = self.tensor(n, src)
        if mode == "merged" and ax % len(self.full[src]) == 0 and index.ndim >= 1 and index.shape[0] == self.batch:
            return self._gather_per_sample(n, src, x, index)
        ir_ax = self.axis(n, src, ax, mode)
        idx = index.tolist()
        full = list(self.full[src])
        dim = full[ax % len(full)]
        idx = (idx % dim) if isinstance(idx, int) else (np.asarray(idx) % dim).tolist()
        out_full = tuple(full[:ax % len(full)] + list(np.asarray(idx).shape) + full[ax % len(full) + 1:])
        self.op(n, "gather", [x], n.output[0], {"axis": ir_ax, "index": idx}, full=out_full)

    def op_Split(self, n, a):
        src = n.input[0]
        self.expr(n, src)
        ax = int(a.get("axis", 0)) % len(self.full[src])
        sizes = self.const(n, 1) if len(n.input) > 1 and n.input[1] else a.get("split")
        dim = self.full[src][ax]
        if sizes is None:
            parts = int(a.get("num_outputs", len(n.output)))
            step = -(-dim // parts)
            sizes = [min(step, dim - i * step) for i in range(parts)]
        start = 0
        for out, size in zip(n.output, [int(s) for s in np.asarray(sizes).reshape(-1)]):
            if out:
                self._slice_src(n, src, [ax], [start], [start + size], [1], out)
            start += size

    def op_Concat(self, n, a):
        tensors = [i for i in n.input if i not in self.consts]
        if not tensors:
            raise self.error(n, "internal: a constant concat was not folded")
        views = {t: self.tensor(n, t) for t in tensors}
        modes = {m for _, m in views.values()}
        if len(modes) > 1:
            raise self.error(n, "concatenation of tensors whose batch axes differ")
        mode = modes.pop()
        ref = tensors[0]
        rank = len(self.full[ref])
        ax = int(a.get("axis", 1)) % rank
        ir_ax = self.axis(n, ref, ax, mode)
        full = list(self.full[ref])
        full[ax] = sum(self.full[i][ax] if i in self.full else int(self.consts[i].shape[ax]) for i in n.input)
        if ir_ax == 0 and len(tensors) == len(n.input):
            self.define(n.output[0], [t for i in n.input for t in views[i][0]], tuple(full))
            return
        inputs, consts, args = self._operands(n, {t: x for t, (x, _) in views.items()}, rank, mode,
                                              const_rank=len(self.expr_shape(views[ref][0])))
        self.op(n, "concat", inputs, n.output[0], {"axis": ir_ax}, consts=consts, args=args, full=tuple(full))

    def op_Pad(self, n, a):
        mode_attr = _text(a.get("mode", "constant"))
        if mode_attr != "constant":
            raise self.error(n, f"Pad mode {mode_attr!r} is not supported")
        x, mode = self.tensor(n, n.input[0])
        pads = [int(p) for p in self.required(n, 1).tolist()]
        value = self.const(n, 2)
        axes = self.const(n, 3)
        full = list(self.full[n.input[0]])
        rank = len(full)
        axes_l = [int(v) % rank for v in axes.tolist()] if axes is not None else list(range(rank))
        k = len(axes_l)
        begin, end = [0] * rank, [0] * rank
        for j, ax in enumerate(axes_l):
            begin[ax], end[ax] = pads[j], pads[j + k]
        if mode == "own":
            if begin[0] or end[0]:
                raise self.error(n, "padding the batch axis is not supported")
            ir_pads = begin[1:] + end[1:]
        else:
            if begin[0] or end[0]:
                raise self.error(n, "padding a merged batch axis is not supported")
            ir_pads = begin + end
        if not any(ir_pads):
            return self._alias(n.output[0], n.input[0])
        out_full = tuple(d + begin[i] + end[i] for i, d in enumerate(full))
        self.op(n, "pad", [x], n.output[0], {"pads": ir_pads, "value": float(value) if value is not None else 0.0},
                full=out_full)

    def op_Resize(self, n, a):
        x, mode = self.tensor(n, n.input[0])
        full = self.full[n.input[0]]
        if mode != "own" or len(full) != 4:
            raise self.error(n, "only resizing NCHW feature maps is supported")
        if _text(a.get("mode", "nearest")) != "nearest":
            raise self.error(n, f"Resize mode {_text(a.get('mode'))!r} is not supported (nearest only)")
        given = self.const(n, 3)
        if given is None:
            given = np.floor(np.asarray(full) * self.required(n, 2)).astype(np.int64)
        sizes = [int(s) for s in given]
        if sizes[:2] != list(full[:2]):
            raise self.error(n, "Resize may change only the spatial size")
        self.op(n, "resize_nearest", [x], n.output[0], {"size": sizes[2:]})


def supported_ops() -> list[str]:
    """The ONNX operator types the importer takes."""
    own = [name[3:] for name in dir(_Importer) if name.startswith("op_")]
    return sorted({*own, *_ACTS, *_UNARY, *_BINARY, *_ALIASES})


SUPPORTED_OPS = tuple(supported_ops())


def _at(node: onnx.NodeProto, why: str) -> str:
    """An import error's text: the node, then why."""
    return f"ONNX node {node.name or '(unnamed)'!r} ({node.op_type}): {why}"


def _foreign(node: onnx.NodeProto) -> str:
    return f"operator {node.domain}.{node.op_type} is not supported (not a standard ONNX op)"


def _unknown(node: onnx.NodeProto) -> str:
    return f"operator {node.op_type!r} is not supported; supported: {', '.join(SUPPORTED_OPS)}"


def _folds(node: onnx.NodeProto, consts: Container[str]) -> bool:
    """Whether the import folds the node (every input a constant), whatever its type."""
    return bool(node.input) and all(not i or i in consts for i in node.input)


def first_unsupported(model: onnx.ModelProto) -> str | None:
    """Without importing (no weights read): the error the import would raise for the first operator it cannot
    take at all (a custom domain, an unknown type), or None; the nodes it folds are passed over as it passes
    them."""
    g = model.graph
    consts = {t.name for t in g.initializer}
    known = set(SUPPORTED_OPS)
    for n in g.node:
        if n.domain not in ("", "ai.onnx"):
            return _at(n, _foreign(n))
        if n.op_type == "Constant" or _folds(n, consts):
            consts.update(n.output)
        elif n.op_type not in known:
            return _at(n, _unknown(n))
    return None


def _blocks(placeholder: Placeholder, nodes: list[Node]) -> list[Block]:
    """Cut the node list where exactly one produced tensor is still needed later."""
    remaining: dict[str, int] = {}
    for node in nodes:
        for v in {v.node for t in node.inputs for v in t}:
            remaining[v] = remaining.get(v, 0) + 1
    live: set[str] = {placeholder.name}
    blocks: list[Block] = []
    current = Block(placeholder.name)
    for node in nodes:
        for v in {v.node for t in node.inputs for v in t}:
            remaining[v] -= 1
            if remaining[v] == 0:
                live.discard(v)
        current.nodes.append(node)
        if remaining.get(node.name, 0) > 0:
            live.add(node.name)
        if live == {node.name} or node is nodes[-1]:
            blocks.append(current)
            current = Block(node.name)
    return blocks


def import_onnx(source: str | Path | onnx.ModelProto, name: str | None = None, batch: int | None = None) -> Graph:
    """Read an ONNX vision model into a Graph (weights included) for ``batch`` (default: the file's fixed batch
    size, else 1); errors name the ONNX node."""
    if isinstance(source, onnx.ModelProto):
        model, default = source, source.graph.name or "onnx"
    else:
        path = Path(source)
        if not path.exists():
            raise OnnxImportError(f"{path}: no such file")
        try:
            model = onnx.load(str(path))
            onnx.checker.check_model(model)
        except Exception as exc:  # onnx raises DecodeError, ValidationError, ...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OnnxImportError(f"{path}: not a valid ONNX model ({first})") from None
        default = path.stem
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    fixed = None
    if inputs and inputs[0].type.tensor_type.shape.dim:
        d0 = inputs[0].type.tensor_type.shape.dim[0]
        fixed = int(d0.dim_value) if d0.HasField("dim_value") and d0.dim_value > 0 else None
    if batch is not None and fixed is not None and batch != fixed:
        raise OnnxImportError(f"the model's batch size is fixed at {fixed}; it cannot be imported for batch {batch}")
    return _Importer(model, batch or fixed or 1).run(name or default)


assert set(_ACTS.values()) <= set(ACTIVATIONS)
