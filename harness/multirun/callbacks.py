"""Hydra callback: a sweep's start and end. At the start the sweep is named by its command
(a rerun continues it), earlier sweeps whose process died are closed as KILLED, and the store is
checked. Its end is the plugins' (:func:`~harness.hookspecs.harness_sweep_finished`: the journal
closes it, MLflow gets its records in one batch, the console prints the table). Cleanup that must
survive Ctrl-C (clock reset, records, KILLED) lives in the runner, not here."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hydra.experimental.callback import Callback

from ..config import ConfigError
from ..context import SweepEnd
from ..lifecycle import THIS, Sweep
from ..machine.environment import sweep_device
from ..plugins import plugin_manager
from ..records import faults, store, sweeps
from ..records.store import StoreError
from ..records.tracking import Tracker, mlflow_available, store_of

INFO_FILE = "harness_sweep.json"  # in Hydra's sweep dir: how each job learns its sweep


def job_sweep_info(hydra_sweep_dir: str) -> dict[str, Any]:
    """The sweep a job belongs to, as its callback wrote it (any launcher, any process)."""
    try:
        return json.loads((Path(hydra_sweep_dir) / INFO_FILE).read_text())
    except (OSError, ValueError):  # no callback ran (a custom Hydra config): a sweep of its own
        import hashlib

        path = str(Path(hydra_sweep_dir).resolve())
        return {"sweep_id": hashlib.sha1(path.encode()).hexdigest()[:12], "sweep_name": f"sweep {Path(path).name}"}


def _tracking(config: Any) -> dict[str, Any]:
    tr = config.tracking
    # the default store is left empty and found beside the results when used (they may be copied home)
    return {"enabled": bool(tr.enabled), "uri": tr.uri, "experiment": tr.experiment,
            "background": bool(tr.get("background", True))}


def _identity(config: Any) -> dict[str, str]:
    """The sweep's id, name and command (with the launcher overrides it ran under)."""
    launcher = [o for o in config.hydra.overrides.hydra if o.startswith(("hydra/launcher=", "hydra.launcher."))]
    return sweeps.sweep_identity(list(config.hydra.overrides.task), config.tracking.results_dir,
                                 sweep_device(config), launcher)


#: launchers that run several jobs at once on this machine -> the option that makes them run one at a time (Submitit's
#: local executor starts every job of the sweep at once and has none)
PARALLEL_LAUNCHERS = {"submitit_launcher.LocalLauncher": None, "joblib_launcher.JoblibLauncher": "n_jobs"}


#: SLURM launchers (Hydra's and the harness's) -> the options that give each job a GPU of its own
SLURM_LAUNCHERS = ("submitit_launcher.SlurmLauncher", "harness_slurm.slurm_launcher.SlurmLauncher")
GPU_OPTIONS = ("gpus_per_node", "gpus_per_task", "gres")


def overlapping_launcher(config: Any) -> str | None:
    """Why this sweep would measure on a GPU with other jobs at once, or None: a launcher that runs jobs in
    parallel on this machine, or SLURM jobs that ask for no GPU (SLURM then gives none, and without device
    cgroups every job sees every GPU), with a GPU in the base config or a swept device. Measurements never
    overlap in the harness's own launchers (the load-aware launcher gives each measurement the GPU alone)."""
    launcher = config.hydra.launcher
    target = str(launcher.get("_target_", ""))
    swept = [o.partition("=")[2] for o in config.hydra.overrides.get("task", [])
             if o.lstrip("+~").partition("=")[0] in ("device", "device.type")]
    devices = {sweep_device(config), *(v for o in swept for v in o.split(","))}
    if not any(d.startswith("cuda") for d in devices):
        return None
    if target.endswith(SLURM_LAUNCHERS):
        extra = launcher.get("additional_parameters") or {}
        if any(launcher.get(o) for o in GPU_OPTIONS) or any(k in extra for k in ("gres", "gpus", "gpus-per-node")):
            return None
        return ("hydra/launcher=submitit_slurm asks SLURM for no GPU, so the jobs would share whatever GPUs the node "
                "shows them: add hydra.launcher.gpus_per_node=1 (each job gets a GPU of its own through SLURM's gres)")
    kind = next((k for k in PARALLEL_LAUNCHERS if target.endswith(k)), None)
    if kind is None:
        return None
    option = PARALLEL_LAUNCHERS[kind]
    if option is not None and launcher.get(option) == 1:  # one job at a time: nothing overlaps
        return None
    name = "submitit_local" if option is None else "joblib"
    return (f"hydra/launcher={name} runs several jobs at once on this machine, so measurements on the GPU would "
            f"overlap and slow each other: use hydra/launcher=loadaware (jobs share the CPUs, each measurement has "
            f"the GPU to itself)" + (f", or run one job at a time with hydra.launcher.{option}=1" if option else ""))


