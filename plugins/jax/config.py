"""Typed config of the jax backend (``backend=jax``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig


@dataclass
class JaxConfig(BackendConfig):
    name: str = "jax"
