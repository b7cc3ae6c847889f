"""The paper-shaped tables of a study: a row per network (or batch size), a column per variant,
a GeoMean row, and the speed-up over a baseline; failed and missing runs keep their reason."""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ios_core.cost.opprofile import from_csv

from ..machine.usage import MEMORY_SOURCES, peak_memory_mb
from ..models import MODEL_KEYS
from ..multirun.sweep_table import normal_baseline
from ..plugins import label_options
from ..stats import geomean, judge_speedup, quality_flags, ratio_interval, significant
from .layouts import KEY_NAMES, LAYOUTS, METRICS, Layout, key_name  # noqa: F401  (the report's names)
from .runs import Run

Cell = float | str  # a number, or the reason there is none


@dataclass
class Table:
    title: str
    row_name: str
    rows: list[str]
    cols: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    digits: int = 3
    suffix: str = ""
    geomean: bool = True
    #: a cell's 95% CI: its relative half-width, or in a ratio column the half-width of its log
    ci: dict[tuple[str, str], float] = field(default_factory=dict)
    flags: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # noisy, capped, n.s. ...
    ratios: bool = False  # every column holds ratios (speed-ups): their CIs are intervals on the log scale
    ratio_cols: tuple[str, ...] = ()  # the columns that do where the others do not (shown with an "x")
    samples: dict[tuple[str, str], float] = field(default_factory=dict)  # the samples behind a cell's number
    #: a cell's 95% CI as factors of its number (low, high), where the run's own order statistics give them
    bounds: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def is_ratio(self, col: str) -> bool:
        return self.ratios or col in self.ratio_cols

    def text(self, row: str, col: str) -> str:
        v = self.cells.get((row, col), "missing")
        if not isinstance(v, float):
            return v
        return self._number(col, v, self.ci.get((row, col))) + (
            f" ({', '.join(self.flags[(row, col)])})" if self.flags.get((row, col)) else "")

    def interval(self, col: str, v: float, ci: float | None,
                 cell: tuple[str, str] | None = None) -> tuple[float, float] | None:
        """The 95% CI of the number ``v`` in ``col``: on the log scale for a ratio (asymmetric, never below
        zero); else the order statistics' own bounds where ``cell`` has them, or ``v`` -+ its relative
        half-width cut at zero (a latency or a rate is never negative)."""
        if ci is None or not math.isfinite(ci):
            return None
        if self.is_ratio(col):
            return ratio_interval(v, ci)
        if cell in self.bounds:
            low, high = self.bounds[cell]
            return v * low, v * high
        return max(0.0, v * (1 - ci)), v * (1 + ci)

    def _number(self, col: str, v: float, ci: float | None) -> str:
        suffix = self.suffix or ("x" if col in self.ratio_cols else "")
        out = f"{v:.{self.digits}f}{suffix}"
        if ci is None:
            return out
        if self.is_ratio(col):
            lo, hi = ratio_interval(v, ci)
            return out + f" [{lo:.{self.digits}f}, {hi:.{self.digits}f}]"
        return out + f" ±{100 * ci:.1f}%"

    def mark(self, cell: tuple[str, str], run: Run, rate: bool = False) -> None:
        """Give ``cell`` (holding ``run``'s median, or its images/s: ``rate``) the run's CI and quality flags."""
        ci = run.metric("latency_ci_rel_halfwidth")
        if ci is not None and math.isfinite(ci):  # too few samples: none
            self.ci[cell] = ci
        median, low, high = (run.metric(f"latency_{k}_ms") for k in ("median", "ci_low", "ci_high"))
        if median and low is not None and high is not None and low > 0 and (run.metric("processes") or 1) <= 1:
            self.bounds[cell] = (median / high, median / low) if rate else (low / median, high / median)
        samples = run.metric("samples")
        if samples is not None:
            self.samples[cell] = samples
        self.flags[cell] = quality_flags(run.record.get("tags") or {}, run.record.get("metrics") or {})

    def geomean_of(self, col: str) -> tuple[float, float | None, bool] | None:
        """The column's geometric mean over its numbers (smoke tests left out), its CI (the log's half-width for
        ratios, else relative; None unless every cell has one) and whether some rows had no number."""
        cells = [(r, v) for r in self.rows if isinstance(v := self.cells.get((r, col)), float) and v > 0
                 and "smoke" not in self.flags.get((r, col), [])]
        if not cells:
            return None
        ratio = self.is_ratio(col)
        g, h = geomean([v for _, v in cells], [self.ci.get((r, col)) if ratio else _log_of(self.ci.get((r, col)))
                                               for r, _ in cells])
        return g, (h if ratio or h is None else math.expm1(h)), len(cells) < len(self.rows)

    def geomeans(self) -> dict[str, str]:
        """Each column's GeoMean as shown: ``*`` where some rows have no number, and for ratios ``?`` where
        its CI holds 1."""
        out = {}
        for col in self.cols:
            found = self.geomean_of(col)
            if found is None:
                out[col] = "-"
                continue
            g, ci, partial = found
            unsure = self.is_ratio(col) and ci is not None and not significant(g, ci)
            out[col] = self._number(col, g, ci) + "*" * partial + "?" * unsure
        return out

    def grid(self) -> list[list[str]]:
        body = [[self.row_name, *self.cols]] + [[r, *(self.text(r, c) for c in self.cols)] for r in self.rows]
        if self.geomean and len(self.rows) > 1:
            g = self.geomeans()
            body.append(["GeoMean", *(g[c] for c in self.cols)])
        return body

    def shown(self) -> Any:
        """The table as people read it (a pandas DataFrame of :meth:`grid`'s formatted cells, GeoMean row
        included), which the HTML is written from."""
        import pandas as pd

        g = self.grid()
        return pd.DataFrame(g[1:], columns=g[0])

    def markdown(self) -> str:
        g = self.grid()
        lines = [f"### {self.title}", "", "| " + " | ".join(g[0]) + " |", "|" + "---|" * len(g[0])]
        lines += ["| " + " | ".join(x.replace("|", "/") for x in row) + " |" for row in g[1:]]
        return "\n".join(lines) + "\n"

    def frame(self) -> Any:
        """The table for programs (a pandas DataFrame): one line per cell with its number, its CI's bounds, the
        samples behind it and its flags in columns of their own, the reason where there is no number, and the
        GeoMean rows."""
        import pandas as pd

        lines = []
        for r in self.rows:
            for c in self.cols:
                v = self.cells.get((r, c), "missing")
                number = isinstance(v, float)
                bounds = self.interval(c, v, self.ci.get((r, c)), (r, c)) if isinstance(v, float) else None
                lines.append({self.row_name: r, "column": c, "value": v if number else math.nan,
                              "ci_low": bounds[0] if bounds else math.nan, "ci_high": bounds[1] if bounds else math.nan,
                              "samples": self.samples.get((r, c), math.nan),
                              "flags": ";".join(self.flags.get((r, c), [])), "note": "" if number else v})
        if self.geomean and len(self.rows) > 1:
            for c in self.cols:
                found = self.geomean_of(c)
                if found is not None:
                    g, ci, partial = found
                    bounds = self.interval(c, g, ci)
                    lines.append({self.row_name: "GeoMean", "column": c, "value": g,
                                  "ci_low": bounds[0] if bounds else math.nan,
                                  "ci_high": bounds[1] if bounds else math.nan, "samples": math.nan,
                                  "flags": "partial" if partial else "", "note": ""})
        return pd.DataFrame(lines, columns=[self.row_name, "column", "value", "ci_low", "ci_high", "samples",
                                            "flags", "note"])

    def csv(self) -> str:
        """:meth:`frame` as CSV: numbers as numbers (the Markdown and HTML are for people)."""
        return str(self.frame().to_csv(index=False))

    def json(self) -> dict[str, Any]:
        """:meth:`frame` as JSON-ready values: the title and one object per cell (no number: null)."""
        rows = self.frame().astype(object).where(lambda f: f.notna(), None).to_dict(orient="records")
        return {"title": self.title, "rows": rows}

    def html(self) -> str:
        table = self.shown().to_html(index=False, escape=True, border=0, classes="results")
        return f"<h3>{html.escape(self.title)}</h3>{table}"


