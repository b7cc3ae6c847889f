"""What TensorRT is asked to build, as plain values.

:func:`describe` maps (precision, config, batch, TensorRT version) to a :class:`BuildPlan`
without importing TensorRT, so the mapping is tested on the CPU and its hash keys the engine
cache; :func:`apply` sets a plan on a real ``IBuilderConfig`` and is the only code that
touches the builder's settings.

Version facts it encodes (TensorRT's Python API docs and bindings, 8.6.1 to 11.1):
networks are explicit-batch by default from 10.0 (8.x needs ``EXPLICIT_BATCH``); the
``BF16`` flag exists from 9/10; 11.0 removed the weak-typing flags ``FP16`` and ``BF16``
(strongly typed networks only), so fp16 there is a float16 ONNX graph instead of a flag;
``TF32`` is on by default, so strict fp32 clears it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from harness.backend import BackendError

from .config import TensorRTConfig, parse_batch_range

MIN_VERSION = (8, 6)  # builder_optimization_level, max_aux_streams, execute_async_v3


@dataclass(frozen=True)
class BuildPlan:
    precision: str
    onnx_dtype: str  # float32, or float16 where TensorRT has no FP16 flag (11+: the graph carries the type)
    network_flags: tuple[str, ...]  # NetworkDefinitionCreationFlag names
    set_flags: tuple[str, ...]  # BuilderFlag names set
    clear_flags: tuple[str, ...]  # BuilderFlag names cleared
    workspace_bytes: int
    optimization_level: int
    max_aux_streams: int | None  # None: left to TensorRT's heuristic
    shape_min: tuple[int, ...]  # the optimization profile of the input (N, C, H, W)
    shape_opt: tuple[int, ...]
    shape_max: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def key(self, *extra: str) -> str:
        """A short hash of the plan (and ``extra``, e.g. the model's digest): the engine's cache key."""
        blob = json.dumps([self.as_dict(), *extra], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


def version_tuple(version: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise BackendError(f"cannot read TensorRT's version from {version!r}")
    return int(m[1]), int(m[2])


def _precision_flags(precision: str, version: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(flags set, flags cleared, ONNX dtype) for one precision on one TensorRT version."""
    major = version_tuple(version)[0]
    weakly_typed = major <= 10
    if precision == "fp32":
        return (), ("TF32",), "float32"
    if precision == "tf32":
        return ("TF32",), (), "float32"
    if precision == "fp16":
        return (("FP16", "TF32"), (), "float32") if weakly_typed else (("TF32",), (), "float16")
    if precision == "bf16":
        if 9 <= major <= 10:
            return ("BF16", "TF32"), (), "float32"
        raise BackendError(f"precision=bf16 needs TensorRT's BF16 builder flag, which TensorRT {version} does not "
                           f"have (it is in 9.x and 10.x; 11 removed the weak-typing flags); use precision=fp16 "
                           f"or TensorRT 10")
    raise BackendError(f"backend tensorrt has no precision {precision!r}; use fp32, tf32, fp16 or bf16")


def describe(precision: str, cfg: TensorRTConfig, batch: int, input_shape: tuple[int, ...],
             version: str) -> BuildPlan:
    """The plan for one run: precision flags, memory, optimization level, auxiliary streams, profile."""
    if version_tuple(version) < MIN_VERSION:
        raise BackendError(f"backend tensorrt needs TensorRT {'.'.join(map(str, MIN_VERSION))} or newer "
                           f"(builder optimization levels, auxiliary streams, execute_async_v3); this is {version}")
    set_flags, clear_flags, dtype = _precision_flags(precision, version)
    lo, hi = parse_batch_range(cfg.batch_range) or (batch, batch)
    if not lo <= batch <= hi:
        raise BackendError(f"batch={batch} is outside backend.batch_range={cfg.batch_range}")
    chw = tuple(int(d) for d in input_shape)
    return BuildPlan(
        precision=precision, onnx_dtype=dtype,
        network_flags=("EXPLICIT_BATCH",) if version_tuple(version)[0] < 10 else (),
        set_flags=set_flags, clear_flags=clear_flags,
        workspace_bytes=cfg.workspace_mb << 20, optimization_level=cfg.optimization_level,
        max_aux_streams=None if cfg.aux_streams < 0 else cfg.aux_streams,
        shape_min=(lo, *chw), shape_opt=(batch, *chw), shape_max=(hi, *chw))


def batch_label(plan: BuildPlan) -> str:
    """``8`` for exact shapes, ``1-128`` for a range (file names and params)."""
    lo, hi = plan.shape_min[0], plan.shape_max[0]
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _member(trt: Any, enum: str, name: str) -> Any:
    try:
        return getattr(getattr(trt, enum), name)
    except AttributeError:
        raise BackendError(f"this TensorRT ({getattr(trt, '__version__', '?')}) has no {enum}.{name}") from None


def network_flags(trt: Any, plan: BuildPlan) -> int:
    """The ``create_network`` bit mask of the plan's creation flags."""
    bits = 0
    for name in plan.network_flags:
        bits |= 1 << int(_member(trt, "NetworkDefinitionCreationFlag", name))
    return bits


def apply(trt: Any, builder: Any, config: Any, plan: BuildPlan, input_name: str) -> None:
    """Set ``plan`` on a TensorRT ``IBuilderConfig`` (``config``) made by ``builder``."""
    for name in plan.clear_flags:
        config.clear_flag(_member(trt, "BuilderFlag", name))
    for name in plan.set_flags:
        config.set_flag(_member(trt, "BuilderFlag", name))
    config.set_memory_pool_limit(_member(trt, "MemoryPoolType", "WORKSPACE"), plan.workspace_bytes)
    config.builder_optimization_level = plan.optimization_level
    if plan.max_aux_streams is not None:
        config.max_aux_streams = plan.max_aux_streams
    profile = builder.create_optimization_profile()
    profile.set_shape(input_name, plan.shape_min, plan.shape_opt, plan.shape_max)
    config.add_optimization_profile(profile)
