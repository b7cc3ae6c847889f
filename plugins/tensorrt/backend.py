"""The TensorRT backend: plan -> ONNX -> engine (cached) -> execution on a torch CUDA stream."""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from harness.backend import Backend, BackendError, MissingDependency, Model, Prepared, store_dir

from .builder import build_engine, cached_or_built, engine_path, onnx_for_tensorrt
from .config import TensorRTConfig
from .plan import batch_label, describe
from .runtime import AfterTiming, Execution, layer_table

NVIDIA_INDEX = "https://pypi.nvidia.com"
INSTALL_HINT = (f"--extra-index-url {NVIDIA_INDEX} (TensorRT's wheels come from NVIDIA's index; the PyPI packages "
                f"only fetch their libraries from there)")


def load_tensorrt() -> Any:
    """``import tensorrt``, or one line saying how to install it (the bindings alone do not import)."""
    try:
        return importlib.import_module("tensorrt")
    except (ImportError, OSError) as err:
        raise MissingDependency(f"backend 'tensorrt' cannot import tensorrt ({type(err).__name__}: {err}): "
                                f"pip install tensorrt {INSTALL_HINT}") from None


class TensorRTBackend(Backend[TensorRTConfig]):
    name = "tensorrt"
    times_in_prepare = True  # the builder times its tactics on the GPU
    runs = ("the ONNX export built into a TensorRT engine (Python API, TensorRT 10/11); unverified in this "
            "repository's CI, which has no TensorRT")
    display_name = "TensorRT"
    config_class = TensorRTConfig
    forms = ("onnx",)  # TensorRT's ONNX parser
    devices = ("cuda",)
    requires = ("tensorrt",)
    extra = "tensorrt"
    install = "pip install -e '.[tensorrt]' --extra-index-url https://pypi.nvidia.com (TensorRT 10/11, NVIDIA's index)"

    @classmethod
    def check_installed(cls) -> None:
        try:
            super().check_installed()
        except MissingDependency as err:
            raise MissingDependency(f"{err} {INSTALL_HINT}") from None

    @classmethod
    def not_ready(cls) -> str | None:
        try:
            load_tensorrt()
        except MissingDependency as err:
            return str(err)
        return None

    @classmethod
    def label_of(cls, cfg: TensorRTConfig) -> str:
        return "TensorRT-CUDAGraph" if cfg.cuda_graph else "TensorRT"

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        if device != "cuda":
            raise BackendError(f"backend 'tensorrt' does not run on {device} (it supports: cuda)")
        trt = load_tensorrt()
        import torch

        from ios_core.runtime.streams import side_streams

        cfg, version = self.cfg, str(trt.__version__)
        plan = describe(precision, cfg, batch, model.input_shape, version)
        metrics: dict[str, float] = {}
        t = time.perf_counter()
        blob = onnx_for_tensorrt(model, plan).SerializeToString()
        metrics["trt_onnx_s"] = time.perf_counter() - t
        gpu = torch.cuda.get_device_name()
        path = engine_path(store_dir(cfg.store), model, gpu, version, plan, blob)
        logger = trt.Logger(trt.Logger.WARNING)
        engine, cached = self._engine(trt, logger, path, lambda: build_engine(trt, blob, plan, logger), metrics)

        stream = side_streams(1)[0]
        exe = Execution(trt, engine, (batch, *model.input_shape), stream)
        infer = exe.graph_fn() if cfg.cuda_graph else exe.infer_fn()
        infer(exe.x)  # the first inference fails here, inside prepare, if it fails at all
        stream.synchronize()
        metrics.update(trt_engine_cached=float(cached), trt_aux_streams=float(getattr(engine, "num_aux_streams", 0)))
        title = f"TensorRT per-layer profile: {model.name}, batch {batch}, {precision}, {gpu}"
        artifacts = AfterTiming(lambda: layer_table(exe.layer_times(), title) if cfg.layer_profile else {})
        return Prepared(infer=infer, load_input=lambda x: exe.load(np.ascontiguousarray(x, dtype=np.float32)),
                        to_numpy=exe.fetch, synchronize=stream.synchronize,
                        cuda_stream=stream, artifacts=artifacts, metrics=metrics, display_name=self.label(),
                        device_name=f"{gpu} (TensorRT {version})",
                        params={"trt_version": version, "trt_engine": str(path), "trt_batch": batch_label(plan),
                                "trt_plan": json.dumps(plan.as_dict(), sort_keys=True)})

    def _engine(self, trt: Any, logger: Any, path: Path, build: Callable[[], bytes],
                metrics: dict[str, float]) -> tuple[Any, bool]:
        """The deserialized engine, from the cache or built now (a cached engine this TensorRT cannot
        read is replaced); build and load times go to ``metrics``."""
        runtime = trt.Runtime(logger)
        while True:
            t = time.perf_counter()
            blob, cached = cached_or_built(path, self.cfg.cache, build)
            metrics["trt_build_s"] = 0.0 if cached else time.perf_counter() - t
            t = time.perf_counter()
            engine = runtime.deserialize_cuda_engine(blob)
            metrics.update(trt_deserialize_s=time.perf_counter() - t, trt_engine_mb=len(blob) / 2**20)
            if engine is not None:
                return engine, cached
            if not cached:
                raise BackendError(f"TensorRT could not deserialize the engine it built for {path.name}")
            path.unlink()  # stale (another TensorRT build, a cut-short write): build it again
