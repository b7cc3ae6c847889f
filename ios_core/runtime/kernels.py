"""Kernel choice per convolution: the candidates the GPU offers, timed, the fastest kept.

A 1x1 convolution (stride 1, no padding, one group) on NHWC memory is a matrix product of
the (N*H*W, C) activations with the (O, C) weights; cuBLAS runs it with the bias in the
GEMM's epilogue, where cuDNN's conv adds a bias without a fused ReLU in a separate kernel
(kernels_frontier.md: NASNet 1.23x, RandWire 1.47x with the bias fold). Which is faster
depends on the shape, the precision and the GPU, so :class:`KernelTable` times both for
every distinct convolution the runtime meets (outside CUDA-graph capture, the first time
the shape is seen: the runtimes and timers call their work once eagerly before capturing)
and keeps the faster. The search's stage timings, the in-situ selection and the final
model share one table, so the DP plans with the kernels that will run, and the choices
travel with the schedule file (``Schedule.stats["kernels"]``).

``mode``: ``auto`` (time the candidates), ``cudnn`` (always cuDNN: the ablation baseline),
``gemm`` (1x1 convs as GEMM wherever the layout allows: for tests and ablations).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..ir.nodes import Conv

KERNEL_MODES = ("auto", "cudnn", "gemm")
IMPLS = ("cudnn", "gemm")


def gemm_ok(node: Conv, x: torch.Tensor) -> bool:
    """A 1x1 conv on an NHWC tensor whose (N*H*W, C) view needs no copy."""
    if node.kernel != (1, 1) or node.stride != (1, 1) or node.padding != (0, 0) or node.groups != 1:
        return False
    if x.dim() != 4 or x.stride(1) != 1:  # channels innermost: channels_last memory (or a slice of it)
        return False
    n, _, h, w = x.shape
    rows_collapse = (h == 1 or x.stride(2) == w * x.stride(3)) and (n == 1 or x.stride(0) == h * x.stride(2))
    return rows_collapse


def conv_gemm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """The 1x1 conv as ``F.linear`` on the NHWC view; the result is NCHW-shaped, NHWC in memory."""
    n, c, h, wd = x.shape
    rows = x.permute(0, 2, 3, 1).reshape(n * h * wd, c)
    y = F.linear(rows, w.reshape(w.shape[0], c), b)
    return y.view(n, h, wd, -1).permute(0, 3, 1, 2)


def signature(node: Conv, x: torch.Tensor) -> tuple:
    return (tuple(x.shape), tuple(x.stride()), node.out_channels, node.kernel, node.stride, node.padding,
            node.groups, node.act, x.dtype)


def sig_text(sig: tuple) -> str:
    """A JSON-safe key for a signature (schedule files store the choices by it)."""
    return repr(sig)


class KernelTable:
    """Signature -> implementation, filled by timing the candidates on first sight.

    ``timer(calls) -> ms per call`` times zero-argument callables (each enqueues one conv on
    the current stream); the backend passes one built on the stage timer's instrument, so a
    choice rests on the same timing as everything else in the search."""

    def __init__(self, mode: str = "auto", timer: Callable[[list[Callable[[], object]]], list[float]] | None = None,
                 choices: dict[str, str] | None = None):
        if mode not in KERNEL_MODES:
            raise ValueError(f"unknown kernel mode {mode!r}; choose one of: {', '.join(KERNEL_MODES)}")
        self.mode, self.timer = mode, timer
        self.choices: dict[str, str] = dict(choices or {})
        self.timings: dict[str, dict[str, float]] = {}
        self.timed = 0

    def impl(self, node: Conv, x: torch.Tensor, run: Callable[[str], torch.Tensor]) -> str:
        """The implementation for ``node`` on ``x``; ``run(impl)`` enqueues the conv with one."""
        if self.mode == "cudnn" or not gemm_ok(node, x):
            return "cudnn"
        key = sig_text(signature(node, x))
        if self.mode == "gemm":
            self.choices[key] = "gemm"  # counted, and recorded in the schedule file like a timed choice
            return "gemm"
        hit = self.choices.get(key)
        if hit is not None:
            return hit
        if self.timer is None or (x.is_cuda and torch.cuda.is_current_stream_capturing()):
            return "cudnn"  # nothing to time with, or inside a capture: the safe default, not remembered
        calls: list[Callable[[], object]] = [functools.partial(run, i) for i in IMPLS]
        times = self.timer(calls)
        self.timings[key] = dict(zip(IMPLS, times))
        self.timed += 1
        choice = min(self.timings[key], key=lambda i: (self.timings[key][i], i != "cudnn"))
        self.choices[key] = choice
        return choice

    def counts(self) -> dict[str, float]:
        used = list(self.choices.values())
        return {"kernel_convs_timed": float(self.timed), "kernel_gemm": float(used.count("gemm")),
                "kernel_cudnn": float(used.count("cudnn"))}
