"""Durable records and MLflow tracking.

Every finished measurement (failed ones too) is first written as a JSON record under
``results/records/pending/``; it moves to ``results/records/`` once MLflow has it. If
the store cannot be reached, or MLflow is not installed (the lent GPU machine), the
record stays pending and ``python -m harness.upload`` sends it later: nothing measured
is lost. A sweep is a parent run (found or created by its sweep id) with child runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import warnings
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ios_core.plotting import pyplot, render

from ..config import TrackingConfig
from ..plugins import metric_groups
from . import faults, store
from .record import Record

MAX_PARAM_LEN = 6000

# The metrics a reader compares first keep plain names; the rest get a prefix, which MLflow's chart
# view folds into one section each (MLflow 3.17 puts the plain ones in "Model metrics", after those
# sections). Records keep the plain names of all metrics; only the MLflow keys are grouped.
KEY_METRICS = ("latency_median_ms", "latency_p90_ms", "latency_p99_ms", "throughput_ips",
               "optimization_cost_s", "speedup_vs_baseline")
METRIC_GROUPS = (("latency", ("latency_", "gpu_latency_")),
                 ("schedule", ("predicted_", "prediction_")),  # a backend's predictions (protocol.prediction_error)
                 ("profile", ("trace_", "op_profile_")),
                 ("usage", ("memory_", "energy_", "power_")),  # harness.machine.usage
                 ("launcher", ("launcher_",)),
                 ("device", ("sm_clock", "temperature", "throttle", "clock_")))


# Marks the experiment as model training (MLflow 3's kind tag). MLflow 3.17's UI still opens a bare
# experiment link on its GenAI overview: every link the harness prints asks for the runs table itself (RUNS_PAGE)
EXPERIMENT_KIND, CLASSIC = "mlflow.experimentKind", "custom_model_development"
# The runs table's columns: MLflow 3.17 takes no columns from a page's address, but a "shared view" (an experiment
# tag mlflow.sharedViewState.<key>, a JSON view state) opens with ?viewStateShareKey=<key>: the headline metrics
VIEW_KEY = "harness"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
VIEW_STATE = json.dumps({"selectedColumns": [f"metrics.`{name}`" for name in KEY_METRICS]})
#: the experiment's runs table with the headline metrics as columns (the model-training workflow, the shared view)
RUNS_PAGE = f"runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
#: in the results folder, beside records/ (whose JSON files are records): each store's experiment ids as the last
#: delivery found them, so a run can print its runs page without opening the store (importing MLflow alone is 2 s)
EXPERIMENTS = "experiments.json"


def runs_link(uri: str, experiment_id: str | None) -> str:
    """Where the runs are: the command that serves a local store and the runs page's address (the UI's home,
    which lists the experiments, until an experiment id is known), or the remote store's page."""
    page = f"#/experiments/{experiment_id}/{RUNS_PAGE}" if experiment_id else ""
    if uri.startswith("sqlite:"):
        return f"runs: mlflow ui --backend-store-uri {uri}  then  http://127.0.0.1:5000/{page}"
    return f"runs: {uri.rstrip('/')}/{page}"


def _experiments(results_dir: str | Path) -> dict[str, str]:
    """The results folder's remembered experiment ids (store and experiment name -> id); empty where none are."""
    try:
        seen = json.loads((Path(results_dir) / EXPERIMENTS).read_text())
    except (OSError, ValueError):
        return {}
    return seen if isinstance(seen, dict) else {}


def known_experiment(results_dir: str | Path, uri: str, experiment: str) -> str | None:
    """The id of ``experiment`` in the store ``uri`` as a delivery from this results folder last saw it."""
    return _experiments(results_dir).get(f"{uri} {experiment}")


def _remember_experiment(results_dir: str | Path, uri: str, experiment: str, experiment_id: str) -> None:
    seen = _experiments(results_dir)
    if seen.get(f"{uri} {experiment}") != experiment_id:
        write_json(Path(results_dir) / EXPERIMENTS, {**seen, f"{uri} {experiment}": experiment_id})


