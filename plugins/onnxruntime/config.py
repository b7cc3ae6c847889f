"""Typed config of the onnxruntime backend (``backend=onnxruntime``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, choose
from harness.onnx_session import LEVELS

#: backend.provider -> ONNX Runtime's execution provider
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}
#: the CUDA provider's auto/true/false settings
SWITCHES = ("cuda_graph", "prefer_nhwc")


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
    #: kernels read. auto: in fp16 only, where they were faster on three of the four networks and slower in
    #: fp32 on all four (BENCHMARKS.md); true: always; false: never.
    prefer_nhwc: str = "auto"

    def nhwc(self, provider: str, precision: str) -> bool:
        """Whether this run asks for the NHWC kernels (``auto``: fp16 on the CUDA provider)."""
        if self.prefer_nhwc == "auto":
            return provider == "cuda" and precision == "fp16"
        return self.prefer_nhwc == "true"

    def check(self) -> None:
        choose("backend.provider", self.provider, ("auto", *PROVIDERS))
        choose("backend.graph_optimization", self.graph_optimization, LEVELS)
        for key in SWITCHES:  # Hydra hands `true` to a str field as 'True'
            setattr(self, key, str(getattr(self, key)).lower())
            choose(f"backend.{key}", getattr(self, key), ("auto", "true", "false"))
