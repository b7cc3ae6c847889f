"""Depthwise convolutions as one hand-written Triton kernel, a candidate of :mod:`.kernels` beside cuDNN's.

cuDNN builds its depthwise execution plans at run time: the first call of each new shape took 250-400 ms on
the H100 (with or without its plan search; 0.2-0.6 ms for ATen's own kernel), and in the IOS model cuDNN's
kernel was the faster on 24 of NASNet's 25 depthwise shapes, so a warm rerun of NASNet spent 5-7 s building
plans (BENCHMARKS.md). One Triton program here covers every shape of a window, stride, padding, channel
multiplier and layout (sizes and strides are run-time arguments) and a later process loads it from Triton's
on-disk cache. Like :mod:`.triton_pool`: a block of output elements in memory order per program, the window
unrolled, padded taps masked, float32 accumulation; the bias and a ReLU are applied before the one store."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ..ir.nodes import Conv
from .kernels import depthwise_triton_ok
from .triton_pool import BLOCK, MAX_ELEMENTS, WARPS


@functools.cache
def _kernel():
    """The Triton program, defined on first use (Triton is imported only where a CUDA convolution is run)."""
    import triton
    import triton.language as tl

    @triton.jit
    def depthwise2d(x_ptr, w_ptr, b_ptr, y_ptr, total, CO, H, W, OH, OW, sxn, sxc, sxh, sxw, syn, syc, syh, syw,
                    KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr,
                    PW: tl.constexpr, MULT: tl.constexpr, HAS_BIAS: tl.constexpr, RELU: tl.constexpr,
                    NHWC: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = i < total
        if NHWC:  # output elements in memory order: channels innermost
            co = i % CO
            rest = i // CO
            ow = rest % OW
            rest = rest // OW
            oh = rest % OH
            n = rest // OH
        else:
            ow = i % OW
            rest = i // OW
            oh = rest % OH
            rest = rest // OH
            co = rest % CO
            n = rest // CO
        h0 = oh * SH - PH
        w0 = ow * SW - PW
        base = x_ptr + n * sxn + (co // MULT) * sxc
        taps = w_ptr + co * (KH * KW)  # the weights: (CO, 1, KH, KW), contiguous
        acc = tl.zeros([BLOCK], tl.float32)
        for kh in tl.static_range(KH):
            for kw in tl.static_range(KW):
                h = h0 + kh
                w = w0 + kw
                inside = live & (h >= 0) & (h < H) & (w >= 0) & (w < W)
                v = tl.load(base + h * sxh + w * sxw, mask=inside, other=0.0).to(tl.float32)
                acc += v * tl.load(taps + (kh * KW + kw), mask=live, other=0.0).to(tl.float32)
        if HAS_BIAS:
            acc += tl.load(b_ptr + co, mask=live, other=0.0).to(tl.float32)
        if RELU:
            acc = tl.maximum(acc, 0.0)
        tl.store(y_ptr + n * syn + co * syc + oh * syh + ow * syw, acc.to(y_ptr.dtype.element_ty), mask=live)

    return depthwise2d


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
        n, c, h, wd = x.shape
        oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
        nhwc = not x.is_contiguous()  # dense in one of the two layouts (kernels.dense): NHWC where not NCHW
        y = torch.empty((n, node.out_channels, oh, ow), device=x.device, dtype=x.dtype,
                        memory_format=torch.channels_last if nhwc else torch.contiguous_format)
        if max(x.numel(), y.numel()) > MAX_ELEMENTS or not w.is_contiguous():
            raise ValueError(f"node {node.name}: past the Triton depthwise kernel's 32-bit indexing, or weights "
                             "not in NCHW memory")
        total = y.numel()
        if total:
            _kernel()[(-(-total // BLOCK),)](x, w, w if b is None else b, y, total, node.out_channels, h, wd, oh, ow,
                                             *x.stride(), *y.stride(), KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw,
                                             MULT=mult, HAS_BIAS=b is not None, RELU=node.act == "relu",
                                             NHWC=nhwc, BLOCK=BLOCK, num_warps=WARPS)
        return y
    return conv
