"""The sweep journal as a run plugin: a rerun of a sweep reuses a job an earlier attempt finished, each job's
outcome is entered in its sweep's index, a sweep this process runs ends KILLED when a signal stops a job, and a
sweep Hydra has ended is closed (its status, its failed jobs counted, the load-aware launcher's summary added)."""

from __future__ import annotations

from ..context import RunContext, SweepEnd
from ..hookspecs import hookimpl
from ..machine.leases import read_summary
from ..records import faults, sweeps
from ..records.record import Record


@hookimpl
def harness_run_start(run: RunContext) -> Record | None:
    """The earlier record of this job if an earlier attempt of the sweep finished it (same config, code,
    device), unless ``sweep.rerun``."""
    if run.sweep is None or run.config["sweep"]["rerun"]:
        return None
    info = run.sweep.as_dict()
    entry = sweeps.finished_job(run.results_dir, info, run.config)
    record = sweeps.saved_record(run.results_dir, entry["record_id"]) if entry else None
    if record is None:
        return None
    sweeps.mark_reused(run.results_dir, info, run.config)
    return record


@hookimpl(tryfirst=True)
def harness_run_recorded(run: RunContext, record: Record) -> None:
    if run.sweep is not None:  # before the record file: killed in between, a rerun finds an entry with no
        sweeps.record_job(run.results_dir, run.sweep.as_dict(), run.config, record)  # record and measures again
        faults.point("job.indexed")


@hookimpl
def harness_run_stopped(run: RunContext, record: Record) -> None:
    if run.sweep is not None and not run.launched_apart:  # Hydra skips its end-of-sweep callback
        sweeps.close(run.results_dir, dict(run.tracking), "KILLED")


@hookimpl(tryfirst=True)
def harness_sweep_finished(sweep: SweepEnd) -> None:
    state = sweeps.end(sweep.results_dir, sweep.sweep_id) or {}
    sweep.sweep.ended = True
    faults.point("sweep.ended")
    jobs = sweeps.job_entries(sweep.results_dir, sweep.sweep_id, state.get("started"))
    sweep.sweep.failed = sum(j["status"] not in sweeps.DONE for j in jobs)
    summary = read_summary(sweep.hydra_dir)  # the load-aware launcher's makespan and device use (None elsewhere)
    if summary is not None and state:
        sweeps.add_launcher_summary(sweep.results_dir, sweep.sweep_id, summary)
