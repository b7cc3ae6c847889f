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

    def check(self) -> None:
        choose("backend.provider", self.provider, ("auto", *PROVIDERS))
        choose("backend.graph_optimization", self.graph_optimization, LEVELS)