def _log_of(ci: float | None) -> float | None:
    """A relative CI half-width as a half-width of the log."""
    return None if ci is None or not math.isfinite(ci) else math.log1p(ci)


def ordered(values: list[str]) -> list[str]:
    """The distinct values in first-seen order, or by number where every one is a number (batch sizes)."""
    seen = list(dict.fromkeys(values))
    try:
        return sorted(seen, key=float)
    except ValueError:
        return seen


def varying_keys(runs: list[Run]) -> list[str]:
    """Override keys whose values differ between the sweep's jobs, in command order. Where results go
    (``tracking``) and Hydra's own settings never tell jobs apart: sweeps of one study split over several
    stores (a lane per GPU) report as one."""
    keys: dict[str, set[str]] = {}
    for run in runs:
        for o in run.overrides:
            k, _, v = o.lstrip("+~").partition("=")
            if not k.startswith(("tracking", "hydra")):
                keys.setdefault(k, set()).add(v)
    return [k for k, vals in keys.items() if len(vals) > 1]


def variant(run: Run, runs: list[Run], layout: Layout) -> str:
    """A column's name: the run's label plus the options that tell it apart and the label does not name."""
    skip = {*label_options(), *MODEL_KEYS, layout.rows, layout.cols, *per_keys(layout)}
    extra = [f"{k.rsplit('.', 1)[-1]}={run.value(k)}" for k in varying_keys(runs) if k not in skip]
    return " ".join([run.label, *extra])


