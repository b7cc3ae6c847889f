"""The study's plots (matplotlib, PNG and SVG): normalised-throughput bars, specialization heat
maps, the prune trade-off scatter, throughput against batch size."""

from __future__ import annotations

import io
import textwrap
from typing import Any

from ios_core.plotting import pyplot, render

from ..stats import ratio_ci, ratio_interval
from .runs import Run
from .tables import Layout, Table, column


def _save(fig: Any) -> tuple[bytes, str]:
    svg = io.StringIO()
    fig.savefig(svg, format="svg", bbox_inches="tight")
    return render(fig, "png", dpi=120), svg.getvalue()


def bars(values: Table, base_col: str | None, higher_is_better: bool, title: str = "") -> tuple[bytes, str]:
    """Throughput normalised to the baseline (the first column without one), grouped by row."""
    plt = pyplot()
    base_col = base_col or values.cols[0]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(values.rows) * max(1, len(values.cols)) / 3), 4))
    width = 0.8 / max(1, len(values.cols))
    shown: list[float] = []
    for j, col in enumerate(values.cols):
        xs, ys, low, high = [], [], [], []
        for i, row in enumerate(values.rows):
            v, b = values.cells.get((row, col)), values.cells.get((row, base_col))
            smoke = "smoke" in values.flags.get((row, col), []) + values.flags.get((row, base_col), [])
            if isinstance(v, float) and isinstance(b, float) and v > 0 and b > 0 and not smoke:
                xs.append(i + (j - (len(values.cols) - 1) / 2) * width)
                ys.append(v / b if higher_is_better else b / v)
                ci = ratio_ci(values.ci.get((row, col)), values.ci.get((row, base_col)) if col != base_col else 0.0)
                lo, hi = ratio_interval(ys[-1], ci) if ci is not None else (ys[-1], ys[-1])
                low.append(ys[-1] - lo)  # asymmetric: the interval of a ratio, never below zero
                high.append(hi - ys[-1])
        errs = [low, high] if any(low) or any(high) else None
        ax.bar(xs, ys, width, label=col, yerr=errs, capsize=3)
        shown += ys
    if shown and max(shown) / min(shown) > 10:  # a 250x bar beside a 1.1x one: both readable on a log axis
        ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(values.rows)), values.rows)
    ax.set_ylabel(f"throughput normalised to {base_col}")
    ax.set_title(title or f"throughput normalised to {base_col}")
    ax.legend(fontsize=8, ncols=min(4, len(values.cols)), loc="upper center", bbox_to_anchor=(0.5, -0.12))
    return _save(fig)


def heatmap(normalised: Table, title: str) -> tuple[bytes, str]:
    """Rows (optimised for) x columns (run at); each cell over the best in its column."""
    plt = pyplot()
    import numpy as np

    data = np.array([[v if isinstance(v := normalised.cells.get((r, c)), float) else np.nan
                      for c in normalised.cols] for r in normalised.rows])
    fig, ax = plt.subplots(figsize=(1.2 * len(normalised.cols) + 2.5, 1.0 * len(normalised.rows) + 1.5))
    im = ax.imshow(data, cmap="viridis_r", vmin=1.0, vmax=max(1.05, float(np.nanmax(data)) if data.size else 1.05))
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            ax.text(j, i, "-" if np.isnan(data[i, j]) else f"{data[i, j]:.2f}", ha="center", va="center",
                    color="white" if not np.isnan(data[i, j]) and data[i, j] > 1.02 else "black")
    ax.set_xticks(range(len(normalised.cols)), [textwrap.fill(c, 14) for c in normalised.cols])  # GPU names
    ax.set_yticks(range(len(normalised.rows)), normalised.rows)
    rows_key, _, cols_key = normalised.row_name.partition(" \\ ")
    ax.set_xlabel(f"run at ({cols_key or 'column'})")
    ax.set_ylabel(f"optimised for ({rows_key})")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label="latency / best in column")
    return _save(fig)


def scatter(runs: list[Run], layout: Layout) -> tuple[bytes, str]:
    """Optimization cost against latency, one panel per network, a labelled point per variant."""
    plt = pyplot()
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.value("model"), []).append(run)
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    for ax, (model, group) in zip(axes[0], groups.items()):
        for run in group:
            cost, lat = run.metric("optimization_cost_s"), run.metric("latency_median_ms")
            if cost is None or lat is None:
                continue
            ax.scatter([cost], [lat])
            name = column(run, runs, layout)
            if len({r.label for r in group}) == 1:  # one variant's options apart: the label says nothing
                name = name.removeprefix(run.label).strip() or name
            ax.annotate(name, (cost, lat), fontsize=8,
                        textcoords="offset points", xytext=(4, 4))
        ax.set_xlabel("optimization cost (s)")
        ax.set_ylabel("median latency (ms)")
        ax.set_title(model)
    return _save(fig)


def lines(values: Table) -> tuple[bytes, str]:
    """The metric against the row key (batch size), a line per variant."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for col in values.cols:
        pts = [(float(r), v, values.interval(col, v, values.ci.get((r, col)), (r, col)) or (v, v)) for r in values.rows
               if isinstance(v := values.cells.get((r, col)), float)]
        if pts:
            xs, ys, bounds = zip(*pts)
            errs = [[y - lo for y, (lo, _) in zip(ys, bounds)], [hi - y for y, (_, hi) in zip(ys, bounds)]]
            ax.errorbar(xs, ys, yerr=errs if any(map(any, errs)) else None, marker="o", label=col, capsize=3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(values.row_name)
    ax.set_ylabel(values.title.split(": ", 1)[-1])
    ax.set_title(values.title)
    ax.legend(fontsize=8)
    return _save(fig)


def distributions(runs: list[Run]) -> tuple[bytes, str] | None:
    """Each finished job's timed latencies as a violin with its median marked, one row per job, on a log axis where
    the samples span more than tenfold (a p99 far from the median stays readable); None without samples."""
    jobs = [(f"{r.value('model')} {r.label} bs{r.value('batch')}", samples) for r in runs
            if r.status == "FINISHED" and len(samples := [float(v) for v in r.record.get("latencies_ms") or []
                                                          if v > 0]) >= 2]
    if not jobs:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(jobs) + 1.2))
    data = [samples for _, samples in jobs]
    ax.violinplot(data, vert=False, showmedians=True, showextrema=True)
    low, high = min(min(d) for d in data), max(max(d) for d in data)
    if high / low > 10:
        ax.set_xscale("log")
    ax.set_yticks(range(1, len(jobs) + 1), [name for name, _ in jobs])
    ax.invert_yaxis()  # the sweep's first job on top, as in its tables
    ax.set_xlabel("latency of each timed call, ms (the median marked)")
    ax.set_title("latency distribution per job")
    return _save(fig)
