"""The input every correctness check feeds a backend: seeded, so the reference and the backend
see the same numbers in any process."""

from __future__ import annotations

import numpy as np

from .ir import Graph


def seeded_input(graph: Graph, batch: int, seed: int = 0) -> np.ndarray:
    """The seeded float32 input every correctness check uses."""
    rng = np.random.default_rng(seed + 1_000_003)
    return rng.standard_normal((batch, *graph.input_shape)).astype(np.float32)
