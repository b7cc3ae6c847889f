"""The harness's SLURM launcher (Hydra finds launchers only under the ``hydra_plugins`` namespace)."""
