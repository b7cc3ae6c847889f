"""Typed config of the TensorRT backend (``backend=tensorrt backend.aux_streams=0 ...``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness.config import BackendConfig, ConfigError

MAX_OPTIMIZATION_LEVEL = 5  # TensorRT's highest builder optimization level (8.6 to 11)


def invalid(key: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"backend.{key}={value!r} is invalid: {why}")


def parse_batch_range(text: str) -> tuple[int, int] | None:
    """``"1-128"`` -> (1, 128); empty -> None (exact shapes for the run's batch)."""
    if not text:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if m is None or not 1 <= int(m[1]) <= int(m[2]):
        raise invalid("batch_range", text, "use lo-hi with 1 <= lo <= hi (e.g. 1-128), or leave it empty for "
                                           "exact shapes at the run's batch")
    return int(m[1]), int(m[2])


@dataclass
class TensorRTConfig(BackendConfig):
    name: str = "tensorrt"
    aux_streams: int = -1  # TensorRT's max auxiliary streams: -1 TensorRT decides, 0 one stream, n at most n more
    cuda_graph: bool = False  # the enqueue captured once in a CUDA graph, replayed per inference
    optimization_level: int = 3  # builder optimization level, 0..5 (TensorRT's default: 3)
    workspace_mb: int = 4096  # workspace memory pool limit
    batch_range: str = ""  # "": exact shapes for the run's batch; "1-128": one profile, opt at the run's batch
    layer_profile: bool = False  # a per-layer profile artifact, made after timing on its own execution context
    cache: bool = True  # reuse a serialized engine built before for the same model, settings, GPU and TensorRT

    def check(self) -> None:
        if self.aux_streams < -1:
            raise invalid("aux_streams", self.aux_streams, "use -1 (TensorRT decides), 0 (one stream) or a "
                                                           "maximum count of auxiliary streams")
        if not 0 <= self.optimization_level <= MAX_OPTIMIZATION_LEVEL:
            raise invalid("optimization_level", self.optimization_level,
                          f"TensorRT's builder optimization levels are 0..{MAX_OPTIMIZATION_LEVEL}")
        if self.workspace_mb < 1:
            raise invalid("workspace_mb", self.workspace_mb, "the workspace limit must be at least 1 MiB")
        parse_batch_range(self.batch_range)
