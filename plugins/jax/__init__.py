"""JAX backend: the IR as a jitted JAX function (XLA on JAX's device)."""

from harness.hookspecs import hookimpl

from .backend import JaxBackend
from .config import JaxConfig


@hookimpl
def harness_backends():
    return [JaxBackend]


__all__ = ["JaxBackend", "JaxConfig"]
