"""Hydra plugins of the harness (discovered by Hydra under the ``hydra_plugins`` namespace)."""
