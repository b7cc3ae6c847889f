"""The harness's plugin hooks (pluggy).

**Backends.** The backend contract is :func:`harness_backends` and the class it returns:
:class:`harness.backend.Backend` (its ``prepare`` builds the runnable model; its class
attributes say the name, devices, required modules and pip extra). Its options are a dataclass
subclassing :class:`harness.config.BackendConfig` named by ``config_class``: Hydra checks their
types on the command line, the dataclass's ``check`` their values, and the backend reads them
typed as ``self.cfg`` (``class Mine(Backend[MineConfig])``).

A plugin is any module (or object) with ``@hookimpl`` functions, registered through
the ``harness.backends`` entry-point group in its package metadata::

    [project.entry-points."harness.backends"]
    mybackend = "my_package.my_plugin"

Built-in backends (plugins/, installed as ``harness_plugins``) register exactly the
same way. Extra modules can be named in the ``HARNESS_PLUGINS`` environment variable
(comma-separated import paths); tests use this for crash/hang backends.

**A run's life.** :func:`harness.run` measures; everything around the measurement is a plugin of the hooks
below, called in this order for every run (each gets the run's :class:`harness.context.RunContext` as ``run``, and
its :class:`harness.records.record.Record` as ``record``):

1. :func:`harness_run_start` - the first plugin that returns a record stops the run before it measures
   (the sweep journal: a rerun reuses a job an earlier attempt finished);
2. :func:`harness_run_recorded` - the record is final: plugins make it durable;
3. :func:`harness_run_finished` - plugins show and send it (a reused record comes here too, ``skipped`` set);
4. :func:`harness_run_stopped` - only for a run a signal interrupted (``record.stopped_by``).

**A sweep's end.** When Hydra has run every job of a multirun, :func:`harness_sweep_finished` gets the sweep as a
:class:`harness.context.SweepEnd` (the journal ends its state, MLflow sends its records in one batch, the console
prints its table), in the process that started it, whichever launcher ran the jobs.

The built-in ones (:mod:`harness.builtin`: the sweep journal, the JSON records, the console, MLflow) are
registered as any other plugin; ``HARNESS_BLOCK_PLUGINS=mlflow`` (comma-separated names) leaves one out, as
pytest's ``-p no:NAME`` does. A run never raises ``SystemExit``: the CLI turns a stopped run into its exit code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .backend import Backend

PROJECT = "harness"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def harness_backends() -> list[type[Backend]]:
    """Return the :class:`harness.backend.Backend` subclasses this plugin provides, each
    with a unique, non-empty ``name`` (anything else is refused naming the plugin).

    Keep framework imports out of module import time: a backend imports its library in
    ``prepare`` so that ``--help``, config errors and other backends stay fast when it
    is missing.
    """
    raise NotImplementedError  # a specification: pluggy calls the plugins' implementations


@hookspec
def harness_report_tables(runs: list[Any], layout: Any) -> list[Any]:
    """Tables a backend adds to a sweep's report (:class:`harness.report.tables.Table`), from the
    sweep's runs (:class:`harness.report.runs.Run`) and the study's layout; an empty list when
    none of the runs is this backend's. IOS adds the finalists its search timed in one process."""
    raise NotImplementedError


@hookspec(firstresult=True)
def harness_run_start(run: Any) -> Any:
    """Before the run measures: return a record to stand for it (it is not measured; the record goes on to
    :func:`harness_run_finished` with ``skipped`` set), or None. The first record returned wins."""
    raise NotImplementedError


@hookspec
def harness_run_recorded(run: Any, record: Any) -> None:
    """The run's record is final (FINISHED, FAILED or KILLED): keep it. The sweep journal enters the job first
    (``tryfirst``: killed before the record file is written, a rerun finds no record and measures again),
    then the JSON records store writes it (under ``pending/`` while it is meant for MLflow)."""
    raise NotImplementedError


@hookspec
def harness_run_finished(run: Any, record: Any) -> None:
    """The record is kept: show it and send it. The console prints its summary first (``tryfirst``), then
    MLflow gets it unless the sweep sends its records in one batch at its end (:meth:`RunContext.sends_now`)."""
    raise NotImplementedError


@hookspec
def harness_run_stopped(run: Any, record: Any) -> None:
    """A signal interrupted the run (``record.stopped_by``; status KILLED) and its record is kept: the sweep
    journal ends a sweep this process runs KILLED (Hydra skips its end), the console says where the record is."""
    raise NotImplementedError


@hookspec
def harness_sweep_finished(sweep: Any) -> None:
    """Every job of the sweep ran (or was reused or skipped); ``sweep`` is a :class:`harness.context.SweepEnd`. The
    journal ends the sweep's state first (``tryfirst``: its status, failed jobs counted, the load-aware launcher's
    summary added), then MLflow gets the sweep's records in one batch (a detached upload where
    ``tracking.background``; ``sweep.sweep.sending`` says so), then the console prints the table and what to run
    next (``trylast``). Not called for a sweep a signal ended (:func:`harness_run_stopped` ends it KILLED)."""
    raise NotImplementedError
