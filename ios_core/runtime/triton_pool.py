"""Max and average pools as hand-written Triton kernels, the "triton" pool candidate of :mod:`.kernels`.

Inductor compiled these pools before (``torch.compile`` of one ``F.max_pool2d``): the kernels were
fast, but each process paid Dynamo's and Inductor's first compile (0.7-1 s a pool even with every
cache warm: 2.9-4.4 s of a warm rerun's 3.9-5.5 s on the H100, BENCHMARKS.md) and Inductor
specialized one program per shape. Here one Triton program covers every shape of a pool's window,
stride, padding, type and layout (sizes and strides are run-time arguments), and a later process
loads it from Triton's on-disk cache without Dynamo. Each program handles a block of output
elements in memory order (channels innermost for NHWC), so neighbouring lanes read neighbouring
channels; the window is unrolled, padded taps masked. The arithmetic follows ATen's CUDA kernels:
float32 accumulation, the average's divisor from the window clipped to the padded input
(``count_include_pad``) or to the input."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ..ir.nodes import Pool

#: output elements per program and warps per program: 4 elements a lane, loads of 8 bytes in fp16
BLOCK, WARPS = 512, 4
#: the kernel indexes with 32-bit integers (its last block's lanes included); larger tensors go to ATen (the
#: candidate fails, see kernels.run_compiled)
MAX_ELEMENTS = 2**31 - 1 - BLOCK


def out_size(size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> int:
    """ATen's pooled length (no dilation): with ``ceil_mode`` a last window that starts in the right padding
    is dropped."""
    n = (size + 2 * pad - kernel + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= size + pad:
        n -= 1
    return n


@functools.cache
def _kernel():
    """The Triton program, defined on first use (Triton is imported only where a CUDA pool is run)."""
    import triton
    import triton.language as tl

    @triton.jit
    def pool2d(x_ptr, y_ptr, total, C, H, W, OH, OW, sxn, sxc, sxh, sxw, syn, syc, syh, syw,
               KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr,
               PW: tl.constexpr, IS_MAX: tl.constexpr, INCLUDE_PAD: tl.constexpr, NHWC: tl.constexpr,
               BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = i < total
        if NHWC:  # output elements in memory order: channels innermost
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

    return pool2d


def triton_pool(node: Pool) -> Callable[[torch.Tensor], torch.Tensor]:
    """``node`` (a max or average pool) as one Triton kernel, called as ``pool(x)`` on a dense CUDA tensor in
    either layout; the output is in the input's layout."""
    if node.pool_type not in ("max", "avg"):
        raise ValueError(f"node {node.name}: no Triton kernel for a {node.pool_type} pool")
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    is_max = node.pool_type == "max"

    def pool(x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        oh, ow = out_size(h, kh, sh, ph, node.ceil_mode), out_size(w, kw, sw, pw, node.ceil_mode)
        nhwc = not x.is_contiguous()  # dense in one of the two layouts (kernels.dense): NHWC where not NCHW
        y = torch.empty((n, c, oh, ow), device=x.device, dtype=x.dtype,
                        memory_format=torch.channels_last if nhwc else torch.contiguous_format)
        if max(x.numel(), y.numel()) > MAX_ELEMENTS:
            raise ValueError(f"node {node.name}: {x.numel()} elements are past the Triton pool's 32-bit indexing")
        total = y.numel()
        if total:
            _kernel()[(-(-total // BLOCK),)](x, y, total, c, h, w, oh, ow, *x.stride(), *y.stride(),
                                             KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, IS_MAX=is_max,
                                             INCLUDE_PAD=node.count_include_pad, NHWC=nhwc, BLOCK=BLOCK,
                                             num_warps=WARPS)
        return y
    return pool
