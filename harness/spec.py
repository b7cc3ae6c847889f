"""One run resolved once, in the parent: the validated typed config, the model's source, the backend's class
and the device. The measuring child receives this value (pickled) and the protocol reads it; the record's
plain config is derived from it, not kept beside it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from .backend import Backend
from .config import BenchConfig, ConfigError, check_readable, default_backend, validate
from .machine.environment import resolve_device
from .models import FormError, ModelSource, resolve
from .models.onnx_io import check_input
from .models.zoos import recurrent_layers
from .plugins import get_backend

#: the config groups a command line names presets of (``runner=quick``)
PRESET_GROUPS = ("model", "backend", "device", "runner", "tracking")


@dataclass
class RunSpec:
    """What one run is: ``cfg`` (the typed config, the backend's dataclass inside), ``model`` (its resolved
    source), ``backend`` (the plugin's class, found once) and ``device`` (``cpu`` or ``cuda``, ``auto``
    resolved)."""

    cfg: BenchConfig
    model: ModelSource
    backend: type[Backend]
    device: str

    @property
    def precision(self) -> str:
        return self.cfg.precision.value

    @cached_property
    def config(self) -> dict[str, Any]:
        """The config as plain data (Enums as their values): what the record, MLflow and a sweep's index keep."""
        return cast(dict[str, Any], OmegaConf.to_container(OmegaConf.structured(self.cfg), enum_to_str=True))

    def label(self) -> str:
        """The backend variant's name (IOS-Both, PyTorch-CUDAGraph), from the typed config alone."""
        try:
            return self.backend.label_of(self.cfg.backend)
        except Exception:  # a plugin's label_of that fails: its name, the run still goes on
            return self.backend.name

    def __getstate__(self) -> dict[str, Any]:  # the child re-derives the plain config if it needs it
        state = dict(self.__dict__)
        state.pop("config", None)
        return state


def resolve_run(cfg: Any) -> RunSpec:
    """Any config form (BenchConfig, DictConfig, dict) -> the run's :class:`RunSpec`, every value checked
    (a :class:`ConfigError` names what is wrong) before any work."""
    composed = _schema(cfg)
    if OmegaConf.select(composed, "model.name") == "onnx" and _missing(composed.model.params, "path"):
        raise ConfigError("model=onnx needs the file: add model.path=/abs/net.onnx")  # the older form, left at ???
    typed = validate(composed)  # every group's value checks, as the typed config is made
    backend = get_backend(typed.backend.name)
    backend.config_class.check_keys(vars(typed.backend).keys(), backend.name)  # `+backend.mdoe=x` slips past Hydra
    typed.tracking.results_dir = str(Path(typed.tracking.results_dir).resolve())
    check_results_dir(typed.tracking.results_dir)
    for key, path in _input_files(typed).items():  # files the child would read: checked here, before any work
        check_readable(key, path)
    source = resolve(typed.model)
    if source.kind == "onnx":
        _check_the_file(source, typed.batch, backend)
    elif source.kind == "module":
        _check_the_module(source, backend)
    device = resolve_device(typed.device.type.value)  # device=cuda without a GPU: one line before any work
    return RunSpec(typed, source, backend, device)


def _check_the_file(source: ModelSource, batch: int, backend: type[Backend]) -> None:
    """An ONNX file, read once without its weights: its input as every run of it needs it (one image input, its
    batch free or the run's, its channels and size fixed, the size asked for if one is), and, for a backend that
    takes the IR and not ONNX, an operator the import cannot take at all, named with its node. What only the
    import finds stays the child's."""
    import onnx

    from ios_core.onnx.importer import first_unsupported

    proto = onnx.load(source.ref, load_external_data=False)
    try:
        check_input(proto, f"model.path={source.ref}", batch, source.image_size)
    except FormError as exc:
        raise ConfigError(str(exc)) from None
    why = "onnx" not in backend.forms and bool(backend.forms) and first_unsupported(proto)
    if why:
        raise ConfigError(f"backend {backend.name} cannot take {source.label}: ios_core's IR, which it needs, cannot "
                          f"import it: {why}")


def _check_the_module(source: ModelSource, backend: type[Backend]) -> None:
    """A module factory for a backend that takes only the IR: a recurrent layer, which exports to an operator of
    its own, is refused here, naming the layer (made on the meta device)."""
    if "graph" not in backend.forms or "module" in backend.forms:
        return
    from ios_core.onnx.importer import SUPPORTED_OPS

    for path, op in recurrent_layers(source.ref):
        if op not in SUPPORTED_OPS:
            raise ConfigError(f"backend {backend.name} cannot take {source.label}: ios_core's IR, which it needs, "
                              f"cannot import it: its layer {path!r} (torch.nn.{op}) exports to the ONNX "
                              f"operator {op!r}, which the IR does not take; run it on backend=pytorch or "
                              f"backend=onnxruntime")


def _missing(node: Any, key: str) -> bool:
    try:
        return bool(OmegaConf.is_missing(node, key))
    except Exception:  # no such key
        return False


def _schema(cfg: Any) -> DictConfig:
    """The config under the BenchConfig schema, the backend's dataclass (its defaults) merged in."""
    if isinstance(cfg, DictConfig) and OmegaConf.get_type(cfg) is not BenchConfig:  # made without the schema
        cfg = OmegaConf.to_container(cfg)
    if isinstance(cfg, dict):  # from Python
        cfg = dict(cfg)
        named = [f"{k}={v}" for k, v in cfg.items() if k in PRESET_GROUPS and isinstance(v, str)]
        if named:  # a preset by name is the CLI's way: one line saying how to ask for it from Python
            raise ConfigError(f"{', '.join(named)}: a config group in a dict takes its values, not a preset name; "
                              f"for presets use harness.run(overrides=[{', '.join(map(repr, named))}, ...])")
        backend = get_backend(cfg.get("backend", {}).get("name") or default_backend())  # aliases resolved
        given = {**cfg.get("backend", {}), "name": backend.name}
        backend.config_class.check_keys(given.keys(), backend.name)
        cfg["backend"] = OmegaConf.merge(OmegaConf.structured(backend.config_class(name=backend.name)), given)
        return cast(DictConfig, OmegaConf.merge(OmegaConf.structured(BenchConfig), cfg))
    if not isinstance(cfg, DictConfig):
        return cast(DictConfig, OmegaConf.structured(cfg))
    return cfg


def _input_files(cfg: BenchConfig) -> dict[str, str]:
    """A backend's ``*_file`` options (a schedule to load, ...): the model's file is its source's to check."""
    return {f"backend.{key}": str(value) for key, value in vars(cfg.backend).items()
            if key.endswith("_file") and value}


def check_results_dir(path: str) -> None:
    """Fail before any work when the results folder, or the folders its records go to, cannot be written."""
    root = Path(path)
    for folder in (root, root / "records", root / "records" / "pending"):
        if folder != root and not folder.is_dir():  # made when a record is saved, in a folder already probed
            break
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as exc:
            where = "" if folder == root else f" (its {folder.relative_to(root)} folder)"
            raise ConfigError(f"tracking.results_dir={path} cannot be written{where}: {exc.strerror or exc}; "
                              f"choose a writable folder") from None
