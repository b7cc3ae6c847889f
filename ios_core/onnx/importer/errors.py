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
