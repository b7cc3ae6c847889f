"""A single run's record, or a sweep's end batch, sent to MLflow by a detached process, so the command returns once
the records are on disk (importing MLflow, opening a store and logging runs take seconds). A record stays in
``pending/`` until the store has it: a failed or killed upload loses nothing (``python -m harness.upload`` sends it
later, as it would after a crash).

The uploader holds a lock on its results folder from before it starts until it ends, and a run waits for it
before measuring, so its CPU work never runs beside a measurement. What it could not do (a store it could not
write) is in ``records/upload.log``, and the next run in the folder prints it (as git's background gc does)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from .tracking import records_dir

LOCK = ".uploading"  # in records/: held by a background upload
LOG = "upload.log"  # in records/: what a background upload printed (a store it could not write, say)


def start(results_dir: str | Path, *what: str) -> int:
    """Start the detached ``python -m harness.upload`` of ``what`` (``--only RUN_ID``: one pending record;
    ``--sweep ID``: a sweep's end batch); returns its pid. The lock is taken here, before the process exists, and
    handed to it, so a run that starts next cannot miss it."""
    folder = records_dir(results_dir)
    lock = _open(folder)
    if lock is None:  # the caller logs the record itself
        raise OSError(f"cannot open {folder / LOCK}")
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_DEBUG"}  # its lines read as the next run shows them
    env["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"  # MLflow's "View run ... at: <server>" per closed run
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # an earlier upload still running: this one follows it
        with open(folder / LOG, "a") as log:
            proc = subprocess.Popen([sys.executable, "-m", "harness.upload", "--results-dir", str(results_dir),
                                     *what], stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                    start_new_session=True, pass_fds=(lock,), close_fds=True)
    finally:
        os.close(lock)  # the child's copy keeps the lock until it exits
    return proc.pid


@contextlib.contextmanager
def held(results_dir: str | Path) -> Iterator[None]:
    """The folder's upload lock, held by every delivery (a run's own, a sweep's batch, ``python -m harness.upload``)
    so that two never send the same record at once: the store's look-up-then-create is not atomic, and one record
    must make one MLflow run. Where the filesystem has no locks: nothing held."""
    fd = _open(records_dir(results_dir))
    try:
        if fd is not None:
            with contextlib.suppress(OSError):  # no locks here (some network filesystems)
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _open(folder: Path) -> int | None:
    """The lock file, open for writing (an exclusive lock needs it on NFS), or None where it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None


def wait(results_dir: str | Path, take_log: bool = True) -> list[str]:
    """Return once no background upload runs for this results folder (at once where none does), with what the
    uploads since the last call said beyond their "uploaded" lines (each said once: the log is emptied; with
    ``take_log`` false it is left for a run that shows it). A lock the filesystem refuses waits for nothing."""
    folder = records_dir(results_dir)
    if not (folder / LOCK).exists():
        return []
    with held(results_dir):  # exclusive: no upload starts while the log is read and emptied
        log = folder / LOG
        if not take_log or not log.exists():
            return []
        said = log.read_text(errors="replace").splitlines()
        log.unlink(missing_ok=True)
    return [line for line in said if line.strip() and not line.startswith("uploaded ")]
