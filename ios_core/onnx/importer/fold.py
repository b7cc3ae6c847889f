"""Nodes whose inputs are all constants (weight standardization, shape arithmetic) are folded with onnx's
reference evaluator, whatever their type."""

from __future__ import annotations

from collections.abc import Container

import numpy as np
import onnx

from .errors import OnnxImportError, at


def folds(node: onnx.NodeProto, consts: Container[str]) -> bool:
    """Whether the import folds the node (every input a constant), whatever its type."""
    return bool(node.input) and all(not i or i in consts for i in node.input)


def fold(n: onnx.NodeProto, consts: dict[str, np.ndarray], opset: int) -> None:
    """Evaluate a node whose inputs are all constants with onnx's reference evaluator; its outputs join
    ``consts``."""
    from onnx.reference import ReferenceEvaluator

    names = [i for i in n.input if i]
    feeds = {i: consts[i] for i in names}
    graph = onnx.helper.make_graph(
        [n], "fold", [onnx.helper.make_tensor_value_info(i, onnx.helper.np_dtype_to_tensor_dtype(v.dtype),
                                                         v.shape) for i, v in feeds.items()],
        [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in n.output if o])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    try:
        outs = ReferenceEvaluator(model).run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - the evaluator's own refusal, said in one line
        raise OnnxImportError(at(n, f"folding a constant subgraph failed ({type(exc).__name__}: {exc})")) from None
    for o, v in zip([o for o in n.output if o], outs):
        consts[o] = np.asarray(v)
