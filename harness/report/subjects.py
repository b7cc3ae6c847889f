"""What ``python -m harness.report --compare`` compares, and what ``python -m harness.report`` alone lists: sweeps
(by id, or a study's newest), single runs (by record id or a prefix of it, or by MLflow run id) and ``latest``.
A single run's record is a :class:`Run` of its own; a sweep gives its jobs."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..records import sweeps
from .runs import Run, find_sweep, load_runs, tracker_of

MIN_PREFIX = 6  # a record id may be shortened to a unique prefix of this many characters or more, as git's


@dataclass
class Subject:
    """One side of a comparison: its name as the table's title says it, and its runs."""

    name: str
    runs: list[Run]
    sweep_id: str = ""  # where it is a sweep


def _records(results_dir: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every record kept under the results folder (delivered and pending), oldest first."""
    base = sweeps.records_dir(results_dir)
    found = []
    for path in [*base.glob("*.json"), *base.glob("pending/*.json")]:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "run_id" in data and "created" in data:
            found.append((path, data))
    return sorted(found, key=lambda pd: str(pd[1]["created"]))


def _of_record(results_dir: str | Path, record: dict[str, Any]) -> Subject:
    """A record's subject: the sweep it was a job of, else the single run."""
    sweep_id = (record.get("tracking") or {}).get("sweep_id")
    if sweep_id:
        state = find_sweep(results_dir, sweep_id)
        return Subject(f"sweep {sweep_id}", load_runs(results_dir, state), sweep_id)
    return Subject(f"run {record['run_id'][:12]}", [Run(record, [])])


def find_subject(results_dir: str | Path, name: str) -> Subject:
    """``latest`` (the newest record's run or sweep), a sweep id or study, a record id (or a unique prefix of at
    least :data:`MIN_PREFIX` characters) or an MLflow run id; otherwise a ConfigError that lists what exists."""
    records = _records(results_dir)
    if name == "latest":
        if not records:
            raise ConfigError(f"latest: no runs under {sweeps.records_dir(results_dir)}")
        return _of_record(results_dir, records[-1][1])
    try:
        state = find_sweep(results_dir, name)
        return Subject(f"sweep {state['sweep_id']}", load_runs(results_dir, state), state["sweep_id"])
    except ConfigError:
        pass
    exact = [r for _, r in records if name in (r["run_id"], r.get("mlflow_run_id"))]
    prefix = [r for _, r in records if len(name) >= MIN_PREFIX and r["run_id"].startswith(name)]
    matches = exact or prefix
    if len(matches) > 1:
        raise ConfigError(f"{name!r} is the start of {len(matches)} run ids: give more of it")
    if matches:
        return Subject(f"run {matches[0]['run_id'][:12]}", [Run(matches[0], [])])
    remote = _mlflow_run(results_dir, name)
    if remote is not None:
        return Subject(f"run {name[:12]}", [Run(remote, [])])
    raise ConfigError(f"no sweep, study or run named {name!r} under {results_dir}; what there is: "
                      f"python -m harness.report --results-dir {results_dir}")


def _mlflow_run(results_dir: str | Path, run_id: str) -> dict[str, Any] | None:
    """The record of an MLflow run (one uploaded from elsewhere) by its id."""
    t = tracker_of(results_dir)
    if t is None:
        return None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return json.loads(Path(t.client.download_artifacts(run_id, "record.json", tmp)).read_text())
    except Exception:  # not a run of this store, or one without a record
        return None


def listing(results_dir: str | Path, limit: int = 10) -> list[str]:
    """The newest sweeps (id, status, start, command) and single runs (record id, start, name, status, median),
    so a user can pick what to report or compare."""
    lines = []
    states = sorted(sweeps.states(results_dir), key=lambda s: str(s.get("started", "")))[-limit:]
    if states:
        lines.append("sweeps (python -m harness.report <id>; --compare <id> <id>):")
        for s in reversed(states):
            started = str(s.get("started", ""))[:16].replace("T", " ")
            lines.append(f"  {s['sweep_id']}  {started}  {s.get('status', ''):<9} {s.get('study') or ''}  "
                         f"{s.get('sweep_command') or s.get('sweep_name', '')}")
    singles = [r for _, r in _records(results_dir) if not (r.get("tracking") or {}).get("sweep_id")][-limit:]
    if singles:
        lines.append("single runs (python -m harness.report --compare <id> <id>; a prefix of 6+ characters will do):")
        for r in reversed(singles):
            median = (r.get("metrics") or {}).get("latency_median_ms")
            lines.append(f"  {r['run_id'][:12]}  {str(r['created'])[:16].replace('T', ' ')}  {r.get('status', ''):<9} "
                         f"{r.get('run_name', '')}" + (f"  {median:.4g} ms" if median is not None else ""))
    return lines or [f"nothing measured under {results_dir} yet: python -m harness ... writes there"]
