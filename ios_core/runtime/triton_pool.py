"""Max and average pools as hand-written Triton kernels, the "triton" pool candidate of :mod:`.kernels`.

Inductor compiled these pools before (``torch.compile`` of one ``F.max_pool2d``): the kernels were
fast, but each process paid Dynamo's and Inductor's first compile (most of a second a pool even
with every cache warm, most of a warm rerun: BENCHMARKS.md) and Inductor
specialized one program per shape. Here one Triton program covers every shape of a pool's window,
stride, padding, type and layout (sizes and strides are run-time arguments), and a later process
loads it from Triton's on-disk cache without Dynamo. Each program handles a block of output
elements in memory order (channels innermost for NHWC), so neighbouring lanes read neighbouring
channels; the window is unrolled, padded taps masked (the program: :mod:`.triton_programs`). The
arithmetic follows ATen's CUDA kernels: float32 accumulation, the average's divisor from the window
clipped to the padded input (``count_include_pad``) or to the input."""

from __future__ import annotations

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


def output_for(x: torch.Tensor, channels: int, oh: int, ow: int, what: str) -> tuple[torch.Tensor, bool]:
    """The output of a Triton kernel of this package for input ``x`` (dense, in either layout: NHWC where not
    NCHW, see kernels.dense), in ``x``'s layout, and whether that is NHWC; ``what`` names the node and kernel
    in the error for a tensor past the kernels' 32-bit indexing."""
    nhwc = not x.is_contiguous()
    y = torch.empty((x.shape[0], channels, oh, ow), device=x.device, dtype=x.dtype,
                    memory_format=torch.channels_last if nhwc else torch.contiguous_format)
    if max(x.numel(), y.numel()) > MAX_ELEMENTS:
        raise ValueError(f"{what}: {x.numel()} elements are past the Triton kernel's 32-bit indexing")
    return y, nhwc


def blocks(total: int) -> tuple[int]:
    """The launch grid for ``total`` output elements."""
    return (-(-total // BLOCK),)


def triton_pool(node: Pool) -> Callable[[torch.Tensor], torch.Tensor]:
    """``node`` (a max or average pool) as one Triton kernel, called as ``pool(x)`` on a dense CUDA tensor in
    either layout; the output is in the input's layout."""
    if node.pool_type not in ("max", "avg"):
        raise ValueError(f"node {node.name}: no Triton kernel for a {node.pool_type} pool")
    (kh, kw), (sh, sw), (ph, pw) = node.kernel, node.stride, node.padding
    is_max = node.pool_type == "max"

    def pool(x: torch.Tensor) -> torch.Tensor:
        from .ahead import launch
        from .triton_programs import pool2d  # Triton only where a CUDA pool is run

        _, c, h, w = x.shape
        oh, ow = out_size(h, kh, sh, ph, node.ceil_mode), out_size(w, kw, sw, pw, node.ceil_mode)
        y, nhwc = output_for(x, c, oh, ow, f"node {node.name}, Triton pool")
        if total := y.numel():
            launch(pool2d, blocks(total), x, y, total, c, h, w, oh, ow, *x.stride(), *y.stride(), KH=kh, KW=kw,
                   SH=sh, SW=sw, PH=ph, PW=pw, IS_MAX=is_max, INCLUDE_PAD=node.count_include_pad, NHWC=nhwc,
                   BLOCK=BLOCK, num_warps=WARPS)
        return y
    return pool
