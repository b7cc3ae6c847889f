"""TASO backend: the IR as a TASO graph, optimized by TASO's substitution search (unverified
until run against a TASO build; TASO is built from source, not installed from PyPI)."""

from harness.hookspecs import hookimpl

from .backend import TasoBackend
from .config import TasoConfig


@hookimpl
def harness_backends():
    return [TasoBackend]


__all__ = ["TasoBackend", "TasoConfig"]
