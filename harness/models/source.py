"""Where a run's network comes from, resolved once in the parent: a zoo model of ios_core by name, a timm or
torchvision model by architecture, an ONNX file, or a user's ``nn.Module`` factory. Resolving checks what can be
checked before any work (names, with the closest ones; files; the factory's import; the library's extra), so a
mistake is one line and exit 2; the measuring child receives the resolved :class:`ModelSource`."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ios_core.ir import GraphError
from ios_core.models import MODELS, build_model, check_params

from ..config import ConfigError, ModelConfig, check_readable
from . import zoos

#: sources that are not one of ios_core's zoo builders (``model=<source>``)
SOURCES = ("timm", "torchvision", "onnx", "module")
#: the model group's keys: the model's label names them (run names and report columns leave them out)
MODEL_KEYS = ("model", "model.name", "model.arch", "model.path", "model.target", "model.image_size")
#: the keys of the model group, and which source reads each (``name`` and ``params`` are read by all)
SOURCE_KEY = {"timm": "arch", "torchvision": "arch", "onnx": "path", "module": "target"}


@dataclass(frozen=True)
class ModelSource:
    """A resolved model source: ``kind`` is ``zoo`` or one of :data:`SOURCES`; ``ref`` the zoo builder's name,
    the architecture, the file's absolute path or ``package.module:factory``; ``image_size`` 0 for the
    model's own; ``params`` a zoo builder's keyword parameters."""

    kind: str
    ref: str
    image_size: int = 0
    params: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def label(self) -> str:
        """The model's name in run names, summary lines and reports (``inception_v3``, ``timm:deit_tiny_patch16_224``,
        ``onnx:net``, ``module:make_net``), with ``@size`` when the image size is not the model's own."""
        size = self.image_size or self.params.get("image_size")
        if self.kind == "zoo":
            base = self.ref
        elif self.kind == "onnx":
            base = f"onnx:{Path(self.ref).stem}"
        elif self.kind == "module":
            base = f"module:{self.ref.rpartition(':')[2]}"
        else:
            base = f"{self.kind}:{self.ref}"
        return f"{base}@{size}" if size else base

    @property
    def is_zoo(self) -> bool:
        return self.kind == "zoo"

    @property
    def is_module(self) -> bool:
        """A torch module is the source (timm, torchvision, a factory); zoo models and ONNX files have the IR."""
        return self.kind not in ("zoo", "onnx")


def model_label(model: dict[str, Any]) -> str:
    """The label of a model group as a record keeps it (a plain dict), without checking it."""
    return _unchecked(model).label


def _unchecked(model: dict[str, Any]) -> ModelSource:
    name = str(model.get("name") or "?")
    params = dict(model.get("params") or {})
    size = int(model.get("image_size") or 0)
    if name in SOURCES:
        ref = str(model.get(SOURCE_KEY[name]) or (params.get("path", "") if name == "onnx" else "") or "?")
        return ModelSource(name, ref, size)
    if size:
        params["image_size"] = size
    return ModelSource("zoo", name, 0, params)


def resolve(cfg: ModelConfig) -> ModelSource:
    """The checked source of a model group; a :class:`ConfigError` names what is wrong and the way out."""
    name, params = str(cfg.name), dict(cfg.params or {})
    if name not in SOURCES:
        return _zoo(cfg, name, params)
    stray = sorted(k for k in SOURCE_KEY.values() if k != SOURCE_KEY[name] and getattr(cfg, k))
    if stray:
        raise ConfigError(f"model={name} takes model.{SOURCE_KEY[name]}, not model.{stray[0]}")
    if name == "onnx":
        path = cfg.path or str(params.pop("path", "") or "")
        if path == "???":
            path = ""
        if params:
            raise ConfigError(f"model=onnx has no parameter {', '.join(sorted(params))}; it takes model.path "
                              f"and model.image_size")
        return ModelSource("onnx", _onnx_file(path, "model.path" if cfg.path else "model.params.path"),
                           cfg.image_size)
    if params:
        raise ConfigError(f"model={name} takes model.{SOURCE_KEY[name]} and model.image_size, not model.params "
                          f"({', '.join(sorted(params))}): those are the zoo builders' parameters")
    ref = _factory(cfg.target) if name == "module" else _architecture(name, cfg.arch)
    if name == "module" or cfg.image_size:  # a factory's return, a size chosen: checked here on the meta device
        wrong = zoos.check_on_meta(name, ref, cfg.image_size)
        if wrong:
            raise ConfigError(wrong)
    return ModelSource(name, ref, cfg.image_size)


