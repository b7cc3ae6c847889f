"""IOS backend: the inter-operator scheduler (ios_core's DP) and its stream runtime."""

from harness.hookspecs import hookimpl

from .backend import IosBackend
from .config import IosConfig


@hookimpl
def harness_backends():
    return [IosBackend]


__all__ = ["IosBackend", "IosConfig"]
