"""The measured cost model: a stage's latency is timed on the target device through the
runtime (:class:`~ios_core.runtime.StageTimer`) and cached persistently by stage
signature, device, batch, precision and runtime, so identical cells and later searches
reuse measurements."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..ir import Graph
from ..schedule.schedule import Stage
from .signature import key, signature, stage_nodes


class CostCache:
    """A JSON file of {key: value} (stage milliseconds; kernel choices with ``value=str``); written
    atomically every ``flush_every`` new entries and on close, so a crash loses at most that many
    measurements. Entries another process wrote meanwhile are kept: the file is merged, not replaced."""

    def __init__(self, path: str | Path | None, flush_every: int = 200, value: Callable[[Any], Any] = float):
        self.path = Path(path) if path else None
        self.flush_every, self.value = flush_every, value
        self._stamp: tuple[int, ...] = ()  # the file's identity when this process last read or wrote it
        self.data: dict[str, Any] = self._read()
        self.dirty = 0

    def _identity(self) -> tuple[int, ...]:
        """Inode, size and modification time: every write replaces the file (a new inode), so a write by another
        process within the clock's resolution is still seen."""
        if self.path is None or not self.path.is_file():
            return ()
        st = self.path.stat()
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _read(self) -> dict[str, Any]:
        if self.path is None or not self.path.is_file():
            return {}
        self._stamp = self._identity()
        try:
            return {k: self.value(v) for k, v in json.loads(self.path.read_text()).items()}
        except (json.JSONDecodeError, ValueError, AttributeError, TypeError):
            return {}  # a corrupt cache is only a cache: start over

    def get(self, k: str) -> Any:
        return self.data.get(k)

    def put(self, k: str, ms: Any) -> None:
        self.data[k] = ms
        self.dirty += 1
        if self.dirty >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._identity() != self._stamp:  # another process wrote it since: keep its entries too
            self.data = {**self._read(), **self.data}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)
        self._stamp, self.dirty = self._identity(), 0

    def __len__(self) -> int:
        return len(self.data)


class MeasuredCostModel:
    name = "measured"

    def __init__(self, timer, cache: CostCache, context: tuple):
        self.timer, self.cache, self.context = timer, cache, context
        self.measurements = 0
        self.cache_hits = 0
        self.prefetched = 0

    def stage_latency(self, graph: Graph, stage: Stage) -> float:
        groups = stage_nodes(graph, stage)
        k = key(signature(graph, groups), *self.context)
        ms = self.cache.get(k)
        if ms is not None:
            self.cache_hits += 1
            return ms
        ms = self.timer.time(graph, groups)
        self.measurements += 1
        self.cache.put(k, ms)
        return ms

    def prefetch(self, graph: Graph, stages: list[Stage], batch_size: int = 32, progress=None) -> int:
        """Time every stage of ``stages`` that the cache lacks, deduplicated by signature,
        ``batch_size`` stages per captured graph; returns how many were timed. The DP that
        follows then finds them in the cache."""
        todo: dict[str, list] = {}
        for st in stages:
            groups = stage_nodes(graph, st)
            k = key(signature(graph, groups), *self.context)
            if k not in todo and self.cache.get(k) is None:
                todo[k] = groups
        items = list(todo.items())
        many = getattr(self.timer, "time_many", None)
        for i in range(0, len(items), batch_size):
            chunk = items[i:i + batch_size]
            times = many(graph, [g for _, g in chunk]) if many else [self.timer.time(graph, g) for _, g in chunk]
            for (k, _), ms in zip(chunk, times):
                self.cache.put(k, ms)
            self.measurements += len(chunk)
            self.prefetched += len(chunk)
            if progress is not None:
                progress(len(chunk))
        return len(items)

    def stats(self) -> dict[str, float]:
        total = self.measurements + self.cache_hits
        return {"measurements": self.measurements, "cache_hits": self.cache_hits, "prefetched": self.prefetched,
                "cache_hit_rate": round(self.cache_hits / total, 4) if total else 0.0}

    def close(self) -> None:
        self.cache.flush()
