"""Inductor's own settings around one ``torch.compile`` (issue 40): its caches in the store, the backends
max-autotune times, its compile workers; and what the caches did, for the record.

The FX-graph cache keys a compiled graph by its code, shapes and settings, the autotuning cache keys a
choice by the kernel's inputs: both in ``<store>/inductor`` (Triton's kernels go under it too) make a
second run of a model, or a batch size whose graphs repeat, skip work that a cold run spends minutes on.
The compile time is still the run's optimization cost, warm or cold; the hit and miss counts say which, and
the phase times (Inductor's own timers) say where it went: max-autotune's template autotuning, lowering, the
wait for Triton compiles. A compiled graph that does not run as a CUDA graph counts a skip, and says why."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from harness.backend import inductor_cache
from harness.machine.leases import cpu_threads

from .config import PyTorchConfig, backend_names

#: Inductor's counters the record keeps (``torch._dynamo.utils.counters["inductor"]``): the FX-graph cache, the
#: operators max-autotune chose a kernel for by timing, the template kernels it compiled, graphs not CUDA-graphed
COUNTERS = ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass", "select_algorithm_autotune",
            "select_algorithm_num_precompiles", "cudagraph_skips")

#: metric -> Inductor's timer (``torch._dynamo.utils.compilation_time_metrics``); a name starting with ``_`` is a
#: suffix and sums every timer that ends in it, one per autotuned operator kind (``convolution_template_autotuning``)
PHASES = {"dynamo_s": "bytecode_tracing", "lowering_s": "GraphLowering.run", "codegen_s": "GraphLowering.codegen",
          "autotune_s": "_template_autotuning", "template_precompile_s": "_template_precompiling",
          "kernel_compile_wait_s": "async_compile.wait", "module_load_s": "PyCodeCache.load_by_key_path"}

#: where Inductor says why a graph is not run as a CUDA graph
CUDAGRAPH_LOG = "torch._inductor.cudagraph_utils.__cudagraphs"
#: where torch.compile(backend="ios") says what IOS runs and what falls back
IOS_LOG = "ios_core.dynamo"


@dataclass
class CompileFacts:
    """What a compile adds to the run's record: params, metrics and notes (a run that compiles nothing: none)."""

    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class _Said(logging.Handler):
    """Keeps the messages a logger emits while attached."""

    def __init__(self, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _phase_times(timers: dict[str, list[float]], marks: dict[str, int]) -> dict[str, float]:
    """Seconds per :data:`PHASES` entry spent since ``marks`` (each timer's length then)."""
    spent = {key: sum(times[marks.get(key, 0):]) for key, times in timers.items()}
    return {f"inductor_{metric}": float(sum(s for key, s in spent.items()
                                            if (key.endswith(timer) if timer.startswith("_") else key == timer)))
            for metric, timer in PHASES.items()}


@contextlib.contextmanager
def settings(cfg: PyTorchConfig, store: Path) -> Iterator[CompileFacts]:
    """Inductor configured as ``cfg`` says while the block compiles; yields the facts that hold, after the
    block, the params (where the caches are, the backends timed, the workers), the metrics (cache hits and
    misses, operators autotuned, CUDA-graph skips and phase times of this compile) and the notes (why a graph
    is not CUDA-graphed, in Inductor's words) to record."""
    import torch._inductor.config as inductor
    from torch._dynamo import utils as dynamo_utils
    from torch._dynamo.utils import counters

    threads = cfg.compile_threads or cpu_threads()
    patch: dict[str, Any] = {"compile_threads": threads}
    folder = inductor_cache(store) if cfg.inductor_cache else None
    if folder is not None:
        patch.update(fx_graph_cache=True, autotune_local_cache=True)
    for key, option in (("max_autotune_conv_backends", cfg.autotune_conv_backends),
                        ("max_autotune_gemm_backends", cfg.autotune_gemm_backends)):
        if option:
            patch[key] = ",".join(backend_names(option))
    before = {k: counters["inductor"][k] for k in COUNTERS}
    timers: dict[str, list[float]] = getattr(dynamo_utils, "compilation_time_metrics", {})
    marks = {key: len(times) for key, times in timers.items()}
    said, cudagraph_log = _Said(), logging.getLogger(CUDAGRAPH_LOG)
    ios_said, ios_log = _Said(logging.INFO), logging.getLogger(IOS_LOG)
    out = CompileFacts()
    with contextlib.ExitStack() as stack:
        cudagraph_log.addHandler(said)
        stack.callback(cudagraph_log.removeHandler, said)
        ios_log.addHandler(ios_said)
        stack.callback(ios_log.removeHandler, ios_said)
        stack.callback(ios_log.setLevel, ios_log.level)
        ios_log.setLevel(logging.INFO)
        stack.enter_context(inductor.patch(patch))
        # max-autotune precompiles its template candidates on a thread pool sized by this variable, else by every
        # core of the machine: the job's CPU share instead (read when a choice is made, so set while compiling)
        stack.enter_context(mock.patch.dict(os.environ, {"TORCHINDUCTOR_COMPILE_THREADS": str(threads)}))
        yield out
        out.params = {"inductor_cache_dir": str(folder) if folder else "default",
                      "inductor_conv_backends": inductor.max_autotune_conv_backends,
                      "inductor_gemm_backends": inductor.max_autotune_gemm_backends,
                      "inductor_compile_threads": inductor.compile_threads}
    out.metrics = {**{f"inductor_{k}": float(counters["inductor"][k] - before[k]) for k in COUNTERS},
                   **_phase_times(timers, marks)}
    out.notes = [f"Inductor: {m}" for m in dict.fromkeys(said.messages)] + list(dict.fromkeys(ios_said.messages))
