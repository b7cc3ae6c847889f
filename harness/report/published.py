"""Published figures beside a study's own (``conf/published.yaml``): the IOS paper's V100 table under the
frameworks, schedules and autotvm studies, in the same rows and columns as the measured table, with the
paper's speed-up over the same baseline, so that a reader sees which rankings hold on today's GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import conf_dir
from .layouts import Layout
from .runs import Run
from .tables import Table, baseline_column, column, ordered, speedup_table


@dataclass(frozen=True)
class Published:
    """One source's figures: ``ms[network][label]``, for the studies it is set beside."""

    title: str
    studies: tuple[str, ...]
    ms: dict[str, dict[str, float]]


def _load() -> dict[str, Published]:
    from omegaconf import OmegaConf

    raw: dict[str, Any] = OmegaConf.to_container(OmegaConf.load(conf_dir() / "published.yaml"))  # type: ignore[assignment]
    return {name: Published(str(spec["title"]), tuple(spec["studies"]),
                            {net: {label: float(ms) for label, ms in row.items()} for net, row in spec["ms"].items()})
            for name, spec in (raw or {}).items()}


PUBLISHED = _load()


def published_tables(runs: list[Run], layout: Layout, study: str, baseline: str) -> list[Table]:
    """For each source set beside ``study``: its figures in the measured table's rows (the networks it has) and
    columns (the runs whose label it has), then its speed-up over the study's baseline column, where the paper
    has that column. Empty when the study has none, or its runs share no network and label with them."""
    if layout.rows != "model" or layout.cols or layout.per:
        return []
    tables = []
    for source in PUBLISHED.values():
        if study not in source.studies:
            continue
        rows = [r for r in ordered([run.value("model") for run in runs]) if r in source.ms]
        cols: dict[str, str] = {}  # the measured column -> its label in the paper
        for run in runs:
            if any(run.label in source.ms[r] for r in rows):
                cols.setdefault(column(run, runs, layout), run.label)
        if not rows or not cols:
            continue
        t = Table(f"{source.title}: median latency (ms)", "model", rows, list(cols), digits=2)
        for r in rows:
            for col, label in cols.items():
                t.cells[(r, col)] = source.ms[r].get(label, "not in the paper")
        tables.append(t)
        base = baseline_column(runs, layout, baseline)
        if base in cols:
            speedups = speedup_table(t, base, higher_is_better=False)
            speedups.title = f"{source.title}: speed-up over {base}"
            tables.append(speedups)
    return tables

