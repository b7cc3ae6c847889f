"""Depthwise convolutions as one hand-written Triton kernel, a candidate of :mod:`.kernels` beside cuDNN's.

cuDNN builds its depthwise execution plans at run time: the first call of each new shape took 250-400 ms on
the H100 (with or without its plan search; 0.2-0.6 ms for ATen's own kernel), and in the IOS model cuDNN's
kernel was the faster on 24 of NASNet's 25 depthwise shapes, so a warm rerun of NASNet spent 5-7 s building
plans (BENCHMARKS.md). One Triton program here covers every shape of a window, stride, padding, channel
multiplier and tile (sizes, strides and so the layout are run-time arguments; a tile size is compiled in) and a
later process loads it from Triton's on-disk cache. A program computes a tile of output pixels by channels
(:func:`tile`), the window unrolled, padded taps masked, float32 accumulation; the bias and a ReLU are applied
before the one store. The first program here (a block of output elements per program, one weight load per
element and tap) lost to cuDNN's kernel on 28 of 33 NASNet and RandWire shapes in the captured model; the tiles
load a tap's weights once per channel and an input tile whose channels are contiguous in NHWC memory."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..ir.nodes import Conv
from .kernels import depthwise_triton_ok
from .triton_pool import WARPS, output_for

#: output elements a program computes (pixels x channels), and the programs a launch should have at least (two
#: per SM of an H100) before a tile is made smaller
TILE, MIN_PROGRAMS = 2048, 264


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
        y, _ = output_for(x, node.out_channels, oh, ow, f"node {node.name}, Triton depthwise convolution")
        if y.numel():
            pixels = x.shape[0] * oh * ow
            bp, bc = tile(pixels, node.out_channels)
            grid = (-(-pixels // bp), -(-node.out_channels // bc))
            depthwise2d[grid](x, w, w if b is None else b, y, pixels, node.out_channels, h, wd, oh, ow,
                              *x.stride(), *y.stride(), KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, MULT=mult,
                              HAS_BIAS=b is not None, RELU=node.act == "relu", BLOCK_P=bp, BLOCK_C=bc,
                              num_warps=WARPS)
        return y
    return conv


def tile(pixels: int, channels: int) -> tuple[int, int]:
    """(pixels, channels) a program computes: up to 64 channels (16 at least: Triton's tiles are powers of two),
    the rest of :data:`TILE` in pixels, halved down to 16 while the launch would have fewer than
    :data:`MIN_PROGRAMS` programs (NASNet's 11x11 maps of 672 channels: 44 programs of 32 x 64, 88 of 16 x 64)."""
    bc = min(64, max(16, 1 << (channels - 1).bit_length()))
    bp = TILE // bc
    while bp > 16 and -(-pixels // bp) * -(-channels // bc) < MIN_PROGRAMS:
        bp //= 2
    return bp, bc
