"""How each study is tabulated and drawn (rows, columns, metric, plot): read by the tables and
by the sweep lookup (a study whose report combines all its sweeps)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """How a study is tabulated and drawn."""

    rows: str = "model"  # the config key whose values are the rows
    metric: str = "latency"  # latency or throughput
    plot: str = "bars"  # bars, heatmap, scatter or lines
    cols: str = ""  # a config key for the columns; empty: the variant (label and varying options)
    per: str = ""  # one table per value of this key (or per combination of comma-separated keys)
    also: tuple[str, ...] = ()  # more metrics tabulated the same way (no speed-up)
    combine: bool = False  # the report of the study covers all its sweeps (one per machine), not the newest


LAYOUTS = {
    "schedules": Layout(),
    "frameworks": Layout(),
    "autotvm": Layout(),
    "utilization": Layout(),
    "specialization": Layout(rows="backend.opt_batch", cols="batch", plot="heatmap", per="model"),
    "prune": Layout(plot="scatter", also=("cost",)),
    "batchsize": Layout(rows="batch", metric="throughput", plot="lines"),
    "kernels": Layout(rows="batch", plot="lines", per="model,precision"),
    "devices": Layout(rows="param:schedule_made_on", cols="tag:backend_device", plot="heatmap", per="model",
                      combine=True),
}

#: how a table or plot names a key that is not a config key
KEY_NAMES = {"param:schedule_made_on": "schedule made on", "tag:backend_device": "GPU"}


def key_name(key: str) -> str:
    return KEY_NAMES.get(key, key)


METRICS = {"latency": ("latency_median_ms", "median latency (ms)"),
           "throughput": ("throughput_ips", "throughput (images/s)"),
           "cost": ("optimization_cost_s", "optimization cost (s)")}
