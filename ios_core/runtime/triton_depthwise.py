"""Depthwise convolutions as one hand-written Triton kernel, a candidate of :mod:`.kernels` beside cuDNN's.

cuDNN builds its depthwise execution plans at run time: the first call of each new shape takes hundreds of
milliseconds (with or without its plan search; ATen's own kernel under one), and in the IOS model cuDNN's
kernel was the faster on nearly all of NASNet's depthwise shapes, so a warm rerun of NASNet spent seconds
building plans (BENCHMARKS.md). One Triton program here covers every shape of a window, stride, padding, channel
multiplier and tile (sizes, strides and so the layout are run-time arguments; a tile size is compiled in) and a
later process loads it from Triton's on-disk cache. A program computes a tile of output pixels by channels
(:func:`tile`), the window unrolled, padded taps masked, float32 accumulation; the bias and a ReLU are applied
before the one store. The first program here (a block of output elements per program, one weight load per
element and tap) lost to cuDNN's kernel on most NASNet and RandWire shapes in the captured model; the tiles
load a tap's weights once per channel and an input tile whose channels are contiguous in NHWC memory, and were
faster than cuDNN's kernel on most of those shapes (BENCHMARKS.md)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..ir.nodes import Conv
from .kernels import depthwise_triton_ok
from .triton_pool import WARPS, output_for

#: output pixels a program computes (halved down to :data:`MIN_PIXELS` while a launch would have fewer than
#: :data:`MIN_PROGRAMS` programs, two per SM of an H100)
PIXELS, MIN_PIXELS, MIN_PROGRAMS = 32, 8, 264


def triton_depthwise(node: Conv, fixed: tuple[int, int, int] | None = None) -> Callable[..., torch.Tensor]:
    """``node`` (a depthwise convolution, undilated) with its bias and a ReLU or no activation as one Triton
    kernel, called as ``conv(x, w, b)`` on a dense CUDA tensor in either layout (``w`` contiguous: NCHW memory);
    the output is in the input's layout. ``fixed`` (pixels, channels, warps) replaces :func:`tile`'s choice and
    :data:`WARPS` (bench/depthwise_kernels.py times other tiles with it)."""
    if not depthwise_triton_ok(node):
        raise ValueError(f"node {node.name}: no Triton depthwise kernel for dilation {node.dilation}, "
                         f"activation {node.act}")
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    mult = node.out_channels // node.groups

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        from .ahead import launch
        from .triton_programs import depthwise2d  # Triton only where a CUDA convolution is run

        if not w.is_contiguous():
            raise ValueError(f"node {node.name}: the Triton depthwise kernel takes weights in NCHW memory")
        _, _, h, wd = x.shape
        oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
        y, _ = output_for(x, node.out_channels, oh, ow, f"node {node.name}, Triton depthwise convolution")
        if y.numel():
            pixels = x.shape[0] * oh * ow
            bp, bc, warps = fixed or (*tile(pixels, node.out_channels), WARPS)
            grid = (-(-pixels // bp), -(-node.out_channels // bc))
            launch(depthwise2d, grid, x, w, w if b is None else b, y, pixels, node.out_channels, h, wd, oh, ow,
                   *x.stride(), *y.stride(), KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, MULT=mult,
                   HAS_BIAS=b is not None, RELU=node.act == "relu", BLOCK_P=bp, BLOCK_C=bc, num_warps=warps)
        return y
    return conv


def tile(pixels: int, channels: int) -> tuple[int, int]:
    """(pixels, channels) a program computes: 16 or 32 channels, whichever pads the channels less (32 on a tie),
    and :data:`PIXELS` pixels, halved while the launch would have too few programs. Measured per NASNet shape
    (fp16, bench/depthwise_kernels.py --tiles, BENCHMARKS.md): small tiles win where a 7x7 window's loads keep
    many programs waiting, large tiles spill registers, and a tile of 64 channels pads 42 to 64."""
    bc = min((32, 16), key=lambda c: -(-channels // c) * c - channels)
    bp = PIXELS
    while bp > MIN_PIXELS and -(-pixels // bp) * -(-channels // bc) < MIN_PROGRAMS:
        bp //= 2
    return bp, bc
