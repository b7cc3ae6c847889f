"""TensorRT backend: the model's ONNX form, built into a TensorRT engine with the Python API
(TensorRT 10 and 11; 8.6 as far as its API reaches) and timed through the common runner.
No machine of this repository's CI has TensorRT, so everything up to the builder is tested on
the CPU and the GPU path is unverified here."""

from harness.hookspecs import hookimpl

from .backend import TensorRTBackend
from .config import TensorRTConfig


@hookimpl
def harness_backends():
    return [TensorRTBackend]


__all__ = ["TensorRTBackend", "TensorRTConfig"]
