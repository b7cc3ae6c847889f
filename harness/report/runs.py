"""The runs of one sweep, from its JSON records (or from MLflow when the sweep ran elsewhere)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..models import MODEL_KEYS, model_label
from ..records import background, sweeps
from ..records.tracking import Tracker, mlflow_available
from .layouts import LAYOUTS


@dataclass
class Run:
    """One job of a sweep: its record (or, where the record is lost, its index entry)."""

    record: dict[str, Any]
    overrides: list[str]
    sweep: str = ""  # set where several sweeps share a report and hold the same jobs: a column per sweep

    def override(self, key: str) -> str | None:
        for o in self.overrides:
            k, _, v = o.lstrip("+~").partition("=")
            if k == key:
                return v
        return None

    def value(self, key: str) -> str:
        """A config value by dotted key (``model``, ``batch``, ``backend.r``), or a logged
        ``param:<name>`` or ``tag:<name>`` (where the config does not hold it), as text."""
        kind, _, name = key.partition(":")
        if name and kind in ("param", "tag"):
            return str(self.record.get(f"{kind}s", {}).get(name, "?"))
        if key == "model":
            model = self.record.get("config", {}).get("model")
            if not model:  # a job that never ran has only its overrides
                model = {k.removeprefix("model."): self.override(k) for k in MODEL_KEYS if self.override(k)}
                model["name"] = model.pop("model", model.get("name", "?"))
            return model_label(model)
        node: Any = self.record.get("config", {})
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None or isinstance(node, dict):  # a config group (device=cuda): its chosen name
            node = self.override(key) if self.override(key) is not None else node
        return "" if node is None else str(node)

    @property
    def status(self) -> str:
        return str(self.record.get("status", "?"))

    @property
    def label(self) -> str:
        if self.record.get("label"):
            return str(self.record["label"])
        summary = str(self.record.get("summary", ""))  # older records: "... | Optimization: X | ..."
        if "Optimization:" in summary:
            return summary.split("Optimization:", 1)[1].split("|", 1)[0].strip()
        return self.value("backend.name")

    def metric(self, name: str) -> float | None:
        v = self.record.get("metrics", {}).get(name)
        return float(v) if v is not None and self.status == "FINISHED" else None

    @property
    def reason(self) -> str:
        """Why there is no number: ``not installed: ...`` (missing software), ``not available: ...``
        (the backend cannot run here as configured) or ``failed: ...``."""
        error = str(self.record.get("error") or self.status).strip().splitlines()[0]
        kind, _, text = error.partition(": ")
        if kind == "MissingDependency":
            return f"not installed: {text}"
        if kind == "BackendError":  # cannot run as configured here (device, build feature)
            return f"not available: {text}"
        return f"failed: {text or kind}"


def _of_study(states: list[dict[str, Any]], study: str) -> list[dict[str, Any]]:
    """The sweeps of a study, oldest first."""
    return sorted((s for s in states if s.get("study") == study), key=lambda s: s.get("started") or "")


def find_sweep(results_dir: str | Path, name: str) -> dict[str, Any]:
    """A sweep's state by id, or the newest sweep of a study; the error lists what exists."""
    states = sweeps.states(results_dir)
    for s in states:
        if s["sweep_id"] == name:
            return s
    of_study = _of_study(states, name.removesuffix("_quick"))  # a preset's _quick variant is of its study
    if of_study:
        return of_study[-1]
    remote = _mlflow_sweep(results_dir, name)
    if remote is not None:
        return remote
    known = ", ".join(f"{s['sweep_id']} ({s.get('study') or s.get('sweep_name')})" for s in states) or "none"
    raise ConfigError(f"no sweep or study named {name!r} under {sweeps.records_dir(results_dir) / 'sweeps'}; "
                      f"sweeps there: {known}")


def find_sweeps(results_dir: str | Path, names: list[str]) -> list[dict[str, Any]]:
    """The sweeps named; a study whose report covers all its sweeps (``devices``: one per GPU)
    named alone gives every sweep of it, oldest first."""
    study = names[0].removesuffix("_quick") if len(names) == 1 else ""
    if study in LAYOUTS and LAYOUTS[study].combine:
        found = _of_study(sweeps.states(results_dir), study)
        if found:
            return found
    states = [find_sweep(results_dir, n) for n in names]
    return list({s["sweep_id"]: s for s in states}.values())


def tracker_of(results_dir: str | Path, state: dict[str, Any] | None = None):
    """The sweep's store, once a background upload into it from this folder has ended (it may be sending the
    very runs and parent asked for); None without MLflow or where the store is down or not made yet."""
    if not mlflow_available():
        return None
    background.wait(results_dir, take_log=False)
    uri, experiment = sweeps.store_of(results_dir, state)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists():
        return None  # never create a store just to look into it
    try:
        return Tracker(uri, experiment)
    except Exception:
        return None


def _mlflow_sweep(results_dir: str | Path, name: str) -> dict[str, Any] | None:
    """A sweep that ran elsewhere and was uploaded: its parent run, by sweep id or study."""
    t = tracker_of(results_dir)
    if t is None:
        return None
    for tag in ("harness.sweep_id", "harness.study"):
        found = t.client.search_runs([t.experiment_id], f"tags.`{tag}` = '{name}' and tags.`harness.parent` = 'true'",
                                     order_by=["attributes.start_time DESC"], max_results=1)
        if found:
            tags = found[0].data.tags
            return {"sweep_id": tags["harness.sweep_id"], "sweep_name": found[0].info.run_name,
                    "sweep_command": tags.get("harness.command", ""), "study": tags.get("harness.study", ""),
                    "status": found[0].info.status, "source": "mlflow",
                    "tracking": {"uri": t.uri, "experiment": t.experiment}}
    return None


def load_runs(results_dir: str | Path, state: dict[str, Any]) -> list[Run]:
    """Every job of the sweep, newest attempt of each, in job order."""
    if state.get("source") != "mlflow":
        runs = []
        for entry in sweeps.job_entries(results_dir, state["sweep_id"], state.get("started")):
            record = sweeps.load_record(results_dir, entry["record_id"]) or {
                "status": entry.get("status"), "error": entry.get("error"), "run_name": entry.get("run_name"),
                "label": entry.get("label"),
                "metrics": {k: entry[k] for k in ("latency_median_ms", "throughput_ips", "optimization_cost_s")
                            if entry.get(k) is not None}}
            runs.append(Run(record, entry.get("overrides", [])))
        return runs
    t = tracker_of(results_dir, state)
    children = t.client.search_runs([t.experiment_id], f"tags.`harness.sweep_id` = '{state['sweep_id']}'",
                                    order_by=["attributes.start_time ASC"])
    latest: dict[str, Run] = {}
    for child in children:
        if child.data.tags.get("harness.parent") == "true":
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = t.client.download_artifacts(child.info.run_id, "record.json", tmp)
            record = json.loads(Path(path).read_text())
        overrides = record.get("tracking", {}).get("job_overrides", [])
        latest[" ".join(sorted(overrides)) or record["run_id"]] = Run(record, overrides)
    return sorted(latest.values(), key=lambda r: r.record.get("tracking", {}).get("job_num") or 0)
