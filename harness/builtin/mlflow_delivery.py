"""MLflow as a run plugin: a saved record goes to its store (and out of ``pending/``) unless its sweep sends
its records in one batch at its end; a single run from the command line hands it to a detached upload
(:mod:`harness.records.background`). Leave it out (``HARNESS_BLOCK_PLUGINS=mlflow``) and records stay pending
for ``python -m harness.upload``."""

from __future__ import annotations

from ..context import RunContext
from ..hookspecs import hookimpl
from ..records import background
from ..records.record import Record
from ..records.tracking import deliver, delivering, mlflow_available, records_dir


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
