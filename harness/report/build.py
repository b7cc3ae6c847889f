"""Write a study's report: tables (Markdown, CSV), plots (PNG, SVG), the runs' summary lines
and one self-contained HTML page, under ``results/reports/<study>-<sweep id>/``; log them as
artifacts of the sweep's MLflow parent run."""

from __future__ import annotations

import base64
import html
import importlib.util
import json
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..plugins import plugin_manager
from ..records import sweeps
from . import plots
from .published import published_tables
from .runs import Run, find_sweeps, load_runs, tracker_of
from .tables import (
    LAYOUTS,
    METRICS,
    Layout,
    Table,
    baseline_column,
    batch_varies_across_columns,
    build_tables,
    environment_table,
    gpu_table,
    key_name,
    launcher_table,
    op_table,
    separate_sweeps,
    usage_table,
)

#: how to read a cell, printed above the tables
LEGEND = ("A number's ±: the relative 95% CI of its median (of a speed-up: both medians' CIs combined). "
          "Flags: noisy (CV over 10% or CI over 2%), capped (runner.max_time_s or max_iters stopped it before "
          "its CI target), interrupted, n.s. (a speed-up within its CI: not significant). Error bars in the "
          "plots: the same CIs.")


def _devices(runs: list[Run]) -> str:
    names = set()
    for run in runs:
        tags = run.record.get("tags", {})
        if tags.get("device") == "cuda":
            names.add(f"{tags.get('torch_device_name', 'GPU')} (driver {tags.get('gpu_driver', '?')})")
        elif tags.get("device"):
            names.add(f"CPU: {tags.get('cpu_model', '?')}")
    return "; ".join(sorted(names)) or "unknown"


def _plots(runs: list[Run], layout: Layout, tables: list[Table], baseline: str,
           study: str) -> dict[str, tuple[bytes, str]]:
    out: dict[str, tuple[bytes, str]] = {}
    values = [t for t in tables if not t.title.startswith("speed-up") and "/ best" not in t.title]
    if layout.plot == "heatmap":
        for t in tables:
            if "/ best in column" in t.title:
                model = t.title.split(":", 1)[0]
                per = "GPU" if layout.cols.startswith("tag:") else "batch size"
                out[f"{study}-{model}"] = plots.heatmap(t, f"{model}: latency / best for that {per}")
    elif layout.plot == "scatter":
        out["prune-tradeoff"] = plots.scatter(runs, layout)
    elif layout.plot == "lines" and layout.per:  # a plot per table: per model and precision
        for t in values:
            if t.row_name != key_name(layout.rows):  # the same-run and launcher tables
                continue
            group = t.title.split(":", 1)[0].replace(" ", "-")
            out[f"{layout.metric}-vs-{layout.rows}-{group}"] = plots.lines(t)
    elif layout.plot == "lines":
        out[f"{layout.metric}-vs-{layout.rows}"] = plots.lines(values[0])
    if layout.plot in ("bars", "scatter", "lines") and not layout.per and values and len(values[0].cols) > 1:
        base = baseline_column(runs, layout, baseline)
        bars, higher = values[0], layout.metric == "throughput"
        if batch_varies_across_columns(runs, layout):  # the images/s table build_tables added
            bars, higher = next(t for t in values if t.title.endswith(METRICS["throughput"][1])), True
        out["normalised-throughput"] = plots.bars(bars, base, higher,
                                                  f"{study or 'sweep'}: throughput normalised to "
                                                  f"{base or values[0].cols[0]}")
    spread = plots.distributions(runs)
    if spread is not None:
        out["latency-distributions"] = spread
    return out


