from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from harness.backend import Backend, BackendError, Prepared
from harness.config import BackendConfig, choose
from ios_core.interpreters.torch import to_torch
from ios_core.ir import Graph
from ios_core.runtime.target import TorchTarget


class Mode(str, Enum):
    eager = "eager"
    cudagraph = "cudagraph"
    compile = "compile"


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")


@dataclass
class PyTorchConfig(BackendConfig):
    name: str = "pytorch"
    mode: Mode = Mode.eager
    compile_mode: str = "default"  # one of COMPILE_MODES (torch.compile's spelling)
    channels_last: bool = False

    def check(self) -> None:
        choose("backend.compile_mode", self.compile_mode, COMPILE_MODES)


_LABELS = {"eager": "PyTorch", "cudagraph": "PyTorch-CUDAGraph"}
_COMPILE_LABELS = {"default": "TorchCompile", "reduce-overhead": "TorchCompile-RO", "max-autotune": "TorchCompile-MA"}


class PyTorchBackend(Backend[PyTorchConfig]):
    name = "pytorch"
    runs = "the IR as a torch module: eager, one CUDA graph, or torch.compile"
    display_name = "PyTorch"
    config_class = PyTorchConfig
    devices = ("cpu", "cuda")
    requires = ("torch",)
    extra = ""

    def label(self) -> str:
        mode = self.cfg.mode.value
        return _COMPILE_LABELS[self.cfg.compile_mode] if mode == "compile" else _LABELS[mode]

    def prepare(self, graph: Graph, batch: int, device: str, precision: str) -> Prepared:
        import torch

        mode = self.cfg.mode.value
        target = TorchTarget(device, precision, self.cfg.channels_last)
        if mode == "cudagraph" and device != "cuda":
            raise BackendError("backend.mode=cudagraph needs device=cuda (CUDA graphs do not exist on the CPU)")
        module = target.module(to_torch(graph))
        fn = module
        if mode == "compile":
            fn = torch.compile(module, mode=self.cfg.compile_mode)
        example = target.tensor(np.zeros((batch, *graph.input_shape), np.float32))
        if mode == "compile":  # compile now, so it counts as optimization cost
            with torch.inference_mode():
                for _ in range(3):
                    fn(example)
            target.synchronize()
        infer = target.infer_fn(fn)
        load = target.tensor
        if mode == "cudagraph":
            infer, load = target.capture(fn, example)
        return Prepared(infer=infer, load_input=load, to_numpy=target.to_numpy, synchronize=target.synchronize,
                        cuda_stream=target.stream, device_name=target.device_name(), display_name=self.label(),
                        params={"torch_mode": mode})
