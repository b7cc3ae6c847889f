"""The pytorch backend's options and the labels its runs get in summaries and reports."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from harness.config import BackendConfig, ConfigError, choose
from ios_core.runtime.target import LAYOUT_CHOICES, parse_channels_last


class Mode(str, Enum):
    eager = "eager"
    cudagraph = "cudagraph"
    compile = "compile"


#: torch.compile's own spellings (torch._inductor.list_mode_options())
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

LABELS = {"eager": "PyTorch", "cudagraph": "PyTorch-CUDAGraph"}
COMPILE_LABELS = {"default": "TorchCompile", "reduce-overhead": "TorchCompile-RO", "max-autotune": "TorchCompile-MA",
                  "max-autotune-no-cudagraphs": "TorchCompile-MA-NoCG"}


@dataclass
class PyTorchConfig(BackendConfig):
    name: str = "pytorch"
    mode: Mode = Mode.eager
    compile_mode: str = "default"  # one of COMPILE_MODES (torch.compile's spelling)
    channels_last: str = "auto"  # true (NHWC), false (NCHW), auto: timed on CUDA, NHWC for compile, NCHW on CPU
    compile_timeout_s: float = 1800.0  # mode=compile: a longer compile fails the run (a sweep goes on)

    def check(self) -> None:
        choose("backend.compile_mode", self.compile_mode, COMPILE_MODES)
        try:  # a str field, so that Hydra can hand it `auto`; `true` arrives as 'True'
            parse_channels_last(self.channels_last)
        except ValueError:
            raise ConfigError(f"backend.channels_last={self.channels_last!r} is invalid; "
                              f"choose one of: {', '.join(LAYOUT_CHOICES)}") from None
        if not self.compile_timeout_s > 0:
            raise ConfigError(f"backend.compile_timeout_s={self.compile_timeout_s} must be > 0")
