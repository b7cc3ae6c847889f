"""The input every correctness check feeds a backend: seeded, so the reference and the backend
see the same numbers in any process."""

from __future__ import annotations

import numpy as np

from .ir import Graph


def seeded_input(graph: Graph, batch: int, seed: int = 0) -> np.ndarray:
    """The seeded float32 input every correctness check uses."""
    return seeded_array(graph.input_shape, batch, seed)


def seeded_array(shape: tuple[int, ...], batch: int, seed: int = 0) -> np.ndarray:
    """The same numbers for an input of shape (batch, *shape) given without a graph."""
    rng = np.random.default_rng(seed + 1_000_003)
    return rng.standard_normal((batch, *shape)).astype(np.float32)
