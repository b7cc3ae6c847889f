"""``runner.trace=true``: a torch.profiler trace of a few iterations after the timed ones
(Chrome trace JSON, opens in chrome://tracing or Perfetto) and the number of kernels in
flight over time, the utilization view of the IOS paper's experiment 3. Active-warp counters
need privileged access; how many kernels overlap does not. On a CPU the count is of threads
busy running operators."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ios_core.plotting import pyplot, render

MAX_TRACE_BYTES = 8 << 20  # larger traces are summarised but not kept as an artifact


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def in_flight(intervals: list[tuple[float, float]]) -> tuple[list[float], list[int]]:
    """A step function: at times[i] the count becomes counts[i] (intervals half-open)."""
    edges = sorted([(s, 1) for s, e in intervals if e > s] + [(e, -1) for s, e in intervals if e > s])
    times: list[float] = []
    counts: list[int] = []
    level = 0
    for t, d in edges:
        level += d
        if times and times[-1] == t:
            counts[-1] = level
        else:
            times.append(t)
            counts.append(level)
    return times, counts


def busy_intervals(events: list[dict[str, Any]], cuda: bool) -> list[tuple[float, float]]:
    """GPU: every kernel (us). CPU: per thread, the union of its operator spans."""
    if cuda:
        return [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                if e.get("ph") == "X" and e.get("cat") == "kernel"]
    per_thread: dict[Any, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            per_thread.setdefault(e.get("tid"), []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    return [iv for spans in per_thread.values() for iv in merged(spans)]


def summary(intervals: list[tuple[float, float]]) -> dict[str, float]:
    times, counts = in_flight(intervals)
    if len(times) < 2:
        return {"trace_units": float(len(intervals))}
    busy = weighted = 0.0
    for (t0, c), t1 in zip(zip(times, counts), times[1:]):
        if c > 0:
            busy += t1 - t0
            weighted += c * (t1 - t0)
    return {"trace_units": float(len(intervals)), "trace_max_in_flight": float(max(counts)),
            "trace_mean_in_flight": weighted / busy if busy else 0.0, "trace_span_ms": (times[-1] - times[0]) / 1e3}


def in_flight_svg(intervals: list[tuple[float, float]], title: str, what: str) -> str | None:
    plt = pyplot()
    if plt is None:
        return None
    times, counts = in_flight(intervals)
    if not times:
        return None
    t0 = times[0]
    fig, ax = plt.subplots(figsize=(9, 3))
    ax.step([(t - t0) / 1e3 for t in times], counts, where="post")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel(f"{what} in flight")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    return render(fig)


def trace_run(prep: Any, handle: Any, device: str, title: str, iters: int = 3) -> tuple[dict[str, float],
                                                                                           dict[str, str]]:
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(iters):
            prep.infer(handle)
            prep.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        text = open(path).read()
    finally:
        os.unlink(path)
    events = json.loads(text).get("traceEvents", [])
    intervals = busy_intervals(events, cuda)
    what = "kernels" if cuda else "busy threads"
    metrics = summary(intervals)
    artifacts = {}
    if len(text) <= MAX_TRACE_BYTES:
        artifacts["trace.json"] = text
    svg = in_flight_svg(intervals, f"{title}: {what} in flight ({iters} iterations)", what)
    if svg:
        artifacts["in_flight.svg"] = svg
    return metrics, artifacts
