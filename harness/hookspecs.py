"""The harness's plugin hooks (pluggy). This module is the whole plugin contract.

A plugin is any module (or object) with ``@hookimpl`` functions, registered through
the ``harness.backends`` entry-point group in its package metadata::

    [project.entry-points."harness.backends"]
    mybackend = "my_package.my_plugin"

Built-in backends (plugins/, installed as ``harness_plugins``) register exactly the
same way. Extra modules can be named in the ``HARNESS_PLUGINS`` environment variable
(comma-separated import paths); tests use this for crash/hang backends.
"""

from __future__ import annotations

import pluggy

PROJECT = "harness"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def harness_backends() -> list[type]:
    """Return the :class:`harness.backend.Backend` subclasses this plugin provides.

    Keep framework imports out of module import time: a backend imports its library in
    ``prepare`` so that ``--help``, config errors and other backends stay fast when it
    is missing.
    """


@hookspec
def harness_environment(device: str) -> dict[str, str]:
    """Return extra environment facts (library versions, ...) to record as run tags."""
