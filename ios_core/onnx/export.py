"""Export an IR graph to ONNX: an Interpreter whose tensors are ONNX value names."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..interpreters.base import Interpreter, UnsupportedNode
from ..ir import Graph
from ..ir.nodes import Activation, Conv, Flatten, Linear, Op, Pool
from ..ir.ops import OPS

OPSET = 17


class OnnxExporter(Interpreter[str]):
    target = "onnx"

    def __init__(self, graph: Graph):
        super().__init__(graph)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def _name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, hint: str, array: np.ndarray) -> str:
        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def is_const(self, name: str) -> bool:
        return any(t.name == name for t in self.inits)

    def batched(self, const: str, like: str) -> str:
        """A per-sample constant (no batch axis) repeated over the batch of the tensor ``like``."""
        array = numpy_helper.to_array(next(t for t in self.inits if t.name == const))
        batch = self.emit("Shape", [like], "batch", start=0, end=1)
        shape = self.emit("Concat", [batch, self.const("shape", np.array(array.shape, np.int64))], "batch", axis=0)
        return self.emit("Expand", [self.const(f"{const}_b", array[None]), shape], "batch")

    def emit(self, op: str, inputs: list[str], hint: str, **attrs) -> str:
        out = self._name(hint)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    # primitives
    def slice(self, x, begin, end, channels):
        ints = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
        return self.emit("Slice", [x, self.const("starts", ints(begin)), self.const("ends", ints(end)),
                                   self.const("axes", ints(1))], "slice")

    def add(self, xs):
        return self.emit("Sum", xs, "sum")

    def mul(self, xs):
        out = xs[0]
        for x in xs[1:]:
            out = self.emit("Mul", [out, x], "mul")
        return out

    def concat(self, xs):
        return self.emit("Concat", xs, "concat", axis=1)

    # node kinds
    def _act(self, x: str, act: str, hint: str) -> str:
        return x if act == "identity" else OPS[act].to_onnx(self, [x], {})

    def visit_conv(self, node: Conv, x):
        assert node.weight is not None, f"node {node.name}: has no weights"
        w = self.const(f"{node.name}_w", node.weight)
        b = self.const(f"{node.name}_b", node.bias if node.bias is not None else np.zeros(node.out_channels,
                                                                                          np.float32))
        y = self.emit("Conv", [x, w, b], f"conv{node.name}", kernel_shape=list(node.kernel),
                      strides=list(node.stride), pads=[*node.padding, *node.padding], group=node.groups,
                      dilations=list(node.dilation))
        return self._act(y, node.act, f"conv{node.name}")

    def visit_pool(self, node: Pool, x):
        if node.is_global:
            op = "GlobalAveragePool" if node.pool_type == "global_avg" else "GlobalMaxPool"
            return self.emit(op, [x], f"pool{node.name}")
        attrs = dict(kernel_shape=list(node.kernel), strides=list(node.stride),
                     pads=[*node.padding, *node.padding], ceil_mode=int(node.ceil_mode))
        if node.pool_type == "avg":
            return self.emit("AveragePool", [x], f"pool{node.name}",
                             count_include_pad=int(node.count_include_pad), **attrs)
        return self.emit("MaxPool", [x], f"pool{node.name}", **attrs)

    def visit_activation(self, node: Activation, x):
        return self._act(x, node.act, f"act{node.name}")

    def visit_op(self, node: Op, xs):
        assert all(c is not None for c in node.consts), f"node {node.name}: has no constants"
        consts = [self.const(f"{node.name}_k{i}", cast(np.ndarray, c)) for i, c in enumerate(node.consts)]
        try:
            return node.opdef.to_onnx(self, node.operands(xs, consts), node.params)
        except ValueError as exc:
            raise UnsupportedNode(f"node {node.name}: {exc}; it cannot be exported to ONNX") from None

    def _to4d(self, x: str, hint: str) -> str:
        return self.emit("Reshape", [x, self.const("shape", np.array([0, -1, 1, 1], np.int64))], hint)

    def visit_flatten(self, node: Flatten, x):
        return self._to4d(x, f"flatten{node.name}")

    def visit_linear(self, node: Linear, x):
        flat = self.emit("Flatten", [x], f"flat{node.name}", axis=1)
        assert node.weight is not None, f"node {node.name}: has no weights"
        w = self.const(f"{node.name}_w", node.weight)
        b = self.const(f"{node.name}_b", node.bias if node.bias is not None else np.zeros(node.out_features,
                                                                                          np.float32))
        y = self.emit("Gemm", [flat, w, b], f"gemm{node.name}", transB=1)
        return self._to4d(y, f"linear{node.name}")

    def model(self) -> onnx.ModelProto:
        c, h, w = self.graph.input_shape
        out = self.run("input")
        self.nodes.append(helper.make_node("Identity", [out], ["output"], name="output"))
        g = helper.make_graph(
            self.nodes, self.graph.name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", c, h, w])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", *self.graph.output_shape])],
            self.inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="ios_core")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def export_onnx(graph: Graph, path: str | Path | None = None) -> onnx.ModelProto:
    """ONNX model computing the graph (input ``input``, output ``output``, dynamic batch)."""
    model = OnnxExporter(graph).model()
    if path is not None:
        onnx.save(model, str(path))
    return model
