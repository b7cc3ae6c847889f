"""The end of a sweep as its user sees it: each job's speed-up over the sweep's baseline job
(logged on the job's MLflow run too), the table of jobs with CIs and flags, and where to look next
(the MLflow runs page, the report command). The sweep's state, jobs and parents are in
:mod:`harness.records.sweeps`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..machine.leases import summary_line
from ..machine.usage import usage_text
from ..records import background, faults
from ..records.sweeps import close_parents, job_entries, read_state, saved_record, store_of, swept_keys, untracked
from ..records.tracking import (
    Tracker,
    deliver_pending,
    known_experiment,
    mlflow_available,
    records_dir,
    runs_link,
    upload_command,
)
from ..stats import judge_speedup


def normal_baseline(baseline: str) -> str:
    """``backend:pytorch`` (no quoting needed on the command line) or ``'backend=pytorch'``."""
    return baseline if "=" in baseline or not baseline else baseline.replace(":", "=", 1)


def _baseline_entry(entry: dict[str, Any], entries: list[dict[str, Any]], baseline: str) -> dict[str, Any] | None:
    """The finished job that differs from ``entry`` only by taking ``baseline``'s value."""
    baseline = normal_baseline(baseline)
    key = baseline.split("=", 1)[0]
    want = sorted([o for o in entry.get("overrides", []) if o.split("=", 1)[0] != key] + [baseline])
    for other in entries:
        if sorted(other.get("overrides", [])) == want and other.get("status") == "FINISHED":
            return other
    return None


def _baseline_latency(entry: dict[str, Any], entries: list[dict[str, Any]], baseline: str) -> float | None:
    """The latency of ``entry``'s baseline job (see :func:`_baseline_entry`)."""
    other = _baseline_entry(entry, entries, baseline)
    return other.get("latency_median_ms") if other else None


def speedups(entries: list[dict[str, Any]], baseline: str) -> dict[str, float]:
    """Each finished job's speed-up over its baseline job (record id -> baseline / its latency)."""
    out = {}
    for e in entries:
        lat = e.get("latency_median_ms")
        base = _baseline_latency(e, entries, baseline) if baseline and e.get("status") == "FINISHED" else None
        if base and lat:
            out[e["record_id"]] = base / lat
    return out


def log_speedups(results_dir: str | Path, sweep_id: str, baseline: str) -> int:
    """Log ``speedup_vs_baseline`` on each job's MLflow run (the runs table can sort by it)."""
    state = read_state(results_dir, sweep_id) or {}
    tr = state.get("tracking") or {}
    if not baseline or not mlflow_available() or not tr.get("enabled"):
        return 0
    logged = 0
    try:
        t = Tracker(*store_of(results_dir, state))
        for record_id, x in speedups(job_entries(results_dir, sweep_id, state.get("started")), baseline).items():
            record = saved_record(results_dir, record_id)
            if record is not None and record.mlflow_run_id:
                t.client.log_metric(record.mlflow_run_id, "speedup_vs_baseline", x)
                logged += 1
    except Exception:  # the store is down: the table and the report still show it
        pass
    return logged


def send(results_dir: str | Path, sweep_id: str) -> tuple[int, int]:
    """A sweep's end batch, under the folder's upload lock (held by the caller): its pending records to MLflow,
    each store opened once; the parent runs of the sweeps that ended closed; the speed-ups over the sweep's
    baseline logged. Returns (records sent, records pending before); raises
    :class:`~harness.records.store.StoreError` when the store needs a fix (the records stay pending)."""
    sent = deliver_pending(results_dir, sweep_id)
    close_parents(results_dir)  # nothing is lost if the store is down: an upload closes it later
    log_speedups(results_dir, sweep_id, str((read_state(results_dir, sweep_id) or {}).get("baseline") or ""))
    faults.point("sweep.table")
    return sent


def send_in_background(results_dir: str | Path, sweep_id: str) -> bool:
    """Hand the sweep's end batch to a detached ``python -m harness.upload --sweep``: the command returns once the
    table is printed. False where no process could be started (the caller sends it)."""
    try:
        background.start(results_dir, "--sweep", sweep_id)
    except OSError:
        return False
    return True


def where_to_look(results_dir: str | Path, sweep_id: str, sending: bool = False) -> list[str]:
    """What to run next: the MLflow UI on the sweep's store (with the page of its runs), the upload of the
    sweep's records that could not be logged, and the report. ``sending``: a background upload has the records
    (the store is not opened here: its runs page is linked where a delivery has found the experiment before)."""
    state = read_state(results_dir, sweep_id) or {}
    lines = []
    if mlflow_available() and not untracked(state):
        uri, experiment = store_of(results_dir, state)
        exp_id = known_experiment(results_dir, uri, experiment)
        try:
            exp_id = exp_id or (None if sending else Tracker(uri, experiment).experiment_id)
            lines.append(runs_link(uri, exp_id))
        except Exception:  # store down: the pending line below says what to do
            pass
        pending = [] if sending else [
            e for e in job_entries(results_dir, sweep_id, state.get("started"))
            if (records_dir(results_dir) / "pending" / f"{e.get('record_id')}.json").exists()]
        if pending:  # the jobs said so in their own logs, which on a cluster nobody reads
            lines.append(f"pending: {len(pending)} record(s) not in MLflow yet (the store could not be reached); "
                         f"send them with: {upload_command(results_dir)}")
    lines.append(f"report: python -m harness.report {sweep_id}"
                 + ("" if Path(results_dir).resolve() == Path("results").resolve()
                    else f" --results-dir {Path(results_dir).resolve()}"))
    return lines


