"""Import ONNX CNNs into the IR.

Each ONNX tensor maps to an *expression*: a list of terms (concatenated) of values
(summed), so Concat and Add cost no node and consumers read them directly, the way
IOS writes graphs. BatchNormalization folds into the conv before it, activations
fuse into a conv whose only consumer they are, Dropout/Identity vanish. Blocks are
cut where a single tensor is live (every path crosses it).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import onnx
from onnx import numpy_helper

from ..ir import Block, Graph, GraphError, Value
from ..ir.graph import term_shape
from ..ir.nodes import Activation, Conv, Element, Flatten, Identity, Linear, Node, Placeholder, Pool, Shape

Expr = list[list[Value]]

SUPPORTED_OPS = ("Conv", "BatchNormalization", "Relu", "Sigmoid", "Tanh", "MaxPool", "AveragePool",
                 "GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "Concat", "Add", "Sum", "Mul", "Flatten",
                 "Reshape", "Squeeze", "Unsqueeze", "Gemm", "MatMul", "Identity", "Dropout", "Constant")
_ACTS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


class OnnxImportError(GraphError):
    """The ONNX file cannot be read or uses something the IR cannot express."""


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class _Importer:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        g = model.graph
        self.consts: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.uses: dict[str, int] = {}
        for n in g.node:
            for i in n.input:
                self.uses[i] = self.uses.get(i, 0) + 1
        for o in g.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1
        self.exprs: dict[str, Expr] = {}
        self.shapes: dict[str, Shape] = {}
        self.nodes: list[Node] = []
        self.producer: dict[str, Node] = {}  # ONNX tensor -> IR node that is exactly it
        self.rank: dict[str, int] = {}
        self._count = 0

    # -- helpers -----------------------------------------------------------------
    def error(self, node: onnx.NodeProto, why: str) -> OnnxImportError:
        return OnnxImportError(f"ONNX node {node.name or '(unnamed)'!r} ({node.op_type}): {why}")

    def new_name(self) -> str:
        self._count += 1
        return str(self._count)

    def add(self, node: Node, out: str, rank: int = 4) -> None:
        node.output_shape = node.infer(term_shape(node, self.shapes))
        self.shapes[node.name] = node.output_shape
        self.nodes.append(node)
        self.exprs[out] = [[Value(node.name, 0, node.output_shape[0])]]
        self.producer[out] = node
        self.rank[out] = rank

    def expr(self, node: onnx.NodeProto, name: str) -> Expr:
        if name not in self.exprs:
            raise self.error(node, f"input {name!r} is a constant or unknown tensor where a feature map "
                                   f"is expected")
        return self.exprs[name]

    def materialize(self, expr: Expr) -> Value:
        if len(expr) == 1 and len(expr[0]) == 1:
            return expr[0][0]
        node = Identity(name=self.new_name(), inputs=[list(t) for t in expr])
        node.output_shape = node.infer(term_shape(node, self.shapes))
        self.shapes[node.name] = node.output_shape
        self.nodes.append(node)
        return Value(node.name, 0, node.output_shape[0])

    def expr_shape(self, expr: Expr) -> Shape:
        probe = Identity(name="?", inputs=expr)
        return term_shape(probe, self.shapes)

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

    @staticmethod
    def _sym_pads(pads, n: onnx.NodeProto, imp: _Importer) -> tuple[int, int]:
        pads = list(pads or [0, 0, 0, 0])
        if pads[0] != pads[2] or pads[1] != pads[3]:
            raise imp.error(n, f"asymmetric padding {pads} is not supported")
        return (int(pads[0]), int(pads[1]))

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
        self.exprs[inputs[0].name] = [[Value("0", 0, shape[0])]]
        self.rank[inputs[0].name] = 4
        for n in g.node:
            handler = getattr(self, f"op_{n.op_type}", None)
            if handler is None or n.domain not in ("", "ai.onnx"):
                raise self.error(n, f"operator {n.op_type!r} is not supported; supported: "
                                    f"{', '.join(SUPPORTED_OPS)}")
            handler(n, _attrs(n))
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
            self.add(node, g.output[0].name)
        if not self.nodes:
            raise OnnxImportError("the model has no operators")
        return Graph(name, placeholder, _blocks(placeholder, self.nodes))

    # -- operators -------------------------------------------------------------------
    def op_Constant(self, n, a):
        self.consts[n.output[0]] = numpy_helper.to_array(a["value"]) if "value" in a else np.array(
            a.get("value_float", a.get("value_int", a.get("value_floats", a.get("value_ints")))))

    def op_Conv(self, n, a):
        x = self.expr(n, n.input[0])
        w = self.required(n, 1)
        b = self.const(n, 2)
        if len(w.shape) != 4:
            raise self.error(n, f"only 2-D convolutions are supported (weight shape {w.shape})")
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise self.error(n, f"dilations {a['dilations']} are not supported")
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
            raise self.error(n, f"auto_pad {a['auto_pad']} is not supported; export with explicit pads")
        conv = Conv(name=self.new_name(), inputs=x, out_channels=int(w.shape[0]),
                    kernel=tuple(a.get("kernel_shape", w.shape[2:])), stride=tuple(a.get("strides", [1, 1])),
                    padding=self._sym_pads(a.get("pads"), n, self), groups=int(a.get("group", 1)), act="identity",
                    weight=w.astype(np.float32),
                    bias=(b if b is not None else np.zeros(w.shape[0])).astype(np.float32))
        self.add(conv, n.output[0])

    def op_BatchNormalization(self, n, a):
        conv = self.producer.get(n.input[0])
        if not isinstance(conv, Conv) or conv.act != "identity" or not self.sole_consumer(n.input[0]):
            raise self.error(n, "BatchNormalization is supported only right after a Conv it can fold into")
        if conv.weight is None or conv.bias is None:  # a Conv built without its initializers
            raise self.error(n, "BatchNormalization follows a Conv whose weight or bias is not a constant")
        gamma, beta, mean, var = (self.required(n, i).astype(np.float64) for i in range(1, 5))
        scale = gamma / np.sqrt(var + float(a.get("epsilon", 1e-5)))
        conv.weight = (conv.weight * scale[:, None, None, None]).astype(np.float32)
        conv.bias = ((conv.bias - mean) * scale + beta).astype(np.float32)
        self._alias(n.output[0], n.input[0])

    def _alias(self, out: str, src: str) -> None:
        self.exprs[out] = self.exprs[src]
        self.rank[out] = self.rank.get(src, 4)
        if src in self.producer:
            self.producer[out] = self.producer[src]

    def _activation(self, n, act: str):
        conv = self.producer.get(n.input[0])
        if isinstance(conv, Conv) and conv.act == "identity" and self.sole_consumer(n.input[0]):
            conv.act = act
            self._alias(n.output[0], n.input[0])
            return
        self.add(Activation(name=self.new_name(), inputs=self.expr(n, n.input[0]), act=act), n.output[0],
                 self.rank.get(n.input[0], 4))

    def op_Relu(self, n, a):
        self._activation(n, "relu")

    def op_Sigmoid(self, n, a):
        self._activation(n, "sigmoid")

    def op_Tanh(self, n, a):
        self._activation(n, "tanh")

    def _pool(self, n, a, kind: str):
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            raise self.error(n, f"dilations {a['dilations']} are not supported")
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise self.error(n, f"auto_pad {a['auto_pad']} is not supported; export with explicit pads")
        if len(n.output) > 1 and n.output[1]:
            raise self.error(n, "MaxPool indices output is not supported")
        pool = Pool(name=self.new_name(), inputs=self.expr(n, n.input[0]), pool_type=kind,
                    kernel=tuple(a["kernel_shape"]), stride=tuple(a.get("strides", [1, 1])),
                    padding=self._sym_pads(a.get("pads"), n, self), ceil_mode=bool(a.get("ceil_mode", 0)),
                    count_include_pad=bool(a.get("count_include_pad", 0)))
        self.add(pool, n.output[0])

    def op_MaxPool(self, n, a):
        self._pool(n, a, "max")

    def op_AveragePool(self, n, a):
        self._pool(n, a, "avg")

    def op_GlobalAveragePool(self, n, a):
        self.add(Pool(name=self.new_name(), inputs=self.expr(n, n.input[0]), pool_type="global_avg"), n.output[0])

    def op_GlobalMaxPool(self, n, a):
        self.add(Pool(name=self.new_name(), inputs=self.expr(n, n.input[0]), pool_type="global_max"), n.output[0])

    def op_ReduceMean(self, n, a):
        axes = a.get("axes")
        if axes is None and len(n.input) > 1:
            axes = self.required(n, 1).tolist()
        if sorted(int(x) % 4 for x in (axes or [])) != [2, 3]:
            raise self.error(n, f"ReduceMean is supported over the spatial axes [2, 3] only (axes {axes})")
        self.add(Pool(name=self.new_name(), inputs=self.expr(n, n.input[0]), pool_type="global_avg"),
                 n.output[0], rank=4 if a.get("keepdims", 1) else 2)

    def op_Concat(self, n, a):
        if int(a.get("axis", 1)) % 4 != 1:
            raise self.error(n, f"Concat is supported on the channel axis only (axis {a.get('axis')})")
        self.exprs[n.output[0]] = [t for i in n.input for t in self.expr(n, i)]
        self.rank[n.output[0]] = 4

    def _sum(self, n, names: list[str]):
        exprs = [self.expr(n, i) for i in names]
        shapes = [self.expr_shape(e) for e in exprs]
        if any(s != shapes[0] for s in shapes):
            raise self.error(n, f"broadcasting add of shapes {shapes} is not supported")
        if all(len(e) == 1 for e in exprs):
            self.exprs[n.output[0]] = [[v for e in exprs for v in e[0]]]
        else:
            self.exprs[n.output[0]] = [[self.materialize(e) for e in exprs]]
        self.rank[n.output[0]] = self.rank.get(names[0], 4)

    def op_Add(self, n, a):
        const = [i for i in n.input if i in self.consts]
        if const:
            return self._add_bias(n, const[0])
        self._sum(n, list(n.input))

    def op_Sum(self, n, a):
        self._sum(n, list(n.input))

    def _add_bias(self, n, const: str):
        other = next(i for i in n.input if i != const)
        lin = self.producer.get(other)
        bias = self.consts[const].reshape(-1)
        if not isinstance(lin, Linear) or not self.sole_consumer(other) or bias.size != lin.out_features:
            raise self.error(n, "adding a constant is supported only as the bias of a MatMul")
        lin.bias = (lin.bias + bias).astype(np.float32)
        self._alias(n.output[0], other)

    def op_Mul(self, n, a):
        if any(i in self.consts for i in n.input):
            raise self.error(n, "multiplying by a constant is not supported")
        vals = [self.materialize(self.expr(n, i)) for i in n.input]
        self.add(Element(name=self.new_name(), inputs=[vals], op="mul"), n.output[0])

    def _flatten(self, n):
        src = n.input[0]
        shape = self.expr_shape(self.expr(n, src))
        if shape[1:] == (1, 1):
            self._alias(n.output[0], src)
        else:
            self.add(Flatten(name=self.new_name(), inputs=self.expr(n, src)), n.output[0])
        self.rank[n.output[0]] = 2

    def op_Flatten(self, n, a):
        if int(a.get("axis", 1)) != 1:
            raise self.error(n, f"Flatten is supported with axis=1 only (axis {a.get('axis')})")
        self._flatten(n)

    def op_Reshape(self, n, a):
        target = self.required(n, 1).tolist()
        shape = self.expr_shape(self.expr(n, n.input[0]))
        total = int(np.prod(shape))
        ok2d = len(target) == 2 and target[1] in (-1, total)
        ok4d = len(target) == 4 and target[1] in (-1, total) and target[2:] == [1, 1]
        if not (ok2d or ok4d):
            raise self.error(n, f"Reshape to {target} is not supported (only flattening to [N, {total}])")
        self._flatten(n)
        self.rank[n.output[0]] = len(target)

    def _unit_axes(self, n, axes):
        if axes is None and len(n.input) > 1:
            axes = self.required(n, 1).tolist()
        rank = self.rank.get(n.input[0], 4)
        norm = [int(x) % (rank + (1 if n.op_type == "Unsqueeze" else 0)) for x in (axes or [])]
        shape = self.expr_shape(self.expr(n, n.input[0]))
        if n.op_type == "Squeeze" and (not norm or any(x < 2 for x in norm) or
                                       (rank == 4 and any(shape[x - 1] != 1 for x in norm))):
            raise self.error(n, f"Squeeze is supported on unit spatial axes only (axes {axes})")
        if n.op_type == "Unsqueeze" and (not norm or any(x < 2 for x in norm)):
            raise self.error(n, f"Unsqueeze is supported after the channel axis only (axes {axes})")
        self._alias(n.output[0], n.input[0])
        self.rank[n.output[0]] = rank + (len(norm) if n.op_type == "Unsqueeze" else -len(norm))

    def op_Squeeze(self, n, a):
        self._unit_axes(n, a.get("axes"))

    def op_Unsqueeze(self, n, a):
        self._unit_axes(n, a.get("axes"))

    def _linear(self, n, src: str, w: np.ndarray, b: np.ndarray | None):
        expr = self.expr(n, src)
        if self.expr_shape(expr)[1:] != (1, 1) and self.rank.get(src, 4) != 2:
            raise self.error(n, "Gemm/MatMul must follow a Flatten or a global pool")
        lin = Linear(name=self.new_name(), inputs=expr, out_features=int(w.shape[0]), weight=w.astype(np.float32),
                     bias=(b if b is not None else np.zeros(w.shape[0])).astype(np.float32))
        self.add(lin, n.output[0], rank=2)

    def op_Gemm(self, n, a):
        if a.get("transA", 0):
            raise self.error(n, "transA=1 is not supported")
        w = self.required(n, 1)
        w = w if a.get("transB", 0) else w.T
        b = self.const(n, 2)
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        self._linear(n, n.input[0], alpha * w, None if b is None else beta * np.broadcast_to(b, (w.shape[0],)))

    def op_MatMul(self, n, a):
        self._linear(n, n.input[0], self.required(n, 1).T, None)

    def op_Identity(self, n, a):
        if n.input[0] in self.consts:  # torch's legacy exporter shares folded weights this way
            self.consts[n.output[0]] = self.consts[n.input[0]]
            return
        self._alias(n.output[0], n.input[0])

    def op_Dropout(self, n, a):
        self._alias(n.output[0], n.input[0])


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


def import_onnx(source: str | Path | onnx.ModelProto, name: str | None = None) -> Graph:
    """Read an ONNX CNN into a Graph (weights included); errors name the ONNX node."""
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
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # shape inference is a convenience here; constants suffice
        pass
    return _Importer(model).run(name or default)