def build_report(name: str | list[str], results_dir: str | Path, out_dir: str | Path | None = None,
                 baseline: str | None = None, log: bool = True) -> Path:
    """Build the report of a sweep (by id) or of a study's newest sweep, or of several sweeps
    together (a study run on two machines); returns its folder. Logged to the first's parent run."""
    states = find_sweeps(results_dir, [name] if isinstance(name, str) else name)
    state = states[0]
    per_sweep = [load_runs(results_dir, s) for s in states]
    runs = [run for sweep_runs in per_sweep for run in sweep_runs]
    study = state.get("study") or ""
    layout = LAYOUTS.get(study, Layout())
    if len(states) > 1:
        separate_sweeps([(s["sweep_id"], group) for s, group in zip(states, per_sweep, strict=True)], layout)
    if baseline is None:
        baseline = next((str(b) for r in runs if (b := r.record.get("config", {}).get("sweep", {}).get("baseline"))),
                        "")
    ids = "+".join(s["sweep_id"] for s in states)  # several sweeps: their own folder, never the first's
    folder = Path(out_dir) if out_dir else Path(results_dir) / "reports" / f"{study or 'sweep'}-{ids}"
    folder.mkdir(parents=True, exist_ok=True)
    tables = build_tables(runs, layout, baseline) if runs else []

    extra = [t for tables in plugin_manager().hook.harness_report_tables(runs=runs, layout=layout) for t in tables]
    extra += [*published_tables(runs, layout, study, baseline), op_table(runs, layout),
              launcher_table(states, list(map(len, per_sweep))), gpu_table(runs), usage_table(runs),
              environment_table(runs)]
    tables += [t for t in extra if t is not None]
    md = [f"# {study or 'sweep'} ({state['sweep_id']})", "", f"`{state.get('sweep_command', '')}`", "",
          f"Device: {_devices(runs)}. Status: {state.get('status', '?')}. {len(runs)} job(s), "
          f"{sum(r.status == 'FINISHED' for r in runs)} finished. "
          f"Report written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
          "", LEGEND, ""]
    for i, t in enumerate(tables):
        md.append(t.markdown())
        (folder / f"table{i + 1}.csv").write_text(t.csv())
    (folder / "tables.json").write_text(json.dumps([{**t.json(), "csv": f"table{i + 1}.csv"}
                                                    for i, t in enumerate(tables)], indent=1))
    lines = [str(r.record.get("summary", "")) for r in runs]
    (folder / "summary.txt").write_text("\n".join(lines) + "\n")
    md += ["### Summary lines", "", "```", *lines, "```", ""]
    images: dict[str, tuple[bytes, str]] = {}
    if tables and importlib.util.find_spec("matplotlib") is None:
        warnings.warn("matplotlib is not installed: the report has tables but no plots; "
                      "pip install -e '.[plots]'", stacklevel=2)
    elif tables:
        images = _plots(runs, layout, tables, baseline, study)
    for key, (png, svg) in images.items():
        (folder / f"{key}.png").write_bytes(png)
        (folder / f"{key}.svg").write_text(svg)
        md.append(f"![{key}]({key}.png)\n")
    timelines = {f"{kind}-{r.label}-{r.value('model')}-bs{r.value('batch')}":
                 svg for kind in ("timeline", "in_flight") for r in runs
                 if (svg := r.record.get("artifacts", {}).get(f"{kind}.svg"))}
    for label, svg in timelines.items():
        if svg:
            (folder / f"{label}.svg").write_text(svg)
            md.append(f"![{label}]({label}.svg)\n")
    (folder / "report.md").write_text("\n".join(md))
    (folder / "index.html").write_text(_html(state, runs, tables, images, timelines, lines))
    if log:
        _log(results_dir, state, folder)
    return folder


def _html(state: dict[str, Any], runs: list[Run], tables: list[Table], images: dict[str, tuple[bytes, str]],
          timelines: dict[str, str | None], lines: list[str]) -> str:
    """One page, no outside files: tables as HTML, plots as embedded PNG."""
    parts = [f"<h1>{html.escape(state.get('study') or 'sweep')} ({state['sweep_id']})</h1>",
             f"<p><code>{html.escape(state.get('sweep_command', ''))}</code></p>",
             f"<p>Device: {html.escape(_devices(runs))}. Status: {html.escape(str(state.get('status', '?')))}. "
             f"{len(runs)} job(s).</p>", f"<p>{html.escape(LEGEND)}</p>"]
    parts += [t.html() for t in tables]
    for key, (png, _) in images.items():
        parts.append(f"<h3>{html.escape(key)}</h3><img alt='{html.escape(key)}' "
                     f"src='data:image/png;base64,{base64.b64encode(png).decode()}'>")
    for label, svg in timelines.items():
        if svg:
            parts.append(f"<h3>{html.escape(label)}</h3>" + svg[svg.find("<svg"):])
    parts.append("<h3>Summary lines</h3><pre>" + html.escape("\n".join(lines)) + "</pre>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;"
             "margin-bottom:1em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}img{max-width:100%}"
             "pre{white-space:pre-wrap;overflow-wrap:anywhere}code{overflow-wrap:anywhere}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(state['sweep_id'])}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def _log(results_dir: str | Path, state: dict[str, Any], folder: Path) -> None:
    """The report as artifacts of the sweep's parent run (skipped, with a warning, when the store is down)."""
    t = tracker_of(results_dir, state)
    if t is None:
        return
    try:
        parent = t.parent_run(state["sweep_id"], state.get("sweep_name", ""), state.get("sweep_command"),
                              started=state.get("first_started") or state.get("started"))
        t.client.log_artifacts(parent, str(folder), "report")
        if state.get("status") in ("FINISHED", "FAILED", "KILLED"):  # a parent made just now is closed too,
            t.client.set_terminated(parent, state["status"],  # at the sweep's end: its duration stays true
                                    end_time=sweeps.iso_ms(state.get("ended")))
    except Exception as exc:
        warnings.warn(f"the report was written to {folder} but not logged to MLflow "
                      f"({str(exc).splitlines()[0][:200]})", stacklevel=2)
