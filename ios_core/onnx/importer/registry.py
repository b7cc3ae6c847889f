"""The converters: one function per ONNX operator type, registered with :func:`converter`.

A converter is called as ``convert(imp, node, attrs)``: the importer's state (:class:`.state.Importer`), the
ONNX node and its attributes as Python values. It defines the node's outputs in the importer's symbol table
(or its constants) and appends IR nodes through the importer's helpers. One function may take several
operator types (a table maps each to its IR operator). The modules that register them (:mod:`.nn`,
:mod:`.arith`, :mod:`.layout`) are imported by the package, so that the registry is full once it is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import onnx

Converter = Callable[[Any, onnx.NodeProto, dict], None]
F = TypeVar("F", bound=Converter)

#: ONNX operator type -> its converter
CONVERTERS: dict[str, Converter] = {}


def converter(*op_types: str) -> Callable[[F], F]:
    """Register the decorated function as the converter of each of ``op_types``; a type has one converter."""
    def register(fn: F) -> F:
        for op_type in op_types:
            if op_type in CONVERTERS:
                have = CONVERTERS[op_type]
                raise ValueError(f"ONNX operator {op_type!r} has a converter already: "
                                 f"{have.__module__}.{have.__qualname__}")
            CONVERTERS[op_type] = fn
        return fn
    return register


def supported_ops() -> list[str]:
    """The ONNX operator types the importer takes."""
    return sorted(CONVERTERS)


def attrs(node: onnx.NodeProto) -> dict:
    """A node's attributes as Python values."""
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def text(v: Any) -> str:
    """A string attribute (onnx gives bytes)."""
    return v.decode() if isinstance(v, bytes) else str(v)
