"""ONNX export of any IR graph and import of ONNX CNNs into the IR."""

from .export import export_onnx
from .importer import SUPPORTED_OPS, OnnxImportError, import_onnx

__all__ = ["SUPPORTED_OPS", "OnnxImportError", "export_onnx", "import_onnx"]