def _zoo(cfg: ModelConfig, name: str, params: dict[str, Any]) -> ModelSource:
    if name not in MODELS or name == "onnx":
        zoo = [m for m in MODELS if m != "onnx"]
        close = difflib.get_close_matches(name, [*zoo, *SOURCES], n=3)
        hint = f" (closest: {', '.join(close)})" if close else ""
        raise ConfigError(f"unknown model {name!r}{hint}; choose one of: {', '.join(zoo)}, or a source: "
                          f"model=timm model.arch=NAME, model=torchvision model.arch=NAME, model=onnx "
                          f"model.path=FILE, model=module model.target=package.module:factory")
    for key in SOURCE_KEY.values():
        if getattr(cfg, key):
            raise ConfigError(f"model.{key} is for model={'/'.join(s for s, k in SOURCE_KEY.items() if k == key)}; "
                              f"model={name} is a zoo model (its parameters: model.params.*)")
    if cfg.image_size:
        params["image_size"] = cfg.image_size
    try:
        check_params(name, params)
        if "image_size" in params:  # the least size that builds is known only by building: under a second
            build_model(name, **params)
    except GraphError as exc:
        raise ConfigError(str(exc)) from None
    return ModelSource("zoo", name, 0, params)


def _onnx_file(path: str, key: str) -> str:
    if not path:
        raise ConfigError("model=onnx needs the file: add model.path=/abs/net.onnx")
    check_readable(key, Path(path).expanduser())
    resolved = str(Path(path).expanduser().resolve())
    import onnx

    try:  # the file as the measuring process would read it: refused here, before anything is spawned or recorded
        onnx.checker.check_model(resolved)
    except Exception as exc:  # noqa: BLE001 - a parse error, a graph the checker refuses
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{key}={path}: not a valid ONNX model ({first[:200]})") from None
    return resolved


def _architecture(zoo: str, arch: str) -> str:
    if not arch:
        raise ConfigError(f"model={zoo} needs the architecture: add model.arch=NAME (e.g. "
                          f"{'resnet50' if zoo == 'torchvision' else 'convnextv2_nano'})")
    names = zoos.architectures(zoo)  # MissingZoo (a UserError naming the extra) where the library is not installed
    if not zoos.known(zoo, arch.partition(".")[0]):  # timm's pretrained tags (name.tag) pick a config, not weights
        close = [n for n in names if n.startswith(arch)][:5] or difflib.get_close_matches(arch, names, n=5, cutoff=0.5)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise ConfigError(f"model.arch={arch}: {zoo} {zoos.version(zoo)} has no such model{hint} "
                          f"({zoos.LISTING[zoo]} lists all {len(names)})")
    return arch


def _factory(target: str) -> str:
    module_name, sep, attr = target.partition(":")
    if not (module_name and sep and attr):
        raise ConfigError(f"model.target={target or '(empty)'}: give package.module:factory, a function that "
                          f"returns the torch.nn.Module (e.g. model.target=mypkg.nets:make_net)")
    if importlib.util.find_spec(module_name.split(".")[0]) is None:
        raise ConfigError(f"model.target={target}: no module {module_name!r} on the Python path "
                          f"(install the package, or add its folder to PYTHONPATH)")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(f"model.target={target}: importing {module_name} failed: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    if not callable(getattr(module, attr, None)):
        raise ConfigError(f"model.target={target}: {module_name} has no function {attr!r}")
    return target
