"""TensorFlow backends: the IR as a tf.function (``tensorflow``) and the same function
compiled by XLA (``xla``, jit_compile=True)."""

from harness.hookspecs import hookimpl

from .backend import TensorFlowBackend, XlaBackend
from .config import TensorFlowConfig, XlaConfig


@hookimpl
def harness_backends():
    return [TensorFlowBackend, XlaBackend]


__all__ = ["TensorFlowBackend", "TensorFlowConfig", "XlaBackend", "XlaConfig"]