def metric_sections() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The harness's metric sections and each backend's own (``Backend.metric_groups``)."""
    return (*METRIC_GROUPS, *metric_groups().items())


def mlflow_metric_key(name: str, sections: tuple[tuple[str, tuple[str, ...]], ...] | None = None) -> str:
    """``latency_median_ms`` stays; ``latency_std_ms`` becomes ``latency/latency_std_ms``, the
    search counters ``schedule/...``, the rest of the run's facts ``run/...`` (``sections``: from
    :func:`metric_sections`, passed in by callers that name many metrics)."""
    if name in KEY_METRICS:
        return name
    group = next((g for g, prefixes in sections or metric_sections() if name.startswith(prefixes)), "run")
    return f"{group}/{name}"


def default_uri(results_dir: str | Path) -> str:
    return f"sqlite:///{(Path(results_dir) / 'mlflow.db').resolve()}"


def store_of(results_dir: str | Path, tracking: dict[str, Any]) -> tuple[str, str]:
    """(uri, experiment) a record or sweep logs to: as named, else the default store beside the
    results folder it is in now (a folder copied home logs there, not to the other machine's path)."""
    return tracking.get("uri") or default_uri(results_dir), tracking.get("experiment") or "harness"


def records_dir(results_dir: str | Path) -> Path:
    return Path(results_dir) / "records"


def flatten(d: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = str(d)[:MAX_PARAM_LEN]
    return out


def write_json(path: Path, obj: dict[str, Any]) -> None:
    """Write atomically and durably: a temporary file of this process, flushed to the disk, then
    renamed over the old one and the rename itself flushed (the folder), so neither a crash of the
    process nor of the machine leaves half a file or loses a record once this returns; two
    processes never share a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(obj, indent=1, default=str))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def save_record(record: Record, results_dir: str | Path, pending: bool = True) -> Path:
    base = records_dir(results_dir)
    path = (base / "pending" if pending else base) / f"{record.run_id}.json"
    write_json(path, record.to_dict())
    return path


def pending_records(results_dir: str | Path) -> list[Path]:
    return sorted((records_dir(results_dir) / "pending").glob("*.json"))


class Tracker:
    """Logs records to one MLflow store (created on first use)."""

    def __init__(self, uri: str, experiment: str):
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        if not os.environ.get("HARNESS_DEBUG"):  # its SQLAlchemy tracebacks: deliver says the cause in one line
            logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
        from mlflow.tracking import MlflowClient

        self.uri, self.experiment = uri, experiment
        with store.locked(uri):  # two first runs at once: one makes the store and the experiment, the other waits
            store.ensure(uri)  # a new local store is made whole or not at all; a half-made one is refused
            self.client = MlflowClient(tracking_uri=uri)
            exp = self.client.get_experiment_by_name(experiment)
            if exp is None:  # keep a local store's artifacts beside it, not in ./mlruns of the cwd
                db = store.sqlite_path(uri)
                loc = (db.parent / "mlartifacts").as_uri() if db is not None else None
                self.experiment_id = self.client.create_experiment(experiment, artifact_location=loc,
                                                                   tags={EXPERIMENT_KIND: CLASSIC,
                                                                         VIEW_TAG: VIEW_STATE})
                self._drop_empty_default()
            else:
                self.experiment_id = exp.experiment_id
                for tag, value in ((EXPERIMENT_KIND, CLASSIC), (VIEW_TAG, VIEW_STATE)):
                    if (exp.tags or {}).get(tag) != value:  # made by an older version
                        self.client.set_experiment_tag(self.experiment_id, tag, value)

    def _drop_empty_default(self) -> None:
        """MLflow makes an empty "Default" experiment (pointing at ./mlruns) in every new store:
        it is deleted so that the store lists only experiments with runs."""
        try:
            default = self.client.get_experiment("0")
            if default.name == "Default" and not self.client.search_runs(["0"], max_results=1):
                self.client.delete_experiment("0")
        except Exception:  # a server that refuses: a cosmetic matter only
            pass

    def parent_run(self, sweep_id: str, name: str, command: str | None = None, reopen: bool = False,
                   started: str | None = None) -> str:
        """Find or create the parent run of a sweep (idempotent across jobs, reruns and uploads);
        ``reopen`` marks a parent that an earlier, interrupted attempt closed as RUNNING again;
        a parent made now (an upload) starts when the sweep did (``started``, ISO), not now."""
        found = self.client.search_runs([self.experiment_id], f"tags.`harness.sweep_id` = '{sweep_id}' and "
                                                              f"tags.`harness.parent` = 'true'", max_results=1)
        if found:
            rid = found[0].info.run_id
            if reopen and found[0].info.status != "RUNNING":
                self.client.update_run(rid, status="RUNNING")
            return rid
        tags = {"harness.sweep_id": sweep_id, "harness.parent": "true"}
        if command:
            tags.update({"harness.command": command, "mlflow.note.content": f"`{command}`"})
        return self.client.create_run(self.experiment_id, run_name=name, tags=tags,
                                      start_time=_ms(started) if started else None).info.run_id

    def log(self, record: Record) -> str:
        from mlflow.entities import Metric, Param

        tags = {k: str(v) for k, v in record.tags.items()}
        tags["harness.record_id"] = record.run_id
        tags.update(standard_tags(record))
        sweep = record.tracking.get("sweep_id")
        if sweep:
            tags["mlflow.parentRunId"] = self.parent_run(sweep, record.tracking.get("sweep_name", sweep),
                                                         record.tracking.get("sweep_command"),
                                                         started=record.tracking.get("started"))
            tags["harness.sweep_id"] = sweep
        if record.error:
            tags["harness.error"] = record.error[:5000]
        # idempotent: a retry (store failed half-way, upload run twice) completes the run it
        # created before instead of adding another
        found = self.client.search_runs([self.experiment_id], f"tags.`harness.record_id` = '{record.run_id}'",
                                        max_results=1)
        if found:
            rid = found[0].info.run_id
            for k, v in tags.items():
                self.client.set_tag(rid, k, v)
        else:
            rid = self.client.create_run(self.experiment_id, run_name=record.run_name or None, tags=tags,
                                         start_time=_ms(record.created)).info.run_id
        faults.point("log.created")
        params = flatten(record.config)
        params.update({f"backend_out.{k}": str(v)[:MAX_PARAM_LEN] for k, v in record.params.items()})
        plist = [Param(k[:250], v) for k, v in params.items()]
        ts = _ms(record.created)
        sections = metric_sections()
        mlist = [Metric(mlflow_metric_key(k, sections), float(v), ts, 0) for k, v in record.metrics.items()]
        for i in range(0, len(plist), 100):
            self.client.log_batch(rid, params=plist[i:i + 100])
        faults.point("log.params")
        for i in range(0, len(mlist), 1000):
            self.client.log_batch(rid, metrics=mlist[i:i + 1000])
        faults.point("log.metrics")
        with tempfile.TemporaryDirectory() as tmp:
            files = {"record.json": json.dumps(record.to_dict(), indent=1, default=str),
                     "config.json": json.dumps(record.config, indent=1, default=str),
                     "env.json": json.dumps(record.tags, indent=1),
                     "latencies_ms.json": json.dumps({"host": record.latencies_ms or [],
                                                      "gpu": record.gpu_latencies_ms or []})}
            files.update(record.artifacts)
            for name, text in files.items():
                (Path(tmp) / name).write_text(text)
            png = latency_histogram(record)
            if png:
                (Path(tmp) / "latency_histogram.png").write_bytes(png)
            self.client.log_artifacts(rid, tmp)
        faults.point("log.artifacts")
        status = record.status if record.status in ("FINISHED", "KILLED") else "FAILED"
        self.client.set_terminated(rid, status, end_time=_ms(record.ended) if record.ended else None)
        faults.point("log.terminated")
        return rid


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def standard_tags(record: Record) -> dict[str, str]:
    """MLflow's own tags, where MLflow has one: the description, source, commit, user."""
    import getpass

    tags = {"mlflow.source.name": "python -m harness", "mlflow.source.type": "LOCAL"}
    note = record.summary or ""
    if record.error:
        note += f"\n\n{record.error.splitlines()[0][:2000]}"
    if note:
        tags["mlflow.note.content"] = note
    commit = record.tags.get("git_commit")
    if commit and commit != "unknown":
        tags["mlflow.source.git.commit"] = str(commit)
    try:
        tags["mlflow.user"] = getpass.getuser()
    except Exception:  # no user name in this environment
        pass
    return tags


def latency_histogram(record: Record) -> bytes | None:
    """The run's latency distribution as a PNG (None without matplotlib or samples)."""
    host = record.latencies_ms or []
    if not host:
        return None

    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist(host, bins=min(60, max(10, len(host) // 20)), alpha=0.7, label="host (sync to sync)")
    gpu = record.gpu_latencies_ms or []
    if gpu:
        ax.hist(gpu, bins=min(60, max(10, len(gpu) // 20)), alpha=0.7, label="GPU (CUDA events)")
    med = record.metrics.get("latency_median_ms")
    if med:
        ax.axvline(med, color="black", linewidth=1, label=f"median {med:.4g} ms")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("iterations")
    ax.set_title(record.run_name, fontsize=9)
    ax.legend(fontsize=8)
    return render(fig, "png")


def mlflow_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("mlflow") is not None


def upload_command(results_dir: str | Path) -> str:
    """The command that uploads this folder's pending records (names the folder unless it is the default)."""
    default = Path(TrackingConfig.results_dir).resolve()
    return "python -m harness.upload" + ("" if Path(results_dir).resolve() == default
                                         else f" --results-dir {Path(results_dir).resolve()}")


@contextlib.contextmanager
def delivering(results_dir: str | Path, what: str = "the record is") -> Iterator[None]:
    """Ctrl-C (or SIGTERM) while records go to MLflow: one line naming where they are kept and the command that
    logs them, exit 128 + the signal; under ``--debug`` the interrupt as it is."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if os.environ.get("HARNESS_DEBUG"):
            raise
        signum = int(getattr(exc, "signum", signal.SIGINT))
        print(f"interrupted: stopped by {signal.Signals(signum).name} while logging to MLflow; {what} kept in "
              f"{records_dir(results_dir)}/pending: `{upload_command(results_dir)}` logs it", file=sys.stderr,
              flush=True)
        raise SystemExit(128 + signum) from None


def root_cause(exc: BaseException) -> str:
    """The first line of what went wrong at the bottom of an exception's chain: MLflow wraps SQLAlchemy, which
    wraps the database's own error and puts its advice (``Query-invoked autoflush``) in the first line."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    text = str(exc).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    database = [line for line in lines if line.startswith("(sqlite3.") or line.startswith("(psycopg")]
    line = (database or lines or [type(exc).__name__])[0]
    return line.split(") ", 1)[1] if line.startswith("(") and ") " in line else line


def deliver(record: Record, results_dir: str | Path, trackers: dict[tuple[str, str], Tracker] | None = None
            ) -> str | None:
    """Send a saved record to its store; on success move it out of pending.
    Returns the MLflow run id, or None (with a one-line warning) when it stays pending; raises
    :class:`store.StoreError` (the record stays pending) when the store needs a fix first. ``trackers``: the
    stores opened so far, kept across a batch of records (opening one costs seconds)."""
    tr = record.tracking
    if not tr.get("enabled", True):
        return None
    if not mlflow_available():
        warnings.warn(f"MLflow is not installed: the record stays in {records_dir(results_dir)}/pending; upload it "
                      f"later with `{upload_command(results_dir)}` where MLflow is installed", stacklevel=2)
        return None
    uri, experiment = store_of(results_dir, tr)
    try:
        tracker = (trackers or {}).get((uri, experiment)) or Tracker(uri, experiment)
        if trackers is not None:
            trackers[(uri, experiment)] = tracker
        rid = tracker.log(record)
    except store.StoreError:  # the store needs a fix: the caller says so in one line (records stay pending)
        raise
    except Exception as exc:  # store down, unreachable or read-only: keep the record for a later upload
        cause = root_cause(exc)
        fix = ("make it writable, then run" if "readonly" in cause.replace("read-only", "readonly") else "run")
        warnings.warn(f"could not log to MLflow at {uri} ({cause[:200]}); the record is kept in "
                      f"{records_dir(results_dir)}/pending: {fix} `{upload_command(results_dir)}` later", stacklevel=2)
        return None
    record.mlflow_run_id = rid
    _remember_experiment(results_dir, uri, experiment, str(tracker.experiment_id))
    save_record(record, results_dir, pending=False)
    faults.point("deliver.saved")
    (records_dir(results_dir) / "pending" / f"{record.run_id}.json").unlink(missing_ok=True)
    return rid


def deliver_pending(results_dir: str | Path, sweep_id: str | None = None) -> tuple[int, int]:
    """Send the pending records (those of one sweep where ``sweep_id`` is given) in one batch, each store opened
    once; returns (sent, pending before). Each record is sent and moved on its own, so a batch killed midway
    leaves the rest pending for the next one or ``python -m harness.upload``."""
    paths = pending_records(results_dir)
    records = [Record.from_dict(json.loads(p.read_text())) for p in paths]
    if sweep_id is not None:
        records = [r for r in records if r.tracking.get("sweep_id") == sweep_id]
    trackers: dict[tuple[str, str], Tracker] = {}
    return sum(deliver(r, results_dir, trackers) is not None for r in records), len(records)