class SweepCallback(Callback):
    """Owns the :class:`~harness.lifecycle.Sweep` of the multirun Hydra runs (one callback object
    sees both its start and its end)."""

    sweep: Sweep | None = None

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        overlap = overlapping_launcher(config)
        if overlap:  # before anything is written: Hydra turns a callback's exception into a warning
            print(f"error: {overlap}", file=sys.stderr)
            raise SystemExit(2)
        results_dir = config.tracking.results_dir
        info = _identity(config)
        info["study"] = str(config.get("sweep", {}).get("study", "") or "")
        info["baseline"] = str(config.get("sweep", {}).get("baseline", "") or "")  # for the end batch's speed-ups
        sweeps.reap(results_dir)
        tracking = _tracking(config)
        before = sweeps.read_state(results_dir, info["sweep_id"])
        try:
            info["started"] = sweeps.start(results_dir, info, tracking)["started"]
        except ConfigError as exc:  # the same sweep runs already: stop before any job starts. Hydra turns a
            print(f"error: {exc}", file=sys.stderr)  # callback's Exception into a warning, not a SystemExit
            raise SystemExit(2) from None
        faults.point("sweep.started")
        self.sweep = THIS.sweep = Sweep(str(results_dir), info["sweep_id"])
        Path(config.hydra.sweep.dir).mkdir(parents=True, exist_ok=True)
        # its jobs leave their records pending for the one batch the MLflow plugin sends at the end
        (Path(config.hydra.sweep.dir) / INFO_FILE).write_text(json.dumps({**info, "deliver": sweeps.DELIVER_AT_END}))
        if not tracking["enabled"] or not mlflow_available():
            return
        try:
            if tracking["background"]:  # MLflow is not imported here: the end batch makes the parent run
                problem = store.file_problem(store_of(results_dir, tracking)[0])
                if problem:
                    raise StoreError(problem)
                return
            sweeps.close_parents(results_dir)  # those of sweeps reaped above
            t = Tracker(*store_of(results_dir, tracking))
            parent = t.parent_run(info["sweep_id"], info["sweep_name"], info["sweep_command"], reopen=True)
            if info["study"]:
                t.client.set_tag(parent, "harness.study", info["study"])
            faults.point("sweep.parent")
        except StoreError as exc:  # a half-made store: fixed first, nothing measured, no trace of this attempt
            sweeps.restore(results_dir, info["sweep_id"], before)
            self.sweep.ended = True  # nothing of it is left to end
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        except Exception as exc:  # store down: jobs keep records; upload creates the parent later
            warnings.warn(f"could not create the sweep's parent run ({str(exc).splitlines()[0][:200]})",
                          stacklevel=2)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        """The sweep's end as a hook (:func:`~harness.hookspecs.harness_sweep_finished`): the journal closes it,
        MLflow sends its records, the console prints its table."""
        results_dir = config.tracking.results_dir
        sweep = self.sweep or Sweep(str(results_dir), _identity(config)["sweep_id"])
        THIS.sweep = sweep
        baseline = str(config.get("sweep", {}).get("baseline", "") or "")
        end = SweepEnd(sweep, MappingProxyType(_tracking(config)), baseline, str(config.hydra.sweep.dir))
        plugin_manager().hook.harness_sweep_finished(sweep=end)
