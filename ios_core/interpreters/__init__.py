"""Interpreters of the IR: the float64 reference and converters to other targets."""

from .base import Interpreter, UnsupportedNode
from .reference import ReferenceExecutor, reference_forward

__all__ = ["Interpreter", "ReferenceExecutor", "UnsupportedNode", "reference_forward"]
