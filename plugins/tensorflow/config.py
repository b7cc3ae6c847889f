"""Typed configs of the tensorflow and xla backends (``backend=tensorflow``, ``backend=xla``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig


@dataclass
class TensorFlowConfig(BackendConfig):
    name: str = "tensorflow"


@dataclass
class XlaConfig(TensorFlowConfig):
    name: str = "xla"
