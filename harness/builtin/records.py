"""The JSON records as a run plugin: each run's record under ``results/records/`` (``pending/`` while it is
meant for MLflow), written before anything is shown or sent, so nothing measured is lost."""

from __future__ import annotations

from ..context import RunContext
from ..hookspecs import hookimpl
from ..records import faults
from ..records.record import Record
from ..records.tracking import save_record


@hookimpl
def harness_run_recorded(run: RunContext, record: Record) -> None:
    save_record(record, run.results_dir, pending=run.tracks)
    faults.point("job.saved")