def per_keys(layout: Layout) -> list[str]:
    return [k for k in layout.per.split(",") if k]


def column(run: Run, runs: list[Run], layout: Layout) -> str:
    name = run.value(layout.cols) if layout.cols else variant(run, runs, layout)
    return f"{name} [{run.sweep}]" if run.sweep else name


def separate_sweeps(per_sweep: list[tuple[str, list[Run]]], layout: Layout) -> bool:
    """Where several sweeps hold the same job (the same cell of a table), give each sweep its own
    columns rather than keep the last value; returns whether it did."""
    seen: dict[tuple[str, ...], str] = {}
    runs = [r for _, group in per_sweep for r in group]
    clash = False
    for sid, group in per_sweep:
        for r in group:
            cell = (*(r.value(k) for k in per_keys(layout)), r.value(layout.rows), column(r, runs, layout))
            clash = clash or seen.setdefault(cell, sid) != sid
    if clash:
        for sid, group in per_sweep:
            for r in group:
                r.sweep = sid
    return clash


def baseline_column(runs: list[Run], layout: Layout, baseline: str) -> str | None:
    if not baseline:
        return None
    key, _, value = normal_baseline(baseline).partition("=")
    for run in runs:
        if run.override(key) == value:
            return column(run, runs, layout)
    return None


def value_table(runs: list[Run], layout: Layout, title: str) -> Table:
    name, unit = METRICS[layout.metric]
    rows = ordered([r.value(layout.rows) for r in runs])
    cols = list(dict.fromkeys(column(r, runs, layout) for r in runs))
    if layout.cols:
        cols = ordered(cols)
    rows_name = key_name(layout.rows)
    t = Table(f"{title}: {unit}", f"{rows_name} \\ {key_name(layout.cols)}" if layout.cols else rows_name, rows, cols,
              digits={"latency": 3, "throughput": 1}.get(layout.metric, 2), geomean=not layout.cols)
    for run in runs:
        v, cell = run.metric(name), (run.value(layout.rows), column(run, runs, layout))
        t.cells[cell] = v if v is not None else run.reason
        if v is not None and layout.metric in ("latency", "throughput"):  # images/s share the median's CI
            t.mark(cell, run, rate=layout.metric == "throughput")
    return t


