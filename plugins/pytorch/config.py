"""The pytorch backend's options and the labels its runs get in summaries and reports."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from harness.config import BackendConfig, ConfigError, choose
from ios_core.runtime.target import CUDNN_SEARCHES, LAYOUT_CHOICES, parse_channels_last


class Mode(str, Enum):
    eager = "eager"
    cudagraph = "cudagraph"
    compile = "compile"


#: torch.compile's own spellings (torch._inductor.list_mode_options())
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

#: what Inductor's max_autotune_conv_backends / max_autotune_gemm_backends accept
AUTOTUNE_CONV = ("ATEN", "TRITON")
AUTOTUNE_GEMM = ("ATEN", "TRITON", "CPP", "CUTLASS", "CUTEDSL", "NVGEMM", "CK", "CKTILE")

def backend_names(value: str) -> list[str]:
    """An autotuning option's comma-separated backends as Inductor spells them (``" aten,triton"``: ATEN, TRITON)."""
    return [b.strip().upper() for b in value.split(",") if b.strip()]


#: mode=compile: who compiles the graph torch.compile captures (Inductor, or IOS through its torch.compile backend)
COMPILE_BACKENDS = ("inductor", "ios")

LABELS = {"eager": "PyTorch", "cudagraph": "PyTorch-CUDAGraph"}
COMPILE_LABELS = {"default": "TorchCompile", "reduce-overhead": "TorchCompile-RO", "max-autotune": "TorchCompile-MA",
                  "max-autotune-no-cudagraphs": "TorchCompile-MA-NoCG"}


@dataclass
class PyTorchConfig(BackendConfig):
    name: str = "pytorch"
    mode: Mode = Mode.eager
    compile_mode: str = "default"  # one of COMPILE_MODES (torch.compile's spelling)
    #: mode=compile: inductor, or ios (torch.compile(backend="ios"): IOS plans what its IR takes, Inductor the
    #: rest; compile_mode and the Inductor options apply to that rest)
    compile_backend: str = "inductor"
    channels_last: str = "auto"  # true (NHWC), false (NCHW), auto: timed on CUDA, NHWC for compile, NCHW on CPU
    compile_timeout_s: float = 1800.0  # mode=compile: a longer compile fails the run (a sweep goes on)
    #: mode=compile: Inductor's FX-graph, autotuning and Triton caches in the store (<results>/inductor), so a
    #: second run (or another batch size of the same graph) reuses compiled kernels and autotuning choices;
    #: false: Inductor's default place (/tmp/torchinductor_<user>)
    inductor_cache: bool = True
    #: max-autotune modes: the backends Inductor times for convolutions and for GEMMs (its own settings,
    #: max_autotune_conv_backends / max_autotune_gemm_backends; empty: Inductor's defaults). "ATEN" for
    #: convolutions times no Triton convolution templates, the slow part of a cold max-autotune compile
    autotune_conv_backends: str = ""
    autotune_gemm_backends: str = ""
    compile_threads: int = 0  # Inductor's parallel compile workers; 0: the job's CPU share (all cores when alone)
    #: CUDA: how cuDNN picks each convolution shape's plan, once per process: heuristic (the first plan its
    #: heuristics rank, nothing timed, the same in every process; the default, BENCHMARKS.md "What makes processes
    #: differ") or benchmark (torch's cudnn.benchmark: its candidates timed on the shape's first call, the device
    #: held meanwhile under the load-aware launcher). Every mode's convolutions go through it
    cudnn_search: str = "heuristic"

    def vendor_autotune(self) -> bool:
        """A max-autotune mode that times only cuDNN and cuBLAS for convolutions and GEMMs (no Triton template
        compiled): labelled apart, as it builds in a fraction of the time (BENCHMARKS.md)."""
        chosen = (self.autotune_conv_backends, self.autotune_gemm_backends)
        return self.compile_mode.startswith("max-autotune") and all(backend_names(v) == ["ATEN"] for v in chosen)

    def check(self) -> None:
        choose("backend.compile_mode", self.compile_mode, COMPILE_MODES)
        choose("backend.compile_backend", self.compile_backend, COMPILE_BACKENDS)
        choose("backend.cudnn_search", self.cudnn_search, CUDNN_SEARCHES)
        try:  # a str field, so that Hydra can hand it `auto`; `true` arrives as 'True'
            parse_channels_last(self.channels_last)
        except ValueError:
            raise ConfigError(f"backend.channels_last={self.channels_last!r} is invalid; "
                              f"choose one of: {', '.join(LAYOUT_CHOICES)}") from None
        if not self.compile_timeout_s > 0:
            raise ConfigError(f"backend.compile_timeout_s={self.compile_timeout_s} must be > 0")
        for key, known in (("autotune_conv_backends", AUTOTUNE_CONV), ("autotune_gemm_backends", AUTOTUNE_GEMM)):
            given = backend_names(getattr(self, key))
            unknown = [b for b in given if b not in known]
            if unknown:
                raise ConfigError(f"backend.{key}={getattr(self, key)!r}: {', '.join(unknown)} unknown; give a "
                                  f"comma-separated list of {', '.join(known)} (empty: Inductor's default)")
        if self.compile_threads < 0:
            raise ConfigError(f"backend.compile_threads={self.compile_threads} must be >= 0 (0: the job's CPU share)")
