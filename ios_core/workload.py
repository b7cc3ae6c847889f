"""What a schedule, a stage-cost cache or a tuning database is made for: one graph at one batch
size and precision on one device. One value, so the four facts travel together and in one order."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .ir import Graph


@dataclass(frozen=True)
class Workload:
    graph: Graph
    batch: int = 1
    precision: str = "fp32"
    device_name: str = ""  # the device's own name (``NVIDIA H100 80GB HBM3``), not ``cuda``

    def at_batch(self, batch: int) -> Workload:
        """The same workload at another batch size (a schedule specialised for it)."""
        return replace(self, batch=batch)


def slug(text: str) -> str:
    """A file-name-safe form of a device or model name (saved schedules, caches, engines)."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower() or "device"
