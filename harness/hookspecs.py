"""The harness's plugin hooks (pluggy). The plugin contract is this hook and the class it
returns: :class:`harness.backend.Backend` (its ``prepare`` builds the runnable model; its class
attributes say the name, devices, required modules and pip extra). Its options are a dataclass
subclassing :class:`harness.config.BackendConfig` named by ``config_class``: Hydra checks their
types on the command line, the dataclass's ``check`` their values, and the backend reads them
typed as ``self.cfg`` (``class Mine(Backend[MineConfig])``).

A plugin is any module (or object) with ``@hookimpl`` functions, registered through
the ``harness.backends`` entry-point group in its package metadata::

    [project.entry-points."harness.backends"]
    mybackend = "my_package.my_plugin"

Built-in backends (plugins/, installed as ``harness_plugins``) register exactly the
same way. Extra modules can be named in the ``HARNESS_PLUGINS`` environment variable
(comma-separated import paths); tests use this for crash/hang backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .backend import Backend

PROJECT = "harness"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def harness_backends() -> list[type[Backend]]:
    """Return the :class:`harness.backend.Backend` subclasses this plugin provides, each
    with a unique, non-empty ``name`` (anything else is refused naming the plugin).

    Keep framework imports out of module import time: a backend imports its library in
    ``prepare`` so that ``--help``, config errors and other backends stay fast when it
    is missing.
    """
    raise NotImplementedError  # a specification: pluggy calls the plugins' implementations


@hookspec
def harness_report_tables(runs: list[Any], layout: Any) -> list[Any]:
    """Tables a backend adds to a sweep's report (:class:`harness.report.tables.Table`), from the
    sweep's runs (:class:`harness.report.runs.Run`) and the study's layout; an empty list when
    none of the runs is this backend's. IOS adds the finalists its search timed in one process."""
    raise NotImplementedError
