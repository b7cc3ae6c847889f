"""``hydra/launcher=loadaware``: Hydra finds launchers only under ``hydra_plugins``, so this
shell registers the config and delegates to :mod:`harness.multirun.launcher`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from harness.multirun.launcher import LoadAwareLauncherConf, launch

ConfigStore.instance().store(group="hydra/launcher", name="loadaware", node=LoadAwareLauncherConf,
                             provider="harness")


class LoadAwareLauncher(Launcher):
    def __init__(self, gpus: Any = "all", devices: int = 0, cpu_workers: int = 0, jobs: int = 0,
                 short_phase_s: float = 1.0, lane_cores: int = -1, pause: bool = True,
                 pause_limit_s: float = 300.0, progress_s: float = 30.0) -> None:
        self.gpus = gpus
        self.devices, self.cpu_workers, self.jobs, self.short_phase_s = devices, cpu_workers, jobs, short_phase_s
        self.lane_cores, self.pause, self.pause_limit_s, self.progress_s = lane_cores, pause, pause_limit_s, progress_s
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        results: Any = launch(self, job_overrides, initial_job_idx)
        return results
