from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.backend import Backend, BackendError, Model, Prepared, store_dir
from harness.machine.leases import cpu_threads, exclusive
from ios_core.runtime.target import TorchTarget, faster_layout, layout_name, parse_channels_last, use_cudnn_search

from . import inductor
from .config import COMPILE_LABELS, COMPILE_MODES, LABELS, Mode, PyTorchConfig
from .deadline import Deadline
from .layout import time_ms

__all__ = ["COMPILE_MODES", "Mode", "PyTorchBackend", "PyTorchConfig", "faster_layout"]

#: one layout's ready model: (its target, infer, load_input, what its compile records)
Built = tuple[TorchTarget, Callable[[Any], Any], Callable[[np.ndarray], Any], inductor.CompileFacts]


class PyTorchBackend(Backend[PyTorchConfig]):
    name = "pytorch"
    runs = "the model's torch module (zoo models and ONNX files: the IR's): eager, one CUDA graph, or torch.compile"
    display_name = "PyTorch"
    config_class = PyTorchConfig
    devices = ("cpu", "cuda")
    requires = ("torch",)
    extra = ""
    gpu_run = "H200, 2026-11-26 (timm modules: CUDA graph, compile)"
    label_options = ("mode", "compile_mode", "compile_backend")
    forms = ("module",)

    @classmethod
    def label_of(cls, cfg: PyTorchConfig) -> str:
        if cfg.mode.value != "compile":
            return LABELS[cfg.mode.value]
        if cfg.compile_backend == "ios":
            return "TorchCompile-IOS"
        return COMPILE_LABELS[cfg.compile_mode] + ("-Vendor" if cfg.vendor_autotune() else "")

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        mode = self.cfg.mode.value
        if mode == "cudagraph" and device != "cuda":
            raise BackendError("backend.mode=cudagraph needs device=cuda (CUDA graphs do not exist on the CPU)")
        x = np.zeros((batch, *model.input_shape), np.float32)
        metrics: dict[str, float] = {}
        forced = parse_channels_last(self.cfg.channels_last)
        if forced is not None:
            channels_last, chosen_by = forced, "forced"
        elif device != "cuda":  # the CPU: the model's own layout, nothing timed
            channels_last, chosen_by = False, "default"
        elif mode == "compile":
            # Inductor chooses its own layouts inside the compiled graph, and timing both layouts
            # would compile twice (minutes under max-autotune): NHWC, the layout cuDNN's convs prefer
            channels_last, chosen_by = True, "default"
        else:  # CUDA eager or cudagraph: time both, keep the faster, release the other
            both = {name: self._build(model, x, device, precision, name == "nhwc") for name in ("nchw", "nhwc")}
            times = {name: time_ms(infer, load(x)) for name, (_, infer, load, _) in both.items()}
            metrics.update({f"layout_{name}_ms": t for name, t in times.items()})
            keep = faster_layout(times)
            built = both.pop(keep)
            both.clear()
            import torch

            torch.cuda.empty_cache()  # the loser's weights and CUDA-graph pool go back to the driver
            return self._prepared(built, mode, keep == "nhwc", "measured", metrics)
        return self._prepared(self._build(model, x, device, precision, channels_last), mode, channels_last,
                              chosen_by, metrics)

    def _build(self, model: Model, x: np.ndarray, device: str, precision: str, channels_last: bool) -> Built:
        """The module in one layout: compiled now (so it counts as optimization cost, within
        backend.compile_timeout_s) or captured as one CUDA graph, as the mode says."""
        import torch

        mode = self.cfg.mode.value
        if device == "cuda":
            use_cudnn_search(self.cfg.cudnn_search)
        target = TorchTarget(device, precision, channels_last)
        fn = module = target.module(model.module())  # a fresh copy: each layout casts and moves its own
        example = target.tensor(x)
        facts = inductor.CompileFacts()
        if device == "cuda":
            self._plan_convolutions(target, module, example)
        if mode == "compile":
            what = f"torch.compile ({self.cfg.compile_mode}) on {model.name}"
            # max-autotune modes time Triton and GEMM candidates on the GPU while compiling: hold it
            autotunes = "autotune" in self.cfg.compile_mode and device == "cuda"
            tuning = exclusive() if autotunes else contextlib.nullcontext()
            with Deadline(self.cfg.compile_timeout_s, what, "backend.compile_timeout_s",
                          "raise it, choose a lighter backend.compile_mode, or time no Triton convolution "
                          "templates: backend.autotune_conv_backends=ATEN"), tuning, torch.inference_mode(), \
                    inductor.settings(self.cfg, store_dir(self.cfg.store)) as facts:
                fn = self._compiled(module)
                for _ in range(3):
                    fn(example)
                target.synchronize()
        if mode == "cudagraph":
            infer, load = target.capture(fn, example)
            return target, infer, load, facts
        return target, target.infer_fn(fn), target.tensor, facts

    def _compiled(self, module: Any) -> Any:
        """torch.compile of ``module`` with the configured backend: IOS plans in the store, its cuDNN plans
        chosen as this backend's, its compiles on the job's CPU share (the rest falls back to Inductor)."""
        import torch

        if self.cfg.compile_backend == "inductor":
            return torch.compile(module, mode=self.cfg.compile_mode)
        options: dict[str, Any] = {"store": str(store_dir(self.cfg.store)), "cudnn_search": self.cfg.cudnn_search,
                   "compile_threads": self.cfg.compile_threads or cpu_threads()}
        return torch.compile(module, backend="ios", options=options)  # type: ignore[arg-type]

    @staticmethod
    def _plan_convolutions(target: TorchTarget, module: Any, example: Any) -> None:
        """One eager call with the device held, where cuDNN picks (and under ``benchmark`` times) each
        convolution's plan, kept for the process: the CUDA graph, the compiled graph's ATen convolutions and
        the timed loop reuse them. Timed beside another job's GPU work, cuDNN picks other plans, and the
        model's latency moves with them (BENCHMARKS.md)."""
        import torch

        with exclusive(), torch.inference_mode():
            module(example)
            target.synchronize()

    def _prepared(self, built: Built, mode: str, channels_last: bool, chosen_by: str,
                  metrics: dict[str, float]) -> Prepared:
        target, infer, load, facts = built
        return Prepared(infer=infer, load_input=load, to_numpy=target.to_numpy, synchronize=target.synchronize,
                        cuda_stream=target.stream, device_name=target.device_name(), display_name=self.label(),
                        params={"torch_mode": mode, "layout": layout_name(channels_last),
                                "layout_chosen_by": chosen_by, **facts.params,
                                **({"cudnn_search": self.cfg.cudnn_search} if target.stream is not None else {})},
                        metrics={**metrics, **facts.metrics}, notes=facts.notes)
