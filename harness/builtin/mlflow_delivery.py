"""MLflow as a run plugin: a saved record goes to its store (and out of ``pending/``) unless its sweep sends
its records in one batch at its end; a single run from the command line hands it to a detached upload
(:mod:`harness.records.background`). Leave it out (``HARNESS_BLOCK_PLUGINS=mlflow``) and records stay pending
for ``python -m harness.upload``. A sweep's records go in one batch at its end: one import of MLflow and one store
opened, not one of each per job, and nothing of MLflow's beside a measurement."""

from __future__ import annotations

import sys

from ..context import RunContext, SweepEnd
from ..hookspecs import hookimpl
from ..multirun import sweep_table
from ..records import background
from ..records.record import Record
from ..records.store import StoreError
from ..records.tracking import deliver, delivering, mlflow_available, records_dir, upload_command


@hookimpl
def harness_run_finished(run: RunContext, record: Record) -> None:
    if record.skipped:  # killed while logging it earlier: the MLflow run is completed, not doubled
        if run.batched or not (records_dir(run.results_dir) / "pending" / f"{record.run_id}.json").exists():
            return
    elif not run.sends_now(record):
        return
    elif run.background and mlflow_available():  # without MLflow the inline path says so in its line
        try:
            background.start(run.results_dir, "--only", record.run_id)
            return
        except OSError:  # no process could be started: logged here instead
            pass
    with delivering(run.results_dir), background.held(run.results_dir):  # look-up-then-create, one at a time
        deliver(record, run.results_dir)


@hookimpl
def harness_sweep_finished(sweep: SweepEnd) -> None:
    """The sweep's end batch: by a detached ``python -m harness.upload --sweep`` where ``tracking.background`` (the
    command returns once the table is printed), else before it returns. A store that needs a fix, or is down,
    leaves the records pending for ``python -m harness.upload``, said in one line."""
    if not sweep.tracking["enabled"]:
        return
    if sweep.tracking["background"] and mlflow_available() \
            and sweep_table.send_in_background(sweep.results_dir, sweep.sweep_id):
        sweep.sweep.sending = True
        return
    try:
        with delivering(sweep.results_dir, "the sweep's records are"), background.held(sweep.results_dir):
            sweep_table.send(sweep.results_dir, sweep.sweep_id)  # held: a job's own record is not doubled
    except StoreError as exc:
        print(f"error: {exc}; the sweep's records stay in {records_dir(sweep.results_dir)}/pending: run "
              f"`{upload_command(sweep.results_dir)}` once it is fixed", file=sys.stderr)
