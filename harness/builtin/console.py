"""The console as a run plugin: a run's one-line summary and its latency statistics as soon as its record is
kept (before MLflow gets it), a reused job's line, and where a stopped run's record is."""

from __future__ import annotations

import signal
import sys

from ..context import RunContext, SweepEnd
from ..hookspecs import hookimpl
from ..multirun import sweep_table
from ..records.record import Record
from ..records.tracking import known_experiment, mlflow_available, records_dir, runs_link, store_of


@hookimpl(tryfirst=True)
def harness_run_finished(run: RunContext, record: Record) -> None:
    if run.quiet:
        return
    if record.skipped:
        lat = record.metrics.get("latency_median_ms", float("nan"))
        print(f"skipped: {run.run_name} finished earlier in this sweep ({lat:.4g} ms, record {record.run_id[:8]}); "
              f"sweep.rerun=true measures it again", flush=True)
        return
    if record.stopped_by is not None and not run.launched_apart:  # the stop's own line says it all
        return
    ok = record.status == "FINISHED"
    print(record.summary, file=sys.stdout if ok else sys.stderr, flush=True)
    if ok:
        print(stats_line(record, run.results_dir, delivering=run.sends_now(record)), flush=True)
    if run.sweep is None and run.sends_now(record) and mlflow_available():  # a sweep says it once, at its end
        uri, experiment = store_of(run.results_dir, dict(run.tracking))
        print(runs_link(uri, known_experiment(run.results_dir, uri, experiment)), flush=True)


@hookimpl(trylast=True)  # after the journal has ended the sweep: the last line a stopped run prints
def harness_run_stopped(run: RunContext, record: Record) -> None:
    where = f"{records_dir(run.results_dir)}" + ("/pending (python -m harness.upload logs it to MLflow)"
                                                 if not run.sends_now(record) and run.tracks else "")
    name = signal.Signals(record.stopped_by or signal.SIGINT).name
    print(f"interrupted: {record.run_name} stopped by {name}; its record is kept (status KILLED) under {where}",
          file=sys.stderr, flush=True)


def stats_line(record: Record, results_dir: str, delivering: bool = False) -> str:
    """Under the summary line, as trtexec prints: the latency statistics the run has enough samples for,
    the throughput, the CI, and where the record went (``delivering``: where it goes once MLflow has it)."""
    m = record.metrics
    parts = [f"{k} {m[f'latency_{k}_ms']:.4g}" for k in ("min", "mean", "median") if f"latency_{k}_ms" in m]
    parts += [f"{key[len('latency_'):-len('_ms')]} {m[key]:.4g}" for key in sorted(m, key=_pct)
              if _pct(key) > 0 and _pct(key) != 50]  # p50 is the median
    base = records_dir(results_dir)
    path = base / f"{record.run_id}.json"
    if not delivering and not path.exists() and (base / "pending" / path.name).exists():
        path = base / "pending" / path.name
    ci = m.get("latency_ci_rel_halfwidth")
    between = f" between {int(m['processes'])} processes" if m.get("processes", 1) > 1 else ""
    queued = m.get("gpu_latency_back_to_back_ms")
    return (f"  latency ms: {', '.join(parts)} ({int(m.get('samples', 0))} samples"
            + (f", CI +-{100 * ci:.2f}%{between}" if ci is not None else "")
            + (f"; GPU work back to back {queued:.4g}" if queued is not None else "")
            + f") | {m.get('throughput_ips', 0):.4g} images/s | record {path}")


def _pct(key: str) -> float:
    """The percentile a ``latency_p90_ms`` metric holds (0 for other keys)."""
    if not (key.startswith("latency_p") and key.endswith("_ms")):
        return 0.0
    try:
        return float(key[len("latency_p"):-len("_ms")].replace("_", "."))
    except ValueError:
        return 0.0


@hookimpl(trylast=True)
def harness_sweep_finished(sweep: SweepEnd) -> None:
    """The end-of-sweep table, then what to run next (the MLflow UI, an upload of what is pending, the report)."""
    sweep_table.print_table(sweep.results_dir, sweep.sweep_id, sweep.baseline)
    for line in sweep_table.where_to_look(sweep.results_dir, sweep.sweep_id, sending=sweep.sweep.sending):
        print(line, flush=True)
