"""Sweeps that survive a crash and resume.

A sweep is named by its command, not by the time it started: the same overrides (in any
order) on the same results folder give the same sweep id, so running a killed sweep's
command again continues it. Under ``records/sweeps/<sweep_id>/`` the harness keeps

- ``sweep.json``: the sweep's state (RUNNING, FINISHED, FAILED or KILLED), the process that
  runs it and whether its MLflow parent run has been closed (``parent_closed``);
- ``jobs/<job_key>.json``: one entry per job, written after the job's record; a rerun
  skips a job whose entry says FINISHED with the same config, code version and device
  (``sweep.rerun=true`` measures it again). The end-of-sweep table is read from here.

A sweep whose process died (kill -9, power loss) is found by its dead pid and closed as
KILLED by the next sweep or by ``python -m harness.upload``; a parent run is never left
RUNNING for good.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config import ConfigError
from ..machine.environment import current_device, device_of_record, git_state
from ..machine.usage import peak_memory_mb
from ..stats import quality_flags
from . import faults
from .record import Record
from .store import StoreError
from .tracking import MAX_PARAM_LEN, Tracker, mlflow_available, records_dir, write_json
from .tracking import store_of as tracking_store

#: a sweep dict's "deliver" where its end (the Hydra callback) sends its jobs' records to MLflow in one batch
DELIVER_AT_END = "at_end"

TERMINAL = ("FINISHED", "FAILED", "KILLED")
DONE = ("FINISHED", "SKIPPED")  # a job that needs no rerun: measured, or its backend cannot run on this machine


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def job_overrides(overrides: list[str]) -> list[str]:
    """A job's own overrides: the ``sweep.*`` options steer the sweep (rerun, baseline), not the job."""
    return [o for o in overrides if not o.lstrip("+~").startswith("sweep.")]


def sweep_identity(overrides: list[str], results_dir: str | Path, device: str = "",
                   launcher: list[str] | None = None) -> dict[str, str]:
    """The sweep id of a command: its overrides (order-free; ``sweep.*`` options excluded, so
    ``sweep.rerun=true`` continues the same sweep), its results folder and the device it runs on
    (the same command on another GPU is another sweep: both are kept, as the devices study needs).
    The ``hydra/launcher`` overrides are shown in the command but leave the id alone: a sweep
    resumed under another launcher is the same sweep."""
    kept = sorted(job_overrides(overrides))
    key = "\n".join([str(Path(results_dir).resolve()), *kept] + ([f"device {device}"] if device else []))
    command = " ".join(["python -m harness -m", *(launcher or []), *overrides])
    shown = [o for o in kept if not o.lstrip("+~").startswith("tracking.")]
    return {"sweep_id": hashlib.sha1(key.encode()).hexdigest()[:12], "sweep_name": f"sweep {' '.join(shown)}"[:240],
            "sweep_command": command}


def sweep_dir(results_dir: str | Path, sweep_id: str) -> Path:
    return records_dir(results_dir) / "sweeps" / sweep_id


def read_state(results_dir: str | Path, sweep_id: str) -> dict[str, Any] | None:
    return _read(sweep_dir(results_dir, sweep_id) / "sweep.json")


def start(results_dir: str | Path, info: dict[str, str], tracking: dict[str, Any]) -> dict[str, Any]:
    """Mark the sweep RUNNING in this process (a rerun of a killed sweep takes it over; one that
    is still running elsewhere on this host is refused)."""
    old = read_state(results_dir, info["sweep_id"]) or {}
    if (old.get("status") == "RUNNING" and old.get("host") == platform.node() and old.get("pid") != os.getpid()
            and _alive(int(old.get("pid", 0)))):
        raise ConfigError(f"this sweep ({info['sweep_id']}) is already running as process {old['pid']}; "
                          f"wait for it, or stop it first (its finished jobs are kept either way)")
    now = datetime.now(UTC).isoformat()
    state = {**old, **info, "status": "RUNNING", "pid": os.getpid(), "host": platform.node(), "started": now,
             "first_started": old.get("first_started") or old.get("started") or now, "ended": None,
             "parent_closed": False, "tracking": tracking}
    write_json(sweep_dir(results_dir, info["sweep_id"]) / "sweep.json", state)
    return state


def restore(results_dir: str | Path, sweep_id: str, before: dict[str, Any] | None) -> None:
    """Undo :func:`start` of an attempt that ran nothing: the earlier state back, or no sweep at all."""
    folder = sweep_dir(results_dir, sweep_id)
    if before is not None:
        write_json(folder / "sweep.json", before)
        return
    (folder / "sweep.json").unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # empty now unless jobs of an older attempt are kept there
        folder.rmdir()


