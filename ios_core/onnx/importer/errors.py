"""The importer's exception and the texts of the refusals that name a node."""

from __future__ import annotations

import onnx

from ...ir import GraphError
from .registry import supported_ops


class OnnxImportError(GraphError):
    """The ONNX file cannot be read or uses something the IR cannot express."""


def at(node: onnx.NodeProto, why: str) -> str:
    """An import error's text: the node, then why."""
    return f"ONNX node {node.name or '(unnamed)'!r} ({node.op_type}): {why}"


def foreign(node: onnx.NodeProto) -> str:
    return f"operator {node.domain}.{node.op_type} is not supported (not a standard ONNX op)"


def unknown(node: onnx.NodeProto) -> str:
    return f"operator {node.op_type!r} is not supported; supported: {', '.join(supported_ops())}"


def arity(node: onnx.NodeProto, opset: int) -> str | None:
    """Why the node has too few or too many inputs for its operator at this opset (ONNX's own schema), or None."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "" if node.domain == "ai.onnx" else node.domain)
    except onnx.defs.SchemaError:  # no such operator at this opset: the converter says what it takes
        return None
    given = len(node.input)
    if schema.min_input <= given <= schema.max_input:
        return None
    takes = (f"{schema.min_input}" if schema.min_input == schema.max_input
             else f"{schema.min_input} to {schema.max_input}" if schema.max_input < 2**31 - 1
             else f"at least {schema.min_input}")
    return f"{given} input(s), where {node.op_type} takes {takes} (ONNX opset {opset})"
