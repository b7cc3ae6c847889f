"""ONNX Runtime backend: the IR exported to ONNX and run with the configured provider."""

from harness.hookspecs import hookimpl

from .backend import OnnxRuntimeBackend
from .config import OnnxRuntimeConfig


@hookimpl
def harness_backends():
    return [OnnxRuntimeBackend]


__all__ = ["OnnxRuntimeBackend", "OnnxRuntimeConfig"]
