"""The plugin manager: loads backends from the ``harness.backends`` entry points (the
built-in ones included) and from ``HARNESS_PLUGINS``; registers their config
dataclasses with Hydra's ConfigStore before composition."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from functools import cache
from typing import NamedTuple

import pluggy

from . import hookspecs
from .backend import Backend, BackendError
from .config import BenchConfig
from .help import template
from .hookspecs import PROJECT
from .install import fit
from .machine.environment import available_devices

ENTRY_POINT_GROUP = "harness.backends"
#: the built-in run plugins (harness.builtin) by name, in the order they are registered; ``HARNESS_BLOCK_PLUGINS``
#: names those to leave out
BUILTIN = {"journal": "harness.builtin.journal", "records": "harness.builtin.records",
           "console": "harness.builtin.console", "mlflow": "harness.builtin.mlflow_delivery"}


class Broken(NamedTuple):
    """A plugin of the entry-point group that failed to load: what it points at and why it failed."""

    target: str  # the entry point's value (module or module:object)
    reason: str  # the exception, one line

    def message(self, name: str) -> str:
        return f"the plugin {name!r} ({self.target}) of the {ENTRY_POINT_GROUP!r} entry-point group failed to load: " \
            f"{self.reason}"


#: entry-point name -> its plugin's failure; the other plugins load and run
BROKEN: dict[str, Broken] = {}


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Each plugin of the entry-point group on its own: one that does not import (a third-party bug, a
    package missing from an install) is kept in :data:`BROKEN` with its reason, and every other backend
    still runs; asking for the broken one says why."""
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if pm.get_plugin(ep.name) is not None or ep.name in BROKEN:
            continue
        try:
            pm.register(ep.load(), name=ep.name)
        except Exception as exc:  # noqa: BLE001 - named in one line where it is asked for
            BROKEN[ep.name] = Broken(ep.value, f"{type(exc).__name__}: {exc}")


def _names(variable: str) -> list[str]:
    return list(filter(None, (m.strip() for m in os.environ.get(variable, "").split(","))))


@cache
def plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in _names("HARNESS_BLOCK_PLUGINS"):  # as pytest's -p no:NAME: registering it is a no-op
        pm.set_blocked(name)
    for name, path in BUILTIN.items():  # the run's journal, records, console and MLflow: plugins like any
        if not pm.is_blocked(name):
            pm.register(importlib.import_module(path), name=name)
    _load_entry_points(pm)
    for mod in _names("HARNESS_PLUGINS"):
        if pm.get_plugin(mod) is not None:  # also an entry point of that name
            continue
        try:
            module = importlib.import_module(mod)
        except ImportError as exc:
            raise BackendError(f"HARNESS_PLUGINS names the module {mod!r}, which cannot be imported ({exc}); "
                               f"fix the name or install the plugin") from None
        if not pm.is_registered(module):
            pm.register(module, name=mod)
    try:
        pm.check_pending()  # a misspelt hook name is an error, not a silently ignored function
    except pluggy.PluginValidationError as exc:
        raise BackendError(f"a plugin implements a hook the harness does not have: {exc}") from None
    return pm


@cache
def backends() -> dict[str, type[Backend]]:
    found: dict[str, type[Backend]] = {}
    owner: dict[str, str] = {}
    pm = plugin_manager()
    impls = pm.hook.harness_backends.get_hookimpls()
    for impl in impls:  # through pluggy's hook caller, one plugin at a time: an error names the plugin
        others = [other.plugin for other in impls if other is not impl]
        provided = next(iter(pm.subset_hook_caller("harness_backends", remove_plugins=others)()), None) or []
        if not isinstance(provided, (list, tuple)):
            raise BackendError(f"plugin {impl.plugin_name!r}: harness_backends() must return a list of Backend "
                               f"classes, not {provided!r}")
        for cls in provided:
            where = f"plugin {impl.plugin_name!r}"
            if not (isinstance(cls, type) and issubclass(cls, Backend)):
                raise BackendError(f"{where} returned {cls!r}, which is not a harness.backend.Backend subclass")
            if not cls.name:
                raise BackendError(f"{where}: backend class {cls.__name__} has an empty name")
            if cls.name in found and found[cls.name] is not cls:
                raise BackendError(f"{where} and {owner[cls.name]} both provide a backend named {cls.name!r}")
            found[cls.name], owner[cls.name] = cls, where
    return dict(sorted(found.items()))


