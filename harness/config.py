"""Structured-config dataclasses for every config group.

Hydra validates overrides against these types before anything runs (a misspelt key or
``batch=abc`` fails at composition); each dataclass checks the values types cannot express
when it is made (``__post_init__``), so ``OmegaConf.to_object`` of a composed config (see
:func:`validate`) refuses ``batch=0`` as the constructor would. Hydra itself only merges
these classes as schemas and makes the defaults, which pass. Backends contribute their own
dataclass under ``backend/``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from omegaconf import MISSING, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue

from ios_core.errors import UserError

if TYPE_CHECKING:
    from omegaconf import DictConfig

PACKAGE_DIR = Path(__file__).resolve().parent


def conf_dir() -> Path:
    """The Hydra configs: the checkout's top-level ``conf/``, installed as the package
    ``harness_conf`` (so an installed harness finds them outside its checkout)."""
    import importlib.util

    spec = importlib.util.find_spec("harness_conf")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return PACKAGE_DIR.parent / "conf"


def default_backend() -> str:
    """The backend of a run that names none: conf/config.yaml's default (as the CLI composes it)."""
    from omegaconf import OmegaConf

    for entry in OmegaConf.to_container(OmegaConf.load(conf_dir() / "config.yaml")).get("defaults", []):  # type: ignore[union-attr]
        if isinstance(entry, dict) and "backend" in entry:
            return str(entry["backend"])
    raise ConfigError("conf/config.yaml names no default backend (defaults: - backend: <name>)")


class ConfigError(UserError, ValueError):
    """A config value is invalid; the message says which and what is allowed."""


def check_readable(key: str, path: str | Path) -> None:
    """A file the measuring child will read, checked before any work: ``key=path`` names it in the error."""
    if not Path(path).is_file():
        raise ConfigError(f"{key}={path}: no such file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{key}={path}: cannot be read (permissions)")


class Precision(str, Enum):
    fp32 = "fp32"  # strict float32, TF32 off
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"


