"""Torch device/precision plumbing for backends; it lives in ios_core (the IOS runtime
needs it too) and is re-exported here for plugins."""

from ios_core.runtime.target import DTYPES, TorchTarget

__all__ = ["DTYPES", "TorchTarget"]
