"""Typed config of the TASO backend (``backend=taso backend.budget=100 ...``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, ConfigError, at_least


@dataclass
class TasoConfig(BackendConfig):
    name: str = "taso"
    alpha: float = 1.05  # TASO's relaxation: candidates up to alpha x the best cost stay in the search
    budget: int = 1000  # search iterations (the IOS paper used 1000, and 8 for NASNet to fit in memory)
    optimize: bool = True  # False: run the graph as converted (the paper's TASO-SEQ)

    def check(self) -> None:
        if not self.alpha >= 1.0:  # also refuses NaN
            raise ConfigError(f"backend.alpha={self.alpha} must be >= 1.0 (TASO keeps candidates whose cost "
                              f"is within alpha x the best; below 1 it would drop the best graph itself)")
        at_least("backend.", self, 0, "budget")