def speedup_table(values: Table, base_col: str, higher_is_better: bool) -> Table:
    """Each cell over its row's ``base_col``, with the ratio's CI; a smoke test on either side has no ratio."""
    t = Table(f"speed-up over {base_col}", values.row_name, values.rows, values.cols, digits=2, suffix="x",
              ratios=True)
    for r in values.rows:
        base = values.cells.get((r, base_col))
        for c in values.cols:
            v = values.cells.get((r, c), "missing")
            if isinstance(v, float) and isinstance(base, float) and v > 0 and base > 0:
                ratio = v / base if higher_is_better else base / v
                judged = judge_speedup(ratio, values.ci.get((r, c)), values.ci.get((r, base_col)),
                                       values.flags.get((r, c)), values.flags.get((r, base_col)))
                if judged.smoke:  # a handful of samples says the backend runs, not how fast
                    t.cells[(r, c)] = "smoke"
                    continue
                t.cells[(r, c)] = ratio
                if c == base_col:
                    continue
                if judged.ci is not None:
                    t.ci[(r, c)] = judged.ci
                t.flags[(r, c)] = ["noisy"] * judged.noisy + ["n.s."] * (not judged.beyond)
            else:
                t.cells[(r, c)] = v if isinstance(v, str) else "-"
    return t


def normalised_table(values: Table) -> Table:
    """Each column over its best value (1.00 = the best schedule for that column's batch size)."""
    t = Table(f"{values.title} / best in column", values.row_name, values.rows, values.cols, digits=2, geomean=False)
    for c in values.cols:
        nums = [v for r in values.rows if isinstance(v := values.cells.get((r, c)), float) and v > 0]
        for r in values.rows:
            v = values.cells.get((r, c))
            t.cells[(r, c)] = v / min(nums) if isinstance(v, float) and nums else (v if isinstance(v, str) else "-")
    return t


def batch_varies_across_columns(runs: list[Run], layout: Layout) -> bool:
    """Whether a latency table's columns hold different batch sizes (batch is neither its rows
    nor a per-table key), so that ratios between columns must be taken on throughput."""
    return (layout.metric == "latency" and layout.rows != "batch" and "batch" not in per_keys(layout)
            and len({r.value("batch") for r in runs}) > 1)


def build_tables(runs: list[Run], layout: Layout, baseline: str) -> list[Table]:
    groups = {"": runs}
    if layout.per:
        groups = {}
        for run in runs:
            groups.setdefault(" ".join(run.value(k) for k in per_keys(layout)), []).append(run)
    tables = []
    for name, group in groups.items():
        values = value_table(group, layout, name or "all runs")
        tables.append(values)
        if layout.cols:
            tables.append(normalised_table(values))
        ranked, higher = values, layout.metric == "throughput"
        if batch_varies_across_columns(group, layout):
            # latencies of different batch sizes are no speed-up: compare images/s (batch x 1000 / median ms)
            ranked, higher = value_table(group, replace(layout, metric="throughput"), name or "all runs"), True
            tables.append(ranked)
        base = baseline_column(group, layout, baseline)
        if base is not None and base in ranked.cols:
            tables.append(speedup_table(ranked, base, higher))
        for metric in layout.also:
            tables.append(value_table(group, replace(layout, metric=metric), name or "all runs"))
    return tables


def op_table(runs: list[Run], layout: Layout) -> Table | None:
    """Per-operator latency side by side (``runner.profile_ops=true`` runs: two devices, two batch
    sizes, ...), with the ratio of the last column to the first when there are two."""
    profiled = [(r, from_csv(text)) for r in runs if (text := r.record.get("artifacts", {}).get("op_profile.csv"))]
    if len(profiled) < 2:
        return None
    names = [f"{run.value('model')} {c}" + ("" if "batch=" in c else f" bs{run.value('batch')}")
             for run, _ in profiled for c in [column(run, runs, layout)]]
    if len(set(names)) < len(names):
        names = [f"{n} #{i}" for i, n in enumerate(names)]
    first = profiled[0][1]
    rows = [f"{row['node']} {row['op']}" for row in first]
    cols = names + (["ratio"] if len(names) == 2 else [])
    t = Table("per-operator latency (ms), each node alone", "node", rows, cols, digits=4, geomean=False)
    for name, (_, table) in zip(names, profiled):
        for row in table:
            t.cells[(f"{row['node']} {row['op']}", name)] = float(row["latency_ms"])
    if len(names) == 2:
        for r in rows:
            a, b = t.cells.get((r, names[0])), t.cells.get((r, names[1]))
            t.cells[(r, "ratio")] = b / a if isinstance(a, float) and isinstance(b, float) and a > 0 else "-"
    return t