#: the end-of-sweep table's width in columns
TABLE_WIDTH = 100


def _speedup_cell(e: dict[str, Any], base: dict[str, Any] | None) -> str:
    """The speed-up over the baseline job, marked ``?`` where it is within the two medians' CIs
    (not significant) or either job was noisy; none where either is a smoke test."""
    lat = e.get("latency_median_ms")
    if not base or not lat or not base.get("latency_median_ms"):
        return "-"
    ratio = base["latency_median_ms"] / lat
    judged = judge_speedup(ratio, e.get("ci_rel"), base.get("ci_rel"), e.get("flags"), base.get("flags"))
    if judged.smoke:
        return "smoke"
    return f"{ratio:.2f}x" + ("?" if (judged.noisy or not judged.beyond) and base is not e else "")


def _latency_cell(e: dict[str, Any]) -> str:
    lat, ci = e.get("latency_median_ms"), e.get("ci_rel")
    if lat is None:
        return "-"
    return f"{lat:.4g}" + (f" ±{100 * ci:.1f}%" if ci is not None and math.isfinite(ci) else "")


def table_rows(entries: list[dict[str, Any]], baseline: str = "", started: str | None = None) -> list[list[str]]:
    """One row per job: number, job (the values of the swept keys, see :func:`swept_keys`), status,
    latency with its CI, speed-up over the baseline, peak memory and energy per inference, note (flags:
    noisy, capped; why a job failed)."""
    keys = swept_keys(entries)
    several_gpus = bool(gpus_used(entries))
    rows = []
    for e in entries:
        base = _baseline_entry(e, entries, baseline) if baseline and e.get("status") == "FINISHED" else None
        note = ", ".join(["reused"] * bool(started and e.get("reused_in") == started) + list(e.get("flags") or []))
        if e.get("status") != "FINISHED" and e.get("error"):
            note = str(e["error"]).splitlines()[0]
            if e.get("status") == "SKIPPED":  # why, as the report says it: not installed / not available here
                kind, _, text = note.partition(": ")
                note = f"{'not installed' if kind == 'MissingDependency' else 'not available'}: {text}"
            note = note[:60]
        given = dict(o.partition("=")[::2] for o in e.get("overrides", []))
        varying = [given[k] for k in keys if k in given]  # what tells the jobs apart
        rows.append([str(e.get("job_num", "")), " ".join(varying) or str(e.get("run_name")),
                     e.get("status", "?"), _latency_cell(e), _speedup_cell(e, base),
                     usage_text(e.get("memory_mb"), e.get("energy_mj")), note])
        if several_gpus:  # the load-aware launcher shared several GPUs out: which one measured it
            rows[-1].insert(3, str(e["gpu"]) if e.get("gpu") is not None else "-")
    return rows


def gpus_used(entries: list[dict[str, Any]]) -> list[str]:
    """The GPUs a sweep's jobs ran on, where the load-aware launcher shared out more than one."""
    used = sorted({str(e["gpu"]) for e in entries if e.get("gpu") is not None})
    return used if len(used) > 1 else []


def print_table(results_dir: str | Path, sweep_id: str, baseline: str = "") -> None:
    """The end-of-sweep table on the terminal."""
    from rich.console import Console

    state = read_state(results_dir, sweep_id) or {}
    entries = job_entries(results_dir, sweep_id, state.get("started"))
    if entries:
        Console(stderr=False, width=TABLE_WIDTH).print(sweep_table(state, sweep_id, entries, baseline))


def sweep_table(state: dict[str, Any], sweep_id: str, entries: list[dict[str, Any]], baseline: str = "") -> Any:
    """The end-of-sweep table (a rich Table); long cells wrap inside TABLE_WIDTH columns."""
    from rich.table import Table

    keys = swept_keys(entries)
    la = state.get("launcher")
    table = Table(title=f"{state.get('sweep_name', 'sweep')} ({sweep_id})"
                  + (f"\njob: {' '.join(keys)}" if keys else ""),
                  caption="\n".join(x for x in (
                      summary_line(la) if la else "",
                      "±: the median's 95% CI; ?: a speed-up within the CIs or from a noisy job"
                      + ("; smoke: too few samples or runner=quick, no speed-up"
                         if any("smoke" in (e.get("flags") or []) for e in entries) else "")
                      if baseline and any(e.get("ci_rel") is not None for e in entries) else "") if x) or None)
    speedup = f"vs {normal_baseline(baseline)}" if baseline else "speed-up"
    cols = ["#", "job", "status", "median ms", speedup, "memory, energy", "note"]
    if gpus_used(entries):
        cols.insert(3, "gpu")
    for col in cols:
        table.add_column(col, justify="right" if col in ("#", "median ms") else "left", overflow="fold")
    for row in table_rows(entries, baseline, state.get("started")):
        table.add_row(*row)
    return table
