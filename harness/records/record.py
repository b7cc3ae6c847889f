"""The record of one run: what :func:`harness.run` returns, what is saved as JSON under
``results/records/`` and what is logged to MLflow.

The JSON form is read back as plain dicts by ``harness.report`` and by the MLflow ``record.json``
artifact, and records already on disk (older ones lack keys added since) are uploaded later by
``harness.upload``; so :meth:`Record.to_dict` writes exactly the keys that were set, and
:meth:`Record.from_dict` keeps the keys it does not know.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal

Status = Literal["RUNNING", "FINISHED", "FAILED", "KILLED"]
TRANSIENT = frozenset({"extra", "stopped_by"})  # fields that are not keys of the JSON form


def now() -> str:
    """The records' time stamps: ISO 8601 in UTC (MLflow's start and end times are read from them)."""
    return datetime.now(UTC).isoformat()


@dataclass
class Measurement:
    """What one measurement produced; it crosses from the measuring child to the parent pickled,
    and the parent copies it into the run's record (:meth:`harness.records.record.Record.take`), also
    when an interrupt cut it short."""

    metrics: dict[str, float]
    env: dict[str, str]
    params: dict[str, Any]
    artifacts: dict[str, str]
    notes: list[str]
    latencies_ms: list[float]
    gpu_latencies_ms: list[float]
    device: str
    display_name: str
    graph_hash: str


@dataclass(kw_only=True)
class Record:
    """One run: its config, outcome, statistics and environment.

    A field at ``None`` (``skipped`` at False) has not been set, and :meth:`to_dict` leaves its key
    out, as the dict records before this class did: a failed run has no ``notes``, a run not yet
    in MLflow no ``mlflow_run_id``, a record of an older release no ``label`` or ``ended``.
    """

    run_id: str
    created: str
    config: dict[str, Any]  # the composed config, plain (Enums as their values)
    tracking: dict[str, Any]  # enabled, uri, experiment; in a sweep also its sweep_id, job_num, ...
    status: Status = "RUNNING"
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)  # the environment, clocks, stop reason
    params: dict[str, Any] = field(default_factory=dict)  # what the backend reports beyond the config
    artifacts: dict[str, str] = field(default_factory=dict)  # file name -> text, logged to MLflow
    run_name: str = ""
    latencies_ms: list[float] | None = None  # host time per iteration; also a cut-short run's
    gpu_latencies_ms: list[float] | None = None  # CUDA-event time, where the backend has a stream
    graph_hash: str | None = None
    notes: list[str] | None = None  # what the reader of the number must know (finished runs)
    error: str | None = None  # one line: why it failed or was killed
    detail: str | None = None  # the traceback or signal behind the error
    summary: str | None = None  # the one-line IOS summary printed on the terminal
    label: str | None = None  # the variant's name (IOS-Both, PyTorch-CUDAGraph, ...)
    ended: str | None = None
    mlflow_run_id: str | None = None
    skipped: bool = False  # returned by a sweep's rerun that reused this earlier record
    stopped_by: int | None = None  # the signal that interrupted this run (KILLED), while it is returned; not saved
    extra: dict[str, Any] = field(default_factory=dict)  # keys this class does not know, kept as read

    @classmethod
    def new(cls, config: dict[str, Any], tracking: dict[str, Any], run_name: str = "") -> Record:
        """A run about to start (RUNNING), with a fresh id and the creation time."""
        return cls(run_id=uuid.uuid4().hex, created=now(), config=config, tracking=tracking, run_name=run_name)

    def take(self, result: Measurement) -> None:
        """Copy what a measurement produced (also one cut short by an interrupt); its ``env``
        joins the tags."""
        self.metrics, self.params, self.artifacts = result.metrics, result.params, result.artifacts
        self.latencies_ms, self.gpu_latencies_ms = result.latencies_ms, result.gpu_latencies_ms
        self.graph_hash = result.graph_hash
        self.tags.update(result.env)

    def end(self, status: Status, summary: str, label: str) -> None:
        """Close the run: its status (also as a tag, which MLflow can filter on), line and time."""
        self.status, self.summary, self.label, self.ended = status, summary, label, now()
        self.tags["harness.status"] = status

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the keys that were set, then the unknown ones). It shares the containers
        of this record: a latency list can hold a million samples."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in TRANSIENT}
        out = {k: v for k, v in out.items() if v is not None and not (k == "skipped" and not v)}
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        """A record as :meth:`to_dict` (or an older release) wrote it; values are taken as they are."""
        names = {f.name for f in fields(cls)} - TRANSIENT
        missing = sorted({"run_id", "created", "config", "tracking"} - set(data))
        if missing:
            raise ValueError(f"not a harness record: it has no {', '.join(missing)}")
        return cls(**{k: v for k, v in data.items() if k in names},
                   extra={k: v for k, v in data.items() if k not in names})