def label_options() -> tuple[str, ...]:
    """``backend`` and every ``backend.<option>`` that some backend's label already names."""
    return ("backend", *sorted({f"backend.{o}" for cls in backends().values() for o in cls.label_options}))


def metric_groups() -> dict[str, tuple[str, ...]]:
    """The backends' own MLflow metric sections (name -> prefixes), merged."""
    merged: dict[str, tuple[str, ...]] = {}
    for cls in backends().values():
        for group, prefixes in cls.metric_groups.items():
            merged[group] = tuple(dict.fromkeys((*merged.get(group, ()), *prefixes)))
    return merged


def aliases() -> dict[str, str]:
    """Older names of backends (each backend's ``aliases``) -> their names."""
    return {alias: name for name, cls in backends().items() for alias in cls.aliases}


def get_backend(name: str) -> type[Backend]:
    name = aliases().get(name, name)
    try:
        return backends()[name]
    except KeyError:
        if name in BROKEN:
            raise BackendError(BROKEN[name].message(name)) from None
        raise BackendError(f"unknown backend {name!r}; choose one of: {', '.join(backends())}") from None


def register_configs() -> None:
    """Store the schema and every backend's dataclass as ``backend/<name>`` (before Hydra composes)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="bench_schema", node=BenchConfig)

    cs.store(group="hydra/help", name="harness", node={"app_name": "harness", "header": "", "footer": "",
                                                       "template": template(backends())})
    for name, cls in backends().items():
        cs.store(group="backend", name=name, node=cls.config_class(name=name))


def backend_table() -> list[tuple[str, str, str, str, str, str]]:
    """(name, devices, status, install, ran on a GPU, what it runs) per backend, for ``--list-backends``:
    "ready" only when a run could start here (libraries installed, a device it runs on present, build
    features); "ran on a GPU" says where this repository measured it (BENCHMARKS.md) or that its GPU path
    is tested only against fakes."""
    here = available_devices()
    rows = []
    for name, cls in backends().items():
        missing = cls.missing()
        usable = [d for d in cls.devices if d in here]
        if missing:
            status = f"not installed: needs {', '.join(missing)}"
        elif not usable:
            status = f"no device: runs on {', '.join(cls.devices)}; this machine has {', '.join(here)}"
        else:
            try:
                why = cls.not_ready()
            except Exception as exc:  # a broken install
                why = f"{type(exc).__name__}: {exc}"
            status = f"not ready: {why}" if why else f"ready ({', '.join(usable)})"
        install = fit(cls.install or (f"pip install -e '.[{cls.extra}]'" if cls.extra else "(core)"))
        gpu = cls.gpu_run or ("fakes only" if "cuda" in cls.devices else "-")
        rows.append((name, ",".join(cls.devices), status, install, gpu, cls.runs))
    rows += [(name, "-", f"broken: {b.reason}", "-", "-", "its plugin did not load")
             for name, b in sorted(BROKEN.items()) if name not in backends()]
    return rows


def check_runnable(backend: str | type[Backend], device: str, ready: bool = True) -> None:
    """Raise the error a run of ``backend`` (a name or its class) on ``device`` would stop with before any work:
    its library missing (MissingDependency), a device it does not run on, and with ``ready`` a build feature it
    lacks (BackendError). The same checks as ``--list-backends``."""
    cls = get_backend(backend) if isinstance(backend, str) else backend
    cls.check_installed()
    if device not in cls.devices:
        raise BackendError(f"backend {cls.name!r} does not run on {device} (it supports: {', '.join(cls.devices)})")
    why = cls.not_ready() if ready else None
    if why:
        raise BackendError(f"backend {cls.name!r} is not ready here: {why}")
