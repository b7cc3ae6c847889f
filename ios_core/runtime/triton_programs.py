"""The Triton programs of :mod:`.triton_pool` and :mod:`.triton_depthwise`, in one module that imports Triton.

Only those two import it, on first use, so a CPU-only process never loads Triton. The programs sit at module
level (Triton resolves a helper a program calls through the module's globals). The pool's program turns a block
of flat output offsets into (n, c, h, w) in the output's memory order (channels innermost for NHWC, so
neighbouring lanes read neighbouring channels); the depthwise one works on tiles of pixels by channels."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def output_coords(i, C, OH, OW, NHWC: tl.constexpr):
    """(n, c, oh, ow) of flat output offsets ``i`` in the output's memory order."""
    if NHWC:
        c = i % C
        rest = i // C
        ow = rest % OW
        rest = rest // OW
        oh = rest % OH
        n = rest // OH
    else:
        ow = i % OW
        rest = i // OW
        oh = rest % OH
        rest = rest // OH
        c = rest % C
        n = rest // C
    return n, c, oh, ow


@triton.jit
def pool2d(x_ptr, y_ptr, total, C, H, W, OH, OW, sxn, sxc, sxh, sxw, syn, syc, syh, syw,
           KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr,
           PW: tl.constexpr, IS_MAX: tl.constexpr, INCLUDE_PAD: tl.constexpr, NHWC: tl.constexpr,
           BLOCK: tl.constexpr):
    """A max or average pool: the window unrolled, padded taps masked, float32 accumulation; the average's
    divisor is the window clipped to the padded input (``INCLUDE_PAD``) or to the input, as ATen's."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = i < total
    n, c, oh, ow = output_coords(i, C, OH, OW, NHWC)
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    base = x_ptr + n * sxn + c * sxc
    if IS_MAX:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    for kh in tl.static_range(KH):
        for kw in tl.static_range(KW):
            h = h0 + kh
            w = w0 + kw
            inside = live & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            if IS_MAX:
                v = tl.load(base + h * sxh + w * sxw, mask=inside, other=float("-inf")).to(tl.float32)
                acc = tl.maximum(acc, v)
            else:
                acc += tl.load(base + h * sxh + w * sxw, mask=inside, other=0.0).to(tl.float32)
    if not IS_MAX:
        h1 = tl.minimum(h0 + KH, H + PH)
        w1 = tl.minimum(w0 + KW, W + PW)
        if INCLUDE_PAD:
            count = (h1 - h0) * (w1 - w0)
        else:
            count = (tl.minimum(h1, H) - tl.maximum(h0, 0)) * (tl.minimum(w1, W) - tl.maximum(w0, 0))
        acc = acc / count.to(tl.float32)
    tl.store(y_ptr + n * syn + c * syc + oh * syh + ow * syw, acc.to(y_ptr.dtype.element_ty), mask=live)


@triton.jit
def depthwise2d(x_ptr, w_ptr, b_ptr, y_ptr, P, CO, H, W, OH, OW, sxn, sxc, sxh, sxw, syn, syc, syh, syw,
                KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr,
                PW: tl.constexpr, MULT: tl.constexpr, HAS_BIAS: tl.constexpr, RELU: tl.constexpr,
                BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """A depthwise convolution (``MULT`` outputs per input channel; weights (CO, 1, KH, KW) contiguous), its
    bias and a ReLU applied before the one store. A program computes a tile of ``BLOCK_P`` output pixels (flat
    n, oh, ow) by ``BLOCK_C`` output channels: each tap loads one weight per channel for the whole tile and one
    input tile whose channels are contiguous in NHWC memory, and the pixel coordinates are computed once per
    pixel rather than once per element (the element-wise program lost to cuDNN's kernel on 28 of 33 shapes)."""
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    co = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    live_p = p < P
    live_c = co < CO
    ow = p % OW
    rest = p // OW
    oh = rest % OH
    n = rest // OH
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    rows = x_ptr + n * sxn
    cols = (co // MULT) * sxc
    acc = tl.zeros([BLOCK_P, BLOCK_C], tl.float32)
    for kh in tl.static_range(KH):
        for kw in tl.static_range(KW):
            h = h0 + kh
            w = w0 + kw
            inside = live_p & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            v = tl.load((rows + h * sxh + w * sxw)[:, None] + cols[None, :],
                        mask=inside[:, None] & live_c[None, :], other=0.0).to(tl.float32)
            tap = tl.load(w_ptr + co * (KH * KW) + (kh * KW + kw), mask=live_c, other=0.0).to(tl.float32)
            acc += v * tap[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=live_c, other=0.0).to(tl.float32)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    out = (y_ptr + n * syn + oh * syh + ow * syw)[:, None] + (co * syc)[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=live_p[:, None] & live_c[None, :])
