"""What a backend is: a name, a config dataclass, the devices and packages it needs,
and ``prepare`` returning a :class:`Prepared` (the one-inference callable and friends).
The runner does everything else (timing, correctness, statistics, tracking)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

import numpy as np

from ios_core.errors import UserError

from .config import BackendConfig
from .models import FORMS, Model

ConfigT = TypeVar("ConfigT", bound=BackendConfig)


def store_dir(value: str = "") -> Path:
    """Where a backend keeps what outlives a run (schedules, caches, tuning databases)."""
    return Path(value) if value else Path("results").resolve()


def inductor_cache(store: Path) -> Path:
    """Put Inductor's caches (FX graphs, autotuning choices, Triton kernels) under the store, for what this
    process compiles from now on: a later run, on this machine or another sharing the folder, reuses them
    (Inductor reads the variable whenever it needs the folder). Returns the folder."""
    folder = store / "inductor"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    return folder


class BackendError(UserError, RuntimeError):
    """A backend cannot run as configured; the message says why and what to do."""


class MissingDependency(BackendError):
    pass


class AllocatorStats(NamedTuple):
    """A device allocator's bytes in use now and its peak since the process began (JAX cannot reset it), and
    where the runtime plans a call's buffers itself, that plan's peak (XLA's, arguments included): what one
    call takes, where the peak since the start is the compile's."""

    in_use: float
    peak: float
    call_peak: float = 0.0


@dataclass
class Prepared:
    """A backend's compiled model bound to a device.

    ``load_input`` moves the seeded numpy input to the device (timed as load time),
    ``infer`` runs one inference on that handle, ``to_numpy`` brings an output back for
    the correctness check, ``synchronize`` waits for the device. ``cuda_stream`` is set
    where the work runs on a torch CUDA stream, so the runner can also time it with
    CUDA events.
    """

    infer: Callable[[Any], Any]
    load_input: Callable[[np.ndarray], Any] = lambda x: x
    to_numpy: Callable[[Any], np.ndarray] = lambda y: np.asarray(y)
    synchronize: Callable[[], None] = lambda: None
    cuda_stream: Any = None
    artifacts: dict[str, str] = field(default_factory=dict)  # file name -> text content
    params: dict[str, Any] = field(default_factory=dict)  # extra params to log
    metrics: dict[str, float] = field(default_factory=dict)  # extra metrics (e.g. search cost)
    display_name: str | None = None
    device_name: str = ""
    check_output: bool = True
    notes: list[str] = field(default_factory=list)  # what the reader must know, first in the summary line
    #: a backend with its own device allocator (JAX): ``() -> AllocatorStats | None``, read when the timed loop
    #: starts and ends, so the run's memory is what its allocator handed out (its peak since the process began:
    #: the compile's included) and not the whole GPU's (NVML's used memory counts the 75% of the GPU JAX
    #: reserves when it starts)
    memory_stats: Callable[[], AllocatorStats | None] | None = None


class Backend(ABC, Generic[ConfigT]):
    """Base class of every backend plugin: class attributes describe it (``name``, ``devices``,
    ``requires``, ``extra``, ``config_class``, ``forms``); :meth:`prepare` builds the model for one
    (model, batch, device, precision) and returns a :class:`Prepared` whose ``infer`` the
    protocol times. ``self.cfg`` is the backend's typed config (``class Ios(Backend[IosConfig])``).
    Library imports belong in ``prepare``, not at module import."""

    name: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    runs: ClassVar[str] = ""  # what it runs, one line (--list-backends, --help)
    config_class: ClassVar[type[BackendConfig]] = BackendConfig
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    requires: ClassVar[tuple[str, ...]] = ()  # importable module names
    extra: ClassVar[str] = ""  # pip extra that installs them
    shows_progress: ClassVar[bool] = False  # prepare reports its own progress (else a heartbeat line does)
    #: where this backend last ran on a real GPU in BENCHMARKS.md ("H100 80GB HBM3, 2026-11-25"); empty: its GPU
    #: path is tested only against fakes here (--list-backends and the README say so)
    gpu_run: ClassVar[str] = ""
    #: the exact install for a user who has the library's source or vendor index (default: the extra)
    install: ClassVar[str] = ""
    #: options whose value the variant's label already names (IOS-Both for ``schedule``): run names and
    #: report columns leave them out
    label_options: ClassVar[tuple[str, ...]] = ()
    aliases: ClassVar[tuple[str, ...]] = ()  # older names still accepted for ``backend=``
    #: the model forms it takes, in order of preference (``module``: the torch nn.Module, ``onnx``: the ONNX
    #: model, ``graph``: ios_core's IR); the protocol makes the first the model can be given in before
    #: ``prepare`` (its time is the model's, not the backend's), and a model it cannot take fails the job in
    #: one line naming why. Empty: the backend needs no model (the harness's overhead)
    forms: ClassVar[tuple[str, ...]] = ("graph",)
    #: MLflow sections for this backend's own metrics: section name -> metric name prefixes
    metric_groups: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: prepare and the first call time kernels on the GPU themselves (engine builds, autotuners, cuDNN's
    #: algorithm search): under the load-aware launcher the harness holds the job's GPU exclusively
    #: around both, so another job's measurement neither disturbs those timings nor is disturbed by
    #: them. A backend that times in short pieces wraps only those in :func:`harness.machine.leases.exclusive`
    #: instead and leaves this off (IOS's stage timing, TVM's tuner, PyTorch's layout probe), so its
    #: CPU work still overlaps other jobs' measurements.
    times_in_prepare: ClassVar[bool] = False

    @classmethod
    def missing(cls) -> list[str]:
        return [m for m in cls.requires if importlib.util.find_spec(m) is None]

    @classmethod
    def check_installed(cls) -> None:
        missing = cls.missing()
        if missing:
            hint = f"pip install -e '.[{cls.extra}]'" if cls.extra else f"pip install {' '.join(missing)}"
            raise MissingDependency(f"backend {cls.name!r} needs {', '.join(missing)}, which is not installed: "
                                    f"{hint}")

    @classmethod
    def not_ready(cls) -> str | None:
        """Why a run could not start here even with its libraries installed (a build feature
        it needs is missing); None when nothing stands in the way. Overridden by backends that
        need more than an import."""
        return None

    @classmethod
    def versions(cls) -> dict[str, str]:
        """Versions of the libraries this backend runs on (recorded as tags)."""
        out = {}
        for mod in cls.requires:
            try:
                out[mod] = getattr(importlib.import_module(mod), "__version__", "unknown")
            except Exception:  # missing or broken: recorded as such
                out[mod] = "missing"
        return out

    def __init__(self, cfg: ConfigT | Mapping[str, Any]):
        """From the typed config or a composed mapping (checked as the dataclass is made)."""
        self.cfg: ConfigT = cfg if isinstance(cfg, BackendConfig) else self.config_class.from_mapping(cfg)  # type: ignore[assignment]

    @classmethod
    def label_of(cls, cfg: ConfigT) -> str:
        """The variant's name (``Optimization:`` in the summary line, run names, report columns),
        from its typed config alone: the parent names a run without building its backend (that is
        done once, in the measuring child). Backends whose options name a variant override it."""
        return cls.display_name or cls.name

    def label(self) -> str:
        return self.label_of(self.cfg)

    @abstractmethod
    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        """Convert and compile the model for the device (timed as the optimization cost): ``model.graph()``,
        ``model.onnx()`` or ``model.module()``, whichever of its ``forms`` it takes (the protocol has made the
        first of them already); ``model.input_shape`` is (C, H, W)."""


__all__ = ["FORMS", "Backend", "BackendError", "MissingDependency", "Model", "Prepared", "inductor_cache",
           "store_dir"]