def launcher_table(states: list[dict[str, Any]], jobs: list[int]) -> Table | None:
    """How each sweep ran: one job at a time, or load-aware (makespan, device busy share, the
    jobs' waits), so that the same sweep under two launchers compares in one report."""
    if not any("launcher" in s for s in states):
        return None
    cols = ["launcher", "jobs", "wall s", "makespan s", "device busy", "jobs waited s", "own work s",
            "makespan / own work"]
    t = Table("how the sweeps ran", "sweep", [s["sweep_id"] for s in states], cols, digits=1, geomean=False)
    for s, n in zip(states, jobs, strict=True):
        la, sid = s.get("launcher") or {}, s["sweep_id"]
        t.cells[(sid, "launcher")] = (f"load-aware ({la.get('cpu_workers')} CPU slots, {la.get('devices')} device(s))"
                                      if la else "one job at a time")
        t.cells[(sid, "jobs")] = str(n)
        try:
            t.cells[(sid, "wall s")] = (datetime.fromisoformat(s["ended"])
                                        - datetime.fromisoformat(s["started"])).total_seconds()
        except (KeyError, TypeError, ValueError):
            t.cells[(sid, "wall s")] = "-"
        t.cells[(sid, "makespan s")] = float(la["makespan_s"]) if la else "-"
        t.cells[(sid, "device busy")] = (", ".join(f"{u:.0%}" for u in la.get("device_utilization", []))
                                         if la else "-")
        t.cells[(sid, "jobs waited s")] = float(la["wait_s"]) if la else "-"
        work = float(la.get("work_s") or 0) if la else 0.0
        t.cells[(sid, "own work s")] = work or "-"
        t.cells[(sid, "makespan / own work")] = f"{float(la['makespan_s']) / work:.2f}x" if work else "-"
        if la.get("gpus"):
            t.cells[(sid, "launcher")] = (f"load-aware ({la.get('cpu_workers')} CPU slots, {len(la['gpus'])} GPU(s): "
                                          + ", ".join(str(g.get("index", g.get("id"))) for g in la["gpus"]) + ")")
    return t


def gpu_table(runs: list[Run]) -> Table | None:
    """Where each job of a load-aware sweep over several GPUs ran and when: its GPU (NVML index and
    UUID), its start (seconds from the launcher's start), what it waited for, computed and measured."""
    placed = [r for r in runs if r.value("param:launcher_gpu_index") != "?"]
    if len({r.value("param:launcher_gpu_index") for r in placed}) < 2:
        return None
    cols = ["gpu", "uuid", "started s", "waited s", "cpu s", "exclusive s"]
    t = Table("where each job ran (load-aware launcher)", "job", [], cols, digits=1, geomean=False)
    for run in placed:
        name = f"{run.value('model')} {run.label} bs{run.value('batch')}"
        try:
            phases = json.loads(run.record.get("artifacts", {}).get("leases.json") or "{}")
        except ValueError:
            phases = {}
        t.rows.append(name)
        t.cells.update({(name, "gpu"): run.value("param:launcher_gpu_index"),
                        (name, "uuid"): str(run.record.get("tags", {}).get("gpu_uuid", "-")),
                        (name, "started s"): float(phases.get("started_s") or 0),
                        (name, "cpu s"): float(run.record.get("metrics", {}).get("launcher_cpu_s", 0)),
                        (name, "waited s"): float(run.record.get("metrics", {}).get("launcher_wait_s", 0)),
                        (name, "exclusive s"): float(run.record.get("metrics", {}).get("launcher_exclusive_s", 0))})
    return t


#: what a run used (harness.machine.usage): column -> metric
USAGE = {"peak memory MB": "memory_peak_mb", "energy mJ / inference": "energy_per_inference_mj",
         "mean power W": "power_mean_w"}


