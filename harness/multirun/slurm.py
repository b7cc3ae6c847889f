"""``hydra/launcher=submitit_slurm``: Hydra's Submitit launcher for SLURM, made to wait for every job.

Hydra's own version collects the jobs' returns in order and gives up at the first job that ended
without one (cancelled with ``scancel``, killed for memory or time, its node lost): the sweep
command stops while the other jobs still run on the cluster, the sweep's end (table, parent run)
never comes, and a rerun started then measures those jobs a second time. Here every job is waited
for; one that ended without a return is entered in the sweep as KILLED (cancelled) or FAILED, with
SLURM's account of it (``sacct``'s state) and where its log is, so the table shows it, the command
exits 1 and a rerun measures only it. A job interrupted while measuring (``scancel`` sends SIGTERM
first) records itself KILLED and returns: it needs none of this.

The configuration is Hydra's (``hydra.launcher.partition``, ``gpus_per_node``, ``timeout_min``, ...);
``hydra_plugins.harness_slurm``'s ``register`` puts the launcher behind the same name."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, SlurmQueueConf

from ..records import sweeps
from .callbacks import job_sweep_info

log = logging.getLogger(__name__)


@dataclass
class HarnessSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.harness_slurm.slurm_launcher.SlurmLauncher"


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    """Submit the jobs as one job array (Hydra's launcher settings) and wait for every one of them."""
    import submitit

    assert launcher.config is not None
    params = dict(launcher.params)
    executor = submitit.AutoExecutor(folder=params.pop("submitit_folder"), cluster="slurm",
                                     slurm_max_num_timeout=params.pop("max_num_timeout", 0))
    shared = set(OmegaConf.structured(BaseQueueConf).keys())  # the rest are SLURM's own: slurm_<name>
    executor.update_parameters(**{k if k in shared else f"slurm_{k}": v for k, v in params.items()})
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    log.info(f"Submitit 'slurm' sweep output dir : {sweep_dir}")
    nums = [initial_job_idx + i for i in range(len(job_overrides))]
    for num, overrides in zip(nums, job_overrides):
        log.info(f"\t#{num} : {' '.join(filter_overrides(overrides))}")
    why = accounting_problem()
    if why:
        log.warning(f"SLURM's accounting cannot be read ({why}): a job that ends without a result (cancelled, "
                    f"killed, its node lost) looks like one still running, and the sweep waits for it")
    state = Singleton.get_state()
    jobs = executor.map_array(launcher, [list(o) for o in job_overrides], ["hydra.sweep.dir"] * len(nums), nums,
                              [f"job_id_for_{n}" for n in nums], [state] * len(nums))
    results_dir = str(launcher.config.tracking.results_dir)
    return [_outcome(job, list(o), num, sweep_dir, results_dir) for job, o, num in zip(jobs, job_overrides, nums)]


def accounting_problem() -> str | None:
    """Why ``sacct`` (which Submitit asks for each job's state) cannot answer here, or None."""
    try:
        res = subprocess.run(["sacct", "--noheader", "--allocations", "--jobs", "1"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sacct could not run: {exc}"
    lines = (res.stderr or res.stdout).strip().splitlines()
    return (lines[-1] if lines else f"sacct exited {res.returncode}") if res.returncode != 0 else None


def _outcome(job: Any, overrides: list[str], num: int, sweep_dir: Path, results_dir: str) -> JobReturn:
    """The job's own return; for a job that ended without one, its entry in the sweep (KILLED or
    FAILED, with SLURM's reason) and the status the task function returns for a failed run."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    try:
        return job.results()[0]
    except UncompletedJobError:
        state = str(job.state)
        status = "KILLED" if state.startswith("CANCELLED") else "FAILED"
        reason = f"SlurmJobLost: SLURM job {job.job_id} ended {state} without a result (its log: {job.paths.stderr})"
    except FailedJobError as exc:  # Submitit's own code failed in the job (not the task: it records its failures)
        status, last = "FAILED", ([x for x in str(exc).strip().splitlines() if x.strip()] or ["no message"])[-1]
        reason = f"SlurmJobFailed: SLURM job {job.job_id}: {last} (its log: {job.paths.stderr})"
    log.error(f"job #{num} {' '.join(filter_overrides(overrides))}: {reason}")
    info = job_sweep_info(str(sweep_dir))
    own = sweeps.job_overrides(overrides)
    if not sweeps.entered(results_dir, info["sweep_id"], own, info.get("started")):
        sweeps.record_unmeasured_job(results_dir, {**info, "job_num": num, "job_overrides": own}, reason,
                                     status=status)
    return JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=status)
