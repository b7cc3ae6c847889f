"""ONNX Runtime backend: the model's ONNX form (the user's file, or exported) run with the configured provider."""

from harness.hookspecs import hookimpl

from .backend import OnnxRuntimeBackend
from .config import OnnxRuntimeConfig


@hookimpl
def harness_backends():
    return [OnnxRuntimeBackend]


__all__ = ["OnnxRuntimeBackend", "OnnxRuntimeConfig"]
