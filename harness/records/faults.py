"""Named kill points, for the fault-injection test (tests/test_faults.py).

With ``HARNESS_KILL_AT=<point>`` (or ``<point>#<n>``: the n-th time it is reached) the
process kills itself with SIGKILL at that point, exactly as ``kill -9`` would: no cleanup,
no flush. Users never set it; unset, a point costs one environment lookup. The points sit
between the steps whose order recovery depends on (records, sweep state, store creation,
MLflow logging, parent closing); :data:`POINTS` lists them so that the test can check it
reached every one."""

from __future__ import annotations

import os
import signal

ENV = "HARNESS_KILL_AT"

#: every point, in the order a sweep followed by an upload reaches them
POINTS = (
    "sweep.started",  # the sweep's state says RUNNING; no parent run yet
    "store.creating",  # a new store's schema is being made in a temporary file
    "store.schema",  # the schema is complete in the temporary file, not yet renamed into place
    "store.created",  # the store is in place; no experiment yet
    "sweep.parent",  # the sweep's parent run exists
    "job.measured",  # a job's measurement is done, nothing of it written
    "job.indexed",  # the sweep's job entry is written, the record not yet
    "job.saved",  # the record is saved (pending), not yet in MLflow
    "log.created",  # the record's MLflow run exists (RUNNING), nothing logged to it
    "log.params",  # its params are logged
    "log.metrics",  # its metrics are logged
    "log.artifacts",  # its artifacts are logged; the run is still RUNNING
    "log.terminated",  # the run is closed; the record is still pending
    "deliver.saved",  # the record is saved as delivered and still pending too
    "sweep.ended",  # the sweep's state says it ended; its parent is still open
    "parent.closed",  # the parent run is closed; the state does not say so yet
    "sweep.table",  # everything is written; the table is not printed yet
    "upload.reaped",  # the uploader has sent the records and ended dead sweeps
)

_reached: dict[str, int] = {}


def point(name: str) -> None:
    """Die here if ``HARNESS_KILL_AT`` names this point (and its count)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    want, _, nth = spec.partition("#")
    if want != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
