"""Typed config of the onnxruntime backend (``backend=onnxruntime``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, choose
from harness.onnx_session import LEVELS

#: backend.provider -> ONNX Runtime's execution provider
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}


@dataclass
class OnnxRuntimeConfig(BackendConfig):
    name: str = "onnxruntime"
    provider: str = "auto"  # auto (cuda on a GPU, else cpu), cpu, cuda, tensorrt
    graph_optimization: str = "all"  # disable, basic, extended, all
    intra_op_threads: int = 0  # 0: ONNX Runtime decides
    #: CUDA provider: capture the whole run as one CUDA graph and replay it (the host no longer launches each
    #: operator). auto: on, and a model ONNX Runtime cannot capture runs without, saying why; true: required;
    #: false: off. (A str field, so that Hydra can hand it `auto`; `true` arrives as 'True'.)
    cuda_graph: str = "auto"
    #: CUDA provider: convolutions and pools in ONNX Runtime's NHWC kernels, the layout cuDNN's tensor-core
    #: kernels read. For fp16, where NCHW ran slower than fp32 (H100, 2026-11-27, CUDA graph on: squeezenet 0.63
    #: vs 0.48 ms, randwire 6.3 vs 4.0); off by default until it is measured on a GPU
    prefer_nhwc: bool = False

    def check(self) -> None:
        choose("backend.provider", self.provider, ("auto", *PROVIDERS))
        choose("backend.graph_optimization", self.graph_optimization, LEVELS)
        self.cuda_graph = str(self.cuda_graph).lower()
        choose("backend.cuda_graph", self.cuda_graph, ("auto", "true", "false"))
