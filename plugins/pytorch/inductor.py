"""Inductor's own settings around one ``torch.compile`` (issue 40): its caches in the store, the backends
max-autotune times, its compile workers; and what the caches did, for the record.

The FX-graph cache keys a compiled graph by its code, shapes and settings, the autotuning cache keys a
choice by the kernel's inputs: both in ``<store>/inductor`` (Triton's kernels go under it too) make a
second run of a model, or a batch size whose graphs repeat, skip work that a cold run spends minutes on.
The compile time is still the run's optimization cost, warm or cold; the hit and miss counts say which."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.backend import inductor_cache
from harness.machine.leases import cpu_threads

from .config import PyTorchConfig

#: Inductor's counters the record keeps (``torch._dynamo.utils.counters["inductor"]``)
COUNTERS = ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")


@contextlib.contextmanager
def settings(cfg: PyTorchConfig, store: Path) -> Iterator[dict[str, Any]]:
    """Inductor configured as ``cfg`` says while the block compiles; yields a dict that holds, after the
    block, the params (where the caches are, the backends timed, the workers) and metrics (cache hits and
    misses of this compile) to record."""
    import torch._inductor.config as inductor
    from torch._dynamo.utils import counters

    patch: dict[str, Any] = {"compile_threads": cfg.compile_threads or cpu_threads()}
    folder = inductor_cache(store) if cfg.inductor_cache else None
    if folder is not None:
        patch.update(fx_graph_cache=True, autotune_local_cache=True)
    for key, option in (("max_autotune_conv_backends", cfg.autotune_conv_backends),
                        ("max_autotune_gemm_backends", cfg.autotune_gemm_backends)):
        if option:
            patch[key] = ",".join(b.strip().upper() for b in option.split(",") if b.strip())
    before = {k: counters["inductor"][k] for k in COUNTERS}
    out: dict[str, Any] = {"params": {}, "metrics": {}}
    with inductor.patch(patch):
        yield out
        out["params"] = {"inductor_cache_dir": str(folder) if folder else "default",
                         "inductor_conv_backends": inductor.max_autotune_conv_backends,
                         "inductor_gemm_backends": inductor.max_autotune_gemm_backends,
                         "inductor_compile_threads": inductor.compile_threads}
    out["metrics"] = {f"inductor_{k}": float(counters["inductor"][k] - before[k]) for k in COUNTERS}
