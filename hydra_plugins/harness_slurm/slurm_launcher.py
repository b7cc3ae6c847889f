"""``hydra/launcher=submitit_slurm``, as the harness runs it: Hydra's Submitit SLURM launcher with its
``launch`` from :mod:`harness.multirun.slurm` (every job waited for; a job lost on the cluster entered
in the sweep). Hydra instantiates launchers only from ``hydra_plugins``, so this shell lives here."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn

#: the submitit extra is installed (Hydra's Submitit plugin): without it this module defines no launcher, so
#: Hydra's plugin discovery, which imports every hydra_plugins module, has nothing to warn about
AVAILABLE = importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is not None

if AVAILABLE:
    from harness.multirun import slurm
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher

    class SlurmLauncher(submitit_launcher.SlurmLauncher):
        def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
            return slurm.launch(self, job_overrides, initial_job_idx)


def register() -> None:
    """``hydra/launcher=submitit_slurm`` names this launcher: stored after Hydra's plugin discovery has stored
    its own (``Plugins.instance()`` runs the discovery first), so this one wins. Without the submitit extra
    there is nothing to register (Hydra says the launcher is unknown)."""
    if not AVAILABLE:
        return
    Plugins.instance().register(SlurmLauncher)
    ConfigStore.instance().store(group="hydra/launcher", name="submitit_slurm", node=slurm.HarnessSlurmConf,
                                 provider="harness")