class DeviceType(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class ClockLockMode(str, Enum):
    off = "off"
    on = "on"  # lock if permitted, warn otherwise
    required = "required"  # a lock that fails is an error


@dataclass
class ModelConfig:
    """Where the network comes from (resolved once by :func:`harness.models.resolve`): a zoo model by
    ``name`` (inception_v3, nasnet, ...), or a source: ``timm``/``torchvision`` with ``arch``, ``onnx``
    with ``path``, ``module`` with ``target`` (``package.module:factory`` returning an nn.Module)."""

    name: str = MISSING
    arch: str = ""  # model=timm / model=torchvision: the zoo's model name (resnet50, vit_base_patch16_224)
    path: str = ""  # model=onnx: the ONNX file (model.params.path is still read)
    target: str = ""  # model=module: package.module:factory
    image_size: int = 0  # 0: the model's own (timm's pretrained config, torchvision's weights, the file's input)
    params: dict[str, Any] = field(default_factory=dict)  # a zoo builder's parameters (channels, filters, ...)

    def __post_init__(self) -> None:
        if self.image_size < 0:
            raise ConfigError(f"model.image_size={self.image_size} must be >= 0 (0: the model's own size)")


@dataclass
class DeviceConfig:
    type: DeviceType = DeviceType.auto
    index: int = 0
    lock_clocks: ClockLockMode = ClockLockMode.off
    clock: str = "base"  # "base" (TDP clock), "max", or a frequency in MHz
    sample_interval_ms: int = 50

    def __post_init__(self) -> None:
        clock = str(self.clock)
        if clock not in ("base", "max") and not clock.isdigit():
            raise ConfigError(f"device.clock={clock!r} is invalid: use base, max or a frequency in MHz")


@dataclass
class RunnerConfig:
    warmup_iters: int = 10
    warmup_time_s: float = 1.0
    min_iters: int = 100
    min_time_s: float = 2.0
    max_time_s: float = 60.0
    max_iters: int = 1_000_000
    ci_rel_target: float = 0.005  # stop once the 95% CI of the median is within +-0.5%
    check_samples: int = 2  # samples of the batch compared with the float64 reference
    timeout_s: float = 1800.0
    isolate: bool = True  # run each measurement in a spawned child process
    seed: int = 0
    profile_ops: bool = False  # time every node alone too: op_profile.csv / .md artifacts (OpBench)
    trace: bool = False  # a torch.profiler trace of 3 more iterations and kernels in flight over time
    # each reported once there are enough samples (stats.min_samples: p90 64, p95 128, p99 662); the default
    # asks only what min_iters guarantees, so a default run has no "tails left out" note
    percentiles: list[float] = field(default_factory=lambda: [50.0, 90.0])
    include_transfers: bool = False  # time the input's copy to the device and the output's back, as trtexec can
    # measure the job this many times, each in a fresh measuring process (preparation included, as a user would
    # restart): the headline is the median of the processes' medians with its CI between processes
    processes: int = 1
    # a GPU's timed loop runs on this many cores of its own (the last ones), every thread of the measuring
    # process moved there for the loop, as the load-aware launcher's lanes do (hydra.launcher.lane_cores): the
    # same conditions in a single run and in a sweep. 0 leaves the process where it is; a CPU run uses every core
    lane_cores: int = 2
    #: a smoke test (runner=quick): its numbers say the backend runs, not how fast; tables flag it "smoke" and
    #: never print a speed-up or GeoMean from it (a run with fewer than 6 samples, too few for a CI, is one too)
    smoke: bool = False

    def __post_init__(self) -> None:
        at_least("runner.", self, 0, "warmup_iters", "min_iters", "max_iters", "check_samples", "lane_cores")
        at_least("runner.", self, 1, "processes")
        if self.processes > 1 and not self.isolate:
            raise ConfigError(f"runner.processes={self.processes} measures in fresh processes: it needs "
                              "runner.isolate=true")
        if self.max_time_s <= 0 or self.timeout_s <= 0:
            raise ConfigError("runner.max_time_s and runner.timeout_s must be positive")
        if self.max_iters < 1 or self.min_iters > self.max_iters:
            raise ConfigError(f"runner.max_iters={self.max_iters} must be >= 1 and "
                              f">= runner.min_iters={self.min_iters}")
        at_least("runner.", self, 0, "min_time_s", "warmup_time_s")
        for p in self.percentiles:
            if not 0 < float(p) < 100:
                raise ConfigError(f"runner.percentiles: {p} is not a percentile strictly between 0 and 100")


@dataclass
class TrackingConfig:
    enabled: bool = True
    uri: str = ""  # empty: sqlite store under results/
    experiment: str = "harness"
    results_dir: str = "results"  # under the current directory; made absolute before a run
    #: a single run from the command line sends its record to MLflow from a detached process after printing its
    #: summary, and returns at once; a sweep hands its end batch (its records, its parent run, its speed-ups) to
    #: one. false: logged before the command returns
    background: bool = True


@dataclass
class SweepConfig:
    """How a multirun (``-m``) treats jobs it has finished before (see harness/records/sweeps.py)."""

    rerun: bool = False  # measure again the jobs an earlier attempt of this sweep finished
    study: str = ""  # the experiment preset that started it (conf/experiment/): picks the report's layout
    baseline: str = ""  # a job's override, e.g. backend:pytorch: the table's speed-up is over that job


def choose(key: str, value: Any, allowed: Iterable[str]) -> None:
    """The one check of a closed choice. Plain strings, not Enums: OmegaConf matches an Enum by
    member name, and the values users type (``ios-both``, ``reduce-overhead``) are not names."""
    allowed = tuple(allowed)
    if str(value) not in allowed:
        raise ConfigError(f"{key}={value!r} is invalid; choose one of: {', '.join(allowed)}")


def at_least(prefix: str, cfg: Any, minimum: int, *keys: str) -> None:
    """The one check of a lower bound, for each named attribute of ``cfg``."""
    for key in keys:
        if getattr(cfg, key) < minimum:
            raise ConfigError(f"{prefix}{key}={getattr(cfg, key)} must be >= {minimum}")


@dataclass
class BackendConfig:
    """Base of every backend's config; ``name`` selects the plugin. Hydra checks the types of an
    override; :meth:`check` (run when the dataclass is made, see :meth:`from_mapping`) checks the
    values, so a backend holds a valid, typed config (``self.cfg.r``, not ``int(cfg["r"])``)."""

    name: str = MISSING
    #: where a backend keeps what outlives a run (IOS schedules and cost cache, TVM tuning databases,
    #: TensorRT engines, TASO's timer file); empty: the run's results folder (filled by the protocol)
    store: str = ""

    def __post_init__(self) -> None:
        try:
            hints = get_type_hints(type(self))
        except (NameError, TypeError):  # a plugin's annotations that cannot be resolved here: no coercion
            hints = {}
        for key, kind in hints.items():  # Enum fields arrive as their values from dicts
            value = getattr(self, key, None)
            if isinstance(kind, type) and issubclass(kind, Enum) and not isinstance(value, kind):
                try:
                    setattr(self, key, kind(value))
                except ValueError:
                    choose(f"backend.{key}", value, [m.value for m in kind])
        if self.name != MISSING:
            self.check()

    def check(self) -> None:
        """Value checks beyond types: raise ConfigError naming the key and what is allowed."""

    @classmethod
    def check_keys(cls, keys: Iterable[Any], backend: str) -> None:
        """``+backend.mdoe=x`` slips past Hydra's schema: a key the backend does not declare is refused."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(map(str, keys)) - known)
        if unknown:
            raise ConfigError(f"backend.{unknown[0]} is not an option of backend {backend!r}; its options: "
                              f"{', '.join(closest_first(unknown[0], sorted(known - {'name'})))}")

    @classmethod
    def from_mapping(cls: type[C], values: Mapping[str, Any]) -> C:
        """The typed config from a composed (plain or OmegaConf) mapping, keys and values checked."""
        cls.check_keys(values.keys(), str(values.get("name")))
        return cls(**{str(k): v for k, v in values.items()})


C = TypeVar("C", bound=BackendConfig)


@dataclass
class BenchConfig:
    model: ModelConfig = MISSING
    backend: Any = MISSING
    device: DeviceConfig = field(default_factory=DeviceConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    batch: int = 1
    precision: Precision = Precision.fp32

    def __post_init__(self) -> None:  # the groups checked their own values as they were made
        if self.batch < 1:
            raise ConfigError(f"batch={self.batch} is invalid: the batch size must be a positive integer")


def validate(cfg: DictConfig) -> BenchConfig:
    """The typed config of a composed one (``BenchConfig`` schema): making it runs every group's
    value checks, the backend's included. A value left at ``???`` is refused in one line."""
    try:
        typed = OmegaConf.to_object(cfg)
    except MissingMandatoryValue as exc:
        raise ConfigError(f"{exc.full_key} has no value (???): give one, e.g. {exc.full_key}=...") from None
    if not isinstance(typed, BenchConfig):
        raise TypeError(f"not a config of the BenchConfig schema: {type(typed).__name__}")
    return typed


def hydra_error_line(exc: BaseException) -> str:
    """Hydra's multi-line composition errors as one line that keeps the valid choices."""
    text = str(exc).strip()
    if "Available options in" in text:
        head = text.splitlines()[0].replace("In 'config': ", "")
        listing = text.split("Available options in", 1)[1].split("Config search path", 1)[0]
        opts = [x.strip() for x in listing.splitlines()[1:] if x.startswith("\t")]
        return f"{head}; choose one of: {', '.join(opts)}"
    line = text.splitlines()[0] if text else type(exc).__name__
    if line.startswith("Sweeping over Hydra's configuration") and "," in line:
        key = line.rsplit(":", 1)[-1].strip().strip("'").partition("=")[0]
        return f"{line}: a list for {key} is written {key}=[a,b] (a comma sweeps)"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause).strip():
        line = f"{line}: {str(cause).strip().splitlines()[0]}"
        line += _valid_keys(cause)
    return line


def _valid_keys(cause: BaseException) -> str:
    """``; valid keys: mode, compile_mode, ...`` (the closest first) for a key its config group does not have."""
    cls, key = getattr(cause, "object_type", None), getattr(cause, "key", None)
    if not isinstance(cause, (ConfigAttributeError, ConfigKeyError)) or not isinstance(key, str) \
            or not isinstance(cls, type) or not hasattr(cls, "__dataclass_fields__"):
        return ""
    names = [f.name for f in fields(cls) if not f.name.startswith("_")]
    return f"; valid keys: {', '.join(closest_first(key, names))}"


def closest_first(key: str, names: list[str]) -> list[str]:
    """``names`` with the (up to three) closest to a mistyped ``key`` first, the rest in their order."""
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
    return close + [n for n in names if n not in close]
