"""Torch device/precision plumbing shared by the IOS runtime and every backend that runs torch
(pytorch, ios): dtype and TF32 policy, channels_last, CUDA graph capture."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}

#: the values of a backend's ``channels_last`` option: ``auto`` times both layouts and keeps the faster
LAYOUT_CHOICES = ("auto", "true", "false")


#: how cuDNN picks a convolution's execution plan, process-wide like cuDNN's own plan cache (one per shape, kept by
#: the first call): ``benchmark`` times the candidate plans of each new shape (torch.backends.cudnn.benchmark),
#: ``heuristic`` runs the first plan cuDNN's heuristics rank, timing nothing
CUDNN_SEARCHES = ("benchmark", "heuristic")
_cudnn = {"benchmark": True}


def use_cudnn_search(mode: str) -> str:
    """Every :class:`TorchTarget` made after this call on CUDA picks cuDNN plans by ``mode`` (one of
    :data:`CUDNN_SEARCHES`); returns the mode it replaces. A shape already run in the process keeps its plan."""
    if mode not in CUDNN_SEARCHES:
        raise ValueError(f"cudnn_search={mode!r} is invalid; choose one of: {', '.join(CUDNN_SEARCHES)}")
    previous = "benchmark" if _cudnn["benchmark"] else "heuristic"
    _cudnn["benchmark"] = mode == "benchmark"
    return previous


def parse_channels_last(value: object) -> bool | None:
    """``True``/``False`` for a forced layout (NHWC / NCHW), ``None`` for ``auto`` (choose by
    measurement). Accepts what Hydra hands a ``str`` field: ``True`` arrives as ``'True'``."""
    text = str(value).strip().lower()
    if text in ("auto", ""):
        return None
    if text in ("true", "1", "yes", "on", "nhwc"):
        return True
    if text in ("false", "0", "no", "off", "nchw"):
        return False
    raise ValueError(f"channels_last={value!r} is invalid; choose one of: {', '.join(LAYOUT_CHOICES)}")


def layout_name(channels_last: bool) -> str:
    return "nhwc" if channels_last else "nchw"


def faster_layout(times: dict[str, float]) -> str:
    """The layout name (``nchw``/``nhwc``) with the smaller time; NCHW on a tie, the layout
    every backend starts in (no conversion of inputs)."""
    return min(sorted(times), key=lambda name: (times[name], name != "nchw"))


class TorchTarget:
    def __init__(self, device: str, precision: str, channels_last: bool = False):
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.dtype = getattr(torch, DTYPES[precision])
        self.channels_last = channels_last
        self.stream: torch.cuda.Stream | None
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        if device == "cuda":
            torch.backends.cudnn.benchmark = _cudnn["benchmark"]
            self.stream = torch.cuda.current_stream()
        else:
            self.stream = None

    def module(self, module):
        module = module.to(device=self.device, dtype=self.dtype)
        if self.channels_last:
            module = module.to(memory_format=self.torch.channels_last)
        return module

    def tensor(self, x: Any):
        """A numpy array or a torch tensor (a caller's own, on any device) on the device in the target dtype
        (NHWC memory for 4-D ones when channels_last): inputs and weights alike."""
        if not isinstance(x, self.torch.Tensor):
            x = self.torch.from_numpy(np.ascontiguousarray(x))
        return self._laid_out(x.to(device=self.device, dtype=self.dtype))

    def random(self, shape: tuple[int, ...], generator, scale: float = 0.05):
        """Normal random values times ``scale``, made on the device in the target dtype and layout (for
        timing only: the values do not matter, their shapes and memory format do)."""
        return self._laid_out(self.torch.randn(shape, generator=generator, device=self.device).mul_(scale)
                              .to(self.dtype))

    def _laid_out(self, t):
        """A 4-D tensor in NHWC memory when the target is channels_last; anything else dense in its own order
        (a caller's NHWC or strided tensor reaches no kernel chosen for NCHW)."""
        if self.channels_last and t.dim() == 4:
            return t.contiguous(memory_format=self.torch.channels_last)
        return t.contiguous()

    def generator(self, seed: int = 0):
        """A seeded random generator on the target's device (for :meth:`random`)."""
        return self.torch.Generator(device=self.device).manual_seed(seed)

    def to_numpy(self, y) -> np.ndarray:
        return y.detach().float().cpu().numpy()

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize()

    def device_name(self) -> str:
        if self.device.type == "cuda":
            return self.torch.cuda.get_device_name(self.device)
        return "cpu"

    def infer_fn(self, fn: Callable) -> Callable[[Any], Any]:
        torch = self.torch

        def infer(x):
            with torch.inference_mode():
                return fn(x)
        return infer

    def capture(self, fn: Callable, example) -> tuple[Callable, Callable]:
        """Capture ``fn`` on a static input as one CUDA graph; returns (infer, load)."""
        torch = self.torch
        from .streams import capture_stream

        static_in = example.clone()
        side = capture_stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(3):
                fn(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side), torch.inference_mode():
            static_out = fn(static_in)

        def load(x: Any):  # numpy or torch
            static_in.copy_(self.tensor(x))
            return static_in

        def infer(_):
            graph.replay()
            return static_out
        # the graph reads the module's weights at their addresses: they live as long as the graph is replayed
        # (a module nothing else holds was freed after capture, and replays read freed memory)
        infer.module = fn  # type: ignore[attr-defined]
        return infer, load
