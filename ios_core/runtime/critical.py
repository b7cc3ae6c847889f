"""The critical path of one inference from a GPU trace: which kernels, one after another, decide its latency.

A captured multi-stream model runs kernels concurrently, so neither their sum nor the largest of them says what
bounds the latency. Walking back from the kernel that ends last, each step takes the kernel that ended last
before this one started, on any stream. The trace holds no dependencies, so this is a heuristic: that kernel is
usually its own stream's previous one or the cross-stream producer it waited for, but may be an unrelated
concurrent one that happened to end later. The gap between the two is time the path spent in neither (launch,
dependency resolution, an idle stream).
This reads a trace as Kineto writes it (``torch.profiler``'s Chrome trace: ``cat`` ``kernel``, ``ts``/``dur`` in
microseconds, ``args.stream``), so it needs no GPU to test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: Kineto's categories of device work that occupy a stream
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class Kernel:
    name: str
    stream: int
    start_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass(frozen=True)
class Step:
    """A kernel on the critical path and the idle time between its predecessor's end and its start."""

    kernel: Kernel
    gap_us: float


def read_trace(path: str | Path) -> list[Kernel]:
    """The device work in a Chrome trace that ``torch.profiler`` exported, in start order."""
    events = json.loads(Path(path).read_text()).get("traceEvents", [])
    found = [Kernel(str(e.get("name", "")), int(e.get("args", {}).get("stream", e.get("tid", 0)) or 0),
                    float(e["ts"]), float(e.get("dur", 0.0)))
             for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_WORK]
    return sorted(found, key=lambda k: k.start_us)


def split_runs(kernels: list[Kernel], idle_us: float) -> list[list[Kernel]]:
    """Consecutive inferences, told apart by an idle stretch of at least ``idle_us`` on every stream (the
    profiling loop waits between them)."""
    runs: list[list[Kernel]] = []
    end = float("-inf")
    for k in sorted(kernels, key=lambda k: k.start_us):
        if k.start_us - end >= idle_us or not runs:
            runs.append([])
        runs[-1].append(k)
        end = max(end, k.end_us)
    return runs


def critical_path(kernels: list[Kernel], slack_us: float = 0.5) -> list[Step]:
    """The chain of kernels that ends last, first to last. A kernel's predecessor is the one that ended latest
    at most ``slack_us`` after it started (trace timestamps are rounded), preferring its own stream's on a tie."""
    if not kernels:
        return []
    by_end = sorted(kernels, key=lambda k: k.end_us)
    current = by_end[-1]
    steps: list[Step] = []
    while True:
        before = [k for k in by_end if k is not current and k.end_us <= current.start_us + slack_us
                  and k.start_us < current.start_us]
        if not before:
            steps.append(Step(current, 0.0))
            break
        latest = max(k.end_us for k in before)
        near = [k for k in before if k.end_us >= latest - slack_us]
        prev = next((k for k in near if k.stream == current.stream), max(near, key=lambda k: k.end_us))
        steps.append(Step(current, max(0.0, current.start_us - prev.end_us)))
        current = prev
    return steps[::-1]


def summary(steps: list[Step]) -> dict[str, float]:
    """Span, kernel time and gaps along a path, in microseconds."""
    if not steps:
        return {"span_us": 0.0, "kernels": 0.0, "kernel_us": 0.0, "gap_us": 0.0, "streams": 0.0}
    return {"span_us": steps[-1].kernel.end_us - steps[0].kernel.start_us, "kernels": float(len(steps)),
            "kernel_us": sum(s.kernel.dur_us for s in steps), "gap_us": sum(s.gap_us for s in steps),
            "streams": float(len({s.kernel.stream for s in steps}))}
