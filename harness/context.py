"""What the run hooks (:mod:`harness.hookspecs`) are told about a run: resolved once, before it starts, into
frozen values, so a plugin reads the run's config, its place in a sweep and where its record goes rather than
recomputing them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .lifecycle import Sweep
from .machine.leases import ENV_JOB
from .records.record import Record
from .records.sweeps import DELIVER_AT_END
from .spec import RunSpec


@dataclass(frozen=True)
class SweepJob:
    """A job's place in its sweep, as the sweep's callback wrote it and Hydra numbered the job. ``info`` keeps
    the whole mapping as given: it travels in the record (``tracking``) to MLflow and the sweep's journal."""

    sweep_id: str
    info: Mapping[str, Any]

    @classmethod
    def of(cls, info: Mapping[str, Any] | None) -> SweepJob | None:
        """A sweep job from its info, or None outside a sweep (no ``sweep_id``)."""
        if not info or not info.get("sweep_id"):
            return None
        return cls(str(info["sweep_id"]), MappingProxyType(dict(info)))

    @property
    def job_overrides(self) -> list[str]:
        return list(self.info.get("job_overrides", []))

    @property
    def swept(self) -> set[str]:
        """The options this sweep varies: ``a=x,y`` in its command, and a preset's sweeper parameters."""
        command = str(self.info.get("sweep_command", "")).split()
        return ({o.lstrip("+~").partition("=")[0] for o in command if "=" in o and "," in o.partition("=")[2]}
                | set(self.info.get("swept", [])))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.info)


def launched_apart() -> bool:
    """Whether this job was started by Submitit (a SLURM job, or a process of ``submitit_local``): the
    sweep is another process's, which collects each job's return, so an interrupted job (``scancel``
    sends SIGTERM) ends only itself and returns its KILLED record rather than ending the whole sweep."""
    return bool(os.environ.get("SUBMITIT_EXECUTOR"))


@dataclass(frozen=True)
class RunContext:
    """One run as the hooks see it: its resolved spec, the tracking it records under, its sweep job (None for a
    single run) and how it was started."""

    spec: RunSpec
    tracking: Mapping[str, Any]  # the record's: enabled, uri, experiment, and the sweep's info
    sweep: SweepJob | None
    run_name: str  # before the measurement names its variant (a failed run keeps it)
    quiet: bool  # nothing printed (a run from Python that asked so)
    launched_apart: bool  # a Submitit job: an interrupt ends only this job (see launched_apart)
    in_loadaware_worker: bool  # a load-aware launcher's worker: its sweep's tree ends within seconds on a stop
    background: bool = False  # its record goes to MLflow from a detached process (a single run from the CLI)

    @property
    def config(self) -> dict[str, Any]:
        return self.spec.config

    @property
    def results_dir(self) -> str:
        return str(self.spec.config["tracking"]["results_dir"])

    @property
    def tracks(self) -> bool:
        """Whether the run's record is meant for MLflow (``tracking.enabled``)."""
        return bool(self.tracking.get("enabled"))

    @property
    def batched(self) -> bool:
        """Whether the sweep sends its jobs' records to MLflow in one batch when it ends (its callback said so),
        not each job its own; a job launched apart (SLURM: another node, at another time) still sends its own."""
        return (self.sweep is not None and self.sweep.info.get("deliver") == DELIVER_AT_END
                and not self.launched_apart)

    def sends_now(self, record: Record) -> bool:
        """Whether this run's record goes to MLflow as soon as it is saved: not a sweep's batch, and not a job a
        stop interrupted inside a load-aware sweep (its records stay pending; the tree ends within seconds)."""
        stopping = record.stopped_by is not None and self.in_loadaware_worker
        return self.tracks and not self.batched and not stopping


def context(spec: RunSpec, job: SweepJob | None, run_name: str, quiet: bool, background: bool = False
            ) -> RunContext:
    """The run's context, from its spec and its sweep job (None for a single run); ``background``: the caller
    returns once the record is on disk and lets a detached process log it (where ``tracking.background``)."""
    tr = spec.config["tracking"]
    tracking = {"enabled": tr["enabled"], "uri": tr["uri"],  # empty: the store beside wherever the record is
                "experiment": tr["experiment"], **(job.info if job is not None else {})}
    return RunContext(spec, MappingProxyType(tracking), job, run_name, quiet, launched_apart(),
                      bool(os.environ.get(ENV_JOB)), background and job is None and bool(tr.get("background")))


@dataclass(frozen=True)
class SweepEnd:
    """A multirun Hydra has ended, as :func:`~harness.hookspecs.harness_sweep_finished` sees it, resolved once by
    the sweep's callback. ``sweep`` is this process's handle on it, which the plugins update in the hook's order:
    the journal ends it (``ended``, ``failed`` counted), MLflow says whether a detached upload took its end batch
    (``sending``), the console shows it."""

    sweep: Sweep
    tracking: Mapping[str, Any]  # enabled, uri, experiment, background
    baseline: str  # sweep.baseline: what the table's speed-ups are over
    hydra_dir: str  # Hydra's sweep folder (the load-aware launcher's summary is there)

    @property
    def results_dir(self) -> str:
        return self.sweep.results_dir

    @property
    def sweep_id(self) -> str:
        return self.sweep.sweep_id