def end(results_dir: str | Path, sweep_id: str, status: str | None = None,
        ended: str | None = None) -> dict[str, Any] | None:
    """Mark the sweep ended (at ``ended``, default now); status defaults to FAILED when any job is
    not FINISHED."""
    state = read_state(results_dir, sweep_id)
    if state is None:
        return None
    if status is None:
        jobs = job_entries(results_dir, sweep_id, state.get("started"))
        status = "FINISHED" if all(j["status"] in DONE for j in jobs) else "FAILED"
    state.update(status=status, ended=ended or datetime.now(UTC).isoformat(), parent_closed=False)  # this attempt
    write_json(sweep_dir(results_dir, sweep_id) / "sweep.json", state)
    return state


def add_launcher_summary(results_dir: str | Path, sweep_id: str, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The load-aware launcher's makespan and device use into the sweep's state, which the parent run's metrics
    are made from; the state as written (None for a sweep with none)."""
    state = read_state(results_dir, sweep_id)
    if state is None:
        return None
    state["launcher"] = summary
    write_json(sweep_dir(results_dir, sweep_id) / "sweep.json", state)
    return state


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process holds the pid
        return True
    return True


def states(results_dir: str | Path) -> list[dict[str, Any]]:
    """Every sweep kept under the results folder (its ``sweep.json``), by id."""
    base = records_dir(results_dir) / "sweeps"
    return [s for p in sorted(base.glob("*/sweep.json")) if (s := _read(p))] if base.is_dir() else []


def reap(results_dir: str | Path, other_hosts: bool = False) -> list[str]:
    """Sweeps marked RUNNING whose process on this host is gone are ended as KILLED, at the time
    their last job ended (or they started); with ``other_hosts`` also every RUNNING sweep of
    another machine (results copied home: the machine's process ended with the copy)."""
    reaped = []
    for state in states(results_dir):
        if state.get("status") == "RUNNING" and (
                (state.get("host") == platform.node() and not _alive(int(state.get("pid", 0))))
                or (other_hosts and state.get("host") != platform.node())):
            jobs = job_entries(results_dir, state["sweep_id"], state.get("started"))
            last = max([str(j["ended"]) for j in jobs if j.get("ended")] + [str(state.get("started") or "")])
            end(results_dir, state["sweep_id"], "KILLED", last or None)
            reaped.append(state["sweep_id"])
    return reaped


def store_of(results_dir: str | Path, state: dict[str, Any] | None) -> tuple[str, str]:
    """(uri, experiment) of a sweep's store (see :func:`tracking.store_of`)."""
    return tracking_store(results_dir, (state or {}).get("tracking") or {})


def untracked(state: dict[str, Any]) -> bool:
    """A sweep run with ``tracking=off``: it has no MLflow parent, now or after an upload."""
    return not (state.get("tracking") or {}).get("enabled", True)


def close_parents(results_dir: str | Path, uri: str | None = None, experiment: str | None = None,
                  strict: bool = False) -> int:
    """Close the MLflow parent run of every ended sweep whose parent is still open, with the
    sweep's status and end time. Returns how many were closed; a store that is down leaves them
    for a later call (``strict``: a store that needs a fix raises :class:`StoreError`)."""
    if not mlflow_available():
        return 0
    closed = 0
    for state in states(results_dir):
        if state.get("status") not in TERMINAL or state.get("parent_closed"):
            continue
        if untracked(state):  # tracking=off: no MLflow, at upload time either
            continue
        try:
            own_uri, own_experiment = store_of(results_dir, state)
            t = Tracker(uri or own_uri, experiment or own_experiment)
            parent = t.parent_run(state["sweep_id"], state.get("sweep_name", ""), state.get("sweep_command"),
                                  started=state.get("first_started") or state.get("started"))
            t.client.set_tag(parent, "harness.sweep_status", state["status"])
            if state.get("study"):
                t.client.set_tag(parent, "harness.study", state["study"])
            t.client.set_terminated(parent, state["status"], end_time=iso_ms(state.get("ended")))
            faults.point("parent.closed")
            log_parent(results_dir, state, t, parent)
        except StoreError:
            if strict:
                raise
            continue
        except Exception:  # store down: the state stays open for the next upload
            continue
        path = sweep_dir(results_dir, state["sweep_id"]) / "sweep.json"
        now = _read(path) or {}
        if now.get("status") == state["status"] and now.get("started") == state.get("started"):  # not restarted
            now["parent_closed"] = True
            write_json(path, now)
        closed += 1
    return closed


def iso_ms(iso: str | None) -> int | None:
    """An ISO time as MLflow's milliseconds (None: MLflow takes now)."""
    return int(datetime.fromisoformat(iso).timestamp() * 1000) if iso else None


def job_key(plain: dict[str, Any]) -> str:
    """What a job measures: its config without where results go or how the sweep runs."""
    measured = {k: v for k, v in plain.items() if k not in ("tracking", "sweep")}
    return hashlib.sha1(json.dumps(measured, sort_keys=True, default=str).encode()).hexdigest()[:16]


def code_version() -> str:
    g = git_state()
    from importlib import metadata

    try:
        version = metadata.version("ios-harness")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return f"{version}+{g['git_commit'][:12]}" + ("-dirty" if g["git_dirty"] == "true" else "")


def record_job(results_dir: str | Path, sweep: dict[str, Any], plain: dict[str, Any], record: Record) -> None:
    """Index a job's outcome in its sweep (after its record is saved)."""
    metrics = record.metrics
    entry = {"record_id": record.run_id, "status": record.status, "run_name": record.run_name,
             "job_num": sweep.get("job_num"), "overrides": sweep.get("job_overrides", []),
             "latency_median_ms": metrics.get("latency_median_ms"), "throughput_ips": metrics.get("throughput_ips"),
             "optimization_cost_s": metrics.get("optimization_cost_s"), "error": record.error,
             "code": code_version(), "device": device_of_record(record), "attempt": sweep.get("started"),
             "gpu": record.params.get("launcher_gpu_index"),
             "ci_rel": metrics.get("latency_ci_rel_halfwidth"), "flags": quality_flags(record.tags, metrics),
             "memory_mb": peak_memory_mb(metrics),
             "energy_mj": metrics.get("energy_per_inference_mj"),
             "ended": datetime.now(UTC).isoformat()}
    write_json(sweep_dir(results_dir, sweep["sweep_id"]) / "jobs" / f"{job_key(plain)}.json", entry)


def record_unmeasured_job(results_dir: str | Path, sweep: dict[str, Any], error: str, status: str = "FAILED",
                          label: str = "") -> None:
    """A job with no record of its own: refused before it could run (a bad value in one of the sweep's
    combinations: FAILED; a backend not runnable here: SKIPPED), or lost on a cluster node (ended by
    SLURM without a result: KILLED or FAILED). ``error`` starts with its kind ("ConfigError: ...").
    Kept in the sweep's index, so the sweep goes on and its table and report show why."""
    overrides = sweep.get("job_overrides", [])
    key = "refused-" + hashlib.sha1(" ".join(sorted(overrides)).encode()).hexdigest()[:12]
    entry = {"record_id": key, "status": status, "run_name": " ".join(overrides), "job_num": sweep.get("job_num"),
             "overrides": overrides, "latency_median_ms": None, "label": label, "error": error,
             "attempt": sweep.get("started"), "ended": datetime.now(UTC).isoformat()}
    write_json(sweep_dir(results_dir, sweep["sweep_id"]) / "jobs" / f"{key}.json", entry)


def entered(results_dir: str | Path, sweep_id: str, overrides: list[str], attempt: str | None) -> bool:
    """Whether this attempt of the sweep has an entry for the job with these overrides (it wrote one itself
    before it was lost)."""
    return any(sorted(e.get("overrides", [])) == sorted(overrides)
               for e in job_entries(results_dir, sweep_id) if attempt is None or e.get("attempt") == attempt)


def finished_job(results_dir: str | Path, sweep: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any] | None:
    """The earlier entry of this job if it FINISHED with the same code version and device."""
    entry = _read(sweep_dir(results_dir, sweep["sweep_id"]) / "jobs" / f"{job_key(plain)}.json")
    if not entry or entry.get("status") != "FINISHED" or entry.get("code") != code_version():
        return None
    try:
        if entry.get("device") != current_device(plain):
            return None
    except Exception:  # the device cannot be named now: measure again
        return None
    return entry


def mark_reused(results_dir: str | Path, sweep: dict[str, Any], plain: dict[str, Any]) -> None:
    """Note in the job's entry that this attempt of the sweep reused it (shown in the table)."""
    path = sweep_dir(results_dir, sweep["sweep_id"]) / "jobs" / f"{job_key(plain)}.json"
    entry = _read(path)
    if entry is not None:
        entry.update(reused_in=sweep.get("started"), job_num=sweep.get("job_num", entry.get("job_num")))
        write_json(path, entry)


def close(results_dir: str | Path, tracking: dict[str, Any], status: str) -> None:
    """End a sweep now (Ctrl-C, SIGTERM: Hydra skips its end-of-sweep callback) and close its parent."""
    if read_state(results_dir, tracking["sweep_id"]) is None:  # a sweep from Python: only its parent run
        start(results_dir, {k: tracking[k] for k in ("sweep_id", "sweep_name") if k in tracking},
              {k: tracking.get(k) for k in ("enabled", "uri", "experiment")})
    end(results_dir, tracking["sweep_id"], status)
    close_parents(results_dir)


def load_record(results_dir: str | Path, record_id: str) -> dict[str, Any] | None:
    """A job's record as its JSON reads (the report takes these dicts as they are)."""
    base = records_dir(results_dir)
    return _read(base / f"{record_id}.json") or _read(base / "pending" / f"{record_id}.json")


def saved_record(results_dir: str | Path, record_id: str) -> Record | None:
    """A job's record, typed; None when it is gone or unreadable."""
    data = load_record(results_dir, record_id)
    try:
        return Record.from_dict(data) if data is not None else None
    except ValueError:  # a file that is not a record
        return None


def job_entries(results_dir: str | Path, sweep_id: str, attempt: str | None = None) -> list[dict[str, Any]]:
    """The sweep's jobs; with ``attempt`` (a start time) only those that attempt ran or reused,
    so jobs an edited preset no longer has drop out."""
    folder = sweep_dir(results_dir, sweep_id) / "jobs"
    entries = [e for p in sorted(folder.glob("*.json")) if (e := _read(p))] if folder.is_dir() else []
    if attempt:
        entries = [e for e in entries if attempt in (e.get("attempt"), e.get("reused_in"))] or entries
    return sorted(entries, key=lambda e: (e.get("job_num") is None, e.get("job_num") or 0, e.get("ended") or ""))


def log_parent(results_dir: str | Path, state: dict[str, Any], t: Any, parent: str) -> None:
    """The sweep's table on its MLflow parent run (tracker ``t``), so the parent reads at a glance: a metric
    per finished job (``median_ms/<the job's swept values>``), the load-aware launcher's summary
    (``launcher/*``) and the sweep's overrides as params."""
    from mlflow.entities import Metric, Param

    sweep_id = state["sweep_id"]
    entries = job_entries(results_dir, sweep_id, state.get("started"))
    keys = swept_keys(entries)
    now = iso_ms(state.get("ended")) or 0
    metrics = []
    for e in entries:
        if e.get("status") == "FINISHED" and e.get("latency_median_ms") is not None:
            given = dict(o.partition("=")[::2] for o in e.get("overrides", []))
            label = " ".join(f"{k}:{given[k]}" for k in keys if k in given) or str(e.get("run_name"))
            safe = "".join(c if c.isalnum() or c in "_-. :/" else "_" for c in label)[:200]
            metrics.append(Metric(f"median_ms/{safe}", float(e["latency_median_ms"]), now, 0))
    launcher = state.get("launcher")  # the load-aware launcher's makespan and device use
    if launcher:
        values = {"launcher/makespan_s": launcher["makespan_s"], "launcher/wait_s": launcher["wait_s"],
                  "launcher/work_s": launcher.get("work_s", 0.0)}
        values.update({f"launcher/device{d}_utilization": u for d, u in enumerate(launcher["device_utilization"])})
        metrics += [Metric(k, float(v), now, 0) for k, v in values.items()]
    command = str(state.get("sweep_command", ""))
    params = [Param(k.lstrip("+~")[:250], v[:MAX_PARAM_LEN])
              for k, _, v in (o.partition("=") for o in command.split() if "=" in o)]
    known = t.client.get_run(parent).data.params
    fresh = [p for p in params if p.key not in known]  # params are write-once; a rerun logs none again
    t.client.log_batch(parent, metrics=metrics[:1000], params=fresh[:100])


def swept_keys(entries: list[dict[str, Any]]) -> list[str]:
    """The override keys whose values differ between the jobs, in command order."""
    values: dict[str, set[str]] = {}
    for e in entries:
        for o in e.get("overrides", []):
            k, _, v = o.partition("=")
            values.setdefault(k, set()).add(v)
    return [k for k, vs in values.items() if len(vs) > 1]
