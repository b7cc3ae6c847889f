"""Depthwise convolutions as one hand-written Triton kernel, a candidate of :mod:`.kernels` beside cuDNN's.

cuDNN builds its depthwise execution plans at run time: the first call of each new shape took 250-400 ms on
the H100 (with or without its plan search; 0.2-0.6 ms for ATen's own kernel), and in the IOS model cuDNN's
kernel was the faster on 24 of NASNet's 25 depthwise shapes, so a warm rerun of NASNet spent 5-7 s building
plans (BENCHMARKS.md). One Triton program here covers every shape of a window, stride, padding, channel
multiplier and layout (sizes and strides are run-time arguments) and a later process loads it from Triton's
on-disk cache. Like :mod:`.triton_pool`: a block of output elements in memory order per program, the window
unrolled, padded taps masked, float32 accumulation; the bias and a ReLU are applied before the one store."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..ir.nodes import Conv
from .kernels import depthwise_triton_ok
from .triton_pool import BLOCK, WARPS, blocks, output_for


def triton_depthwise(node: Conv) -> Callable[..., torch.Tensor]:
    """``node`` (a depthwise convolution, undilated) with its bias and a ReLU or no activation as one Triton
    kernel, called as ``conv(x, w, b)`` on a dense CUDA tensor in either layout (``w`` contiguous: NCHW memory);
    the output is in the input's layout."""
    if not depthwise_triton_ok(node):
        raise ValueError(f"node {node.name}: no Triton depthwise kernel for dilation {node.dilation}, "
                         f"activation {node.act}")
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    mult = node.out_channels // node.groups

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        from .triton_programs import depthwise2d  # Triton only where a CUDA convolution is run

        if not w.is_contiguous():
            raise ValueError(f"node {node.name}: the Triton depthwise kernel takes weights in NCHW memory")
        _, _, h, wd = x.shape
        oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
        y, nhwc = output_for(x, node.out_channels, oh, ow, f"node {node.name}, Triton depthwise convolution")
        if total := y.numel():
            depthwise2d[blocks(total)](x, w, w if b is None else b, y, total, node.out_channels, h, wd, oh, ow,
                                       *x.stride(), *y.stride(), KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw,
                                       MULT=mult, HAS_BIAS=b is not None, RELU=node.act == "relu", NHWC=nhwc,
                                       BLOCK=BLOCK, num_warps=WARPS)
        return y
    return conv