def usage_table(runs: list[Run]) -> Table | None:
    """Peak memory, energy per inference and mean power of each finished job, where the runs measured them
    (GPU runs: NVML and PyTorch's allocator; CPU runs: the measuring process's peak RSS, no energy); None for
    a sweep without any."""
    measured = [r for r in runs if any(r.metric(m) is not None for m in USAGE.values()) or _peak_memory(r) is not None]
    if not measured:
        return None
    t = Table("what each job used (memory, energy of the timed calls)", "job", [], [*USAGE, "memory read from"],
              digits=3, geomean=False)
    for run in measured:
        name = f"{run.value('model')} {run.label} bs{run.value('batch')}"
        t.rows.append(name)
        for col, key in USAGE.items():
            v = _peak_memory(run) if key == USAGE["peak memory MB"] else run.metric(key)
            t.cells[(name, col)] = v if v is not None else "-"
        t.cells[(name, "memory read from")] = memory_source(run)
    return t


def memory_source(run: Run) -> str:
    """Where a run's peak memory came from (:data:`~harness.machine.usage.MEMORY_SOURCES`, in the meter's order):
    XLA's plan for one call, a backend's own allocator's peak (JAX's, since its process began: its compile's
    included), PyTorch's allocator's; NVML's used memory is the whole GPU's, pools a framework reserves up front
    included (JAX takes 75% of the GPU when it starts); on the CPU the measuring process's peak RSS."""
    found = next((what for key, what in MEMORY_SOURCES.items() if run.metric(key) is not None), None)
    if found is None and run.metric("memory_peak_mb") is None and _peak_memory(run) is not None:
        return "the measuring process's peak RSS (CPU)"
    return found or "-"


def _peak_memory(run: Run) -> float | None:
    """A finished run's peak memory as its summary line says it (:func:`~harness.machine.usage.peak_memory_mb`)."""
    return peak_memory_mb(run.record.get("metrics") or {}) if run.status == "FINISHED" else None


#: the environment a report shows, as the records tag it: (what, the tags that can hold it, first found)
ENVIRONMENT_TAGS = (("GPU", ("torch_device_name", "gpu_name")), ("GPU driver", ("gpu_driver",)), ("CUDA", ("cuda",)),
                    ("cuDNN", ("cudnn",)), ("GPU max SM clock, MHz", ("gpu_max_sm_clock_mhz",)),
                    ("clocks locked", ("clock_locked",)), ("CPU", ("cpu_model",)), ("host", ("hostname",)),
                    ("platform", ("platform",)), ("Python", ("python",)), ("PyTorch", ("torch",)),
                    ("NumPy", ("numpy",)), ("ONNX", ("onnx",)), ("ios-harness", ("ios_harness",)),
                    ("git commit", ("git_commit",)), ("uncommitted changes", ("git_dirty",)))
#: and as they measured it while timing (the range over the runs)
ENVIRONMENT_METRICS = (("SM clock while timed, MHz", "sm_clock_mean_mhz"), ("cores the timing ran on", "measure_cores"),
                       ("threads while timed", "measure_threads"), ("load average at the start", "load_avg_start"),
                       ("load average at the end", "load_avg_end"))


def environment_table(runs: list[Run]) -> Table | None:
    """Where the runs ran: each environment value they recorded (several where they differ), and the range of
    what they measured while timing; None without runs."""
    if not runs:
        return None
    t = Table("environment", "what", [], ["value"], geomean=False)
    for what, keys in ENVIRONMENT_TAGS:
        values = sorted({next((str(tags[k]) for k in keys if tags.get(k) not in (None, "")), "")
                         for r in runs if (tags := r.record.get("tags", {}))} - {""})
        if values:
            t.rows.append(what)
            t.cells[(what, "value")] = "; ".join(values)
    for what, key in ENVIRONMENT_METRICS:
        seen = [v for r in runs if (v := r.metric(key)) is not None]
        if seen:
            t.rows.append(what)
            low, high = min(seen), max(seen)
            t.cells[(what, "value")] = f"{low:.4g}" if low == high else f"{low:.4g} to {high:.4g}"
    return t if t.rows else None
