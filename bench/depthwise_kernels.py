"""A network's depthwise convolutions on cuDNN, on IOS's Triton kernel and on ATen's own, one by one (issue 42:
a warm NASNet spends 5-7 s in cuDNN building its depthwise plans; a kernel as fast that starts in milliseconds
takes that away).

    python bench/depthwise_kernels.py --model nasnet [--precision fp16] [--search benchmark|heuristic]
    python bench/depthwise_kernels.py --model nasnet,randwire --tiles 8,16,32,64 --channels 32,64 --warps 2,4

Each distinct depthwise convolution of the network (IOS's default passes, NHWC, batch 1): each kernel's first call
in this process (cuDNN's plan build; Triton's compile, or its load from Triton's disk cache in a second run; each
path's one-off process costs paid before, on a 1x1 shape) and
its steady-state time, replayed 50 times in a CUDA graph; the Triton kernel's output checked against cuDNN's.
Then the sums, and on how many shapes the Triton kernel is faster than cuDNN's. With ``--tiles`` the Triton
kernel instead runs every tile given (pixels x channels x warps, on each shape's steady state only): a line
per shape and tile, then per shape the best tile against cuDNN's and the default tile's time (what a better
:func:`~ios_core.runtime.triton_depthwise.tile` could gain)."""

from __future__ import annotations

import argparse
import functools

import torch
import torch.nn.functional as F
from cudnn_plan_probe import first_ms, replay_us, shapes, tensors

from ios_core.ir.nodes import Conv, Value
from ios_core.runtime.kernels import conv_native
from ios_core.runtime.triton_depthwise import tile, triton_depthwise


def depthwise(c: int, k: tuple, s: tuple, p: tuple, d: tuple, name: str) -> Conv:
    return Conv(name=name, inputs=[[Value("x", 0, c)]], out_channels=c, kernel=k, stride=s, padding=p, dilation=d,
                groups=c, act="identity")


def kernels(c: int, k: tuple, s: tuple, p: tuple, d: tuple, x: torch.Tensor, wt: torch.Tensor, name: str):
    """The convolution on cuDNN (NHWC weights), on the Triton kernel and on ATen's (NCHW weights: their form)."""
    node = depthwise(c, k, s, p, d, name)
    w_nchw = wt.contiguous()
    return (functools.partial(F.conv2d, x, wt, None, s, p, d, c),
            functools.partial(triton_depthwise(node), x, w_nchw, None),
            functools.partial(conv_native, node, x, w_nchw, None))


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def tiles(models: list[str], dtype: torch.dtype, pixels: list[int], channels: list[int], warps: list[int]) -> None:
    """Each distinct depthwise shape of ``models`` on cuDNN, the default tile and every tile given (at least one
    element a thread, at most 8192 a program; channel tiles up to the channels' next power of two)."""
    seen = dict.fromkeys(shape for m in models for shape in shapes(m))
    sums = [0.0, 0.0, 0.0]
    for i, (c, h, w, k, s, p, d) in enumerate(seen):
        x, wt = tensors(c, h, w, k, dtype)
        cudnn, default, _ = kernels(c, k, s, p, d, x, wt, f"dw{i}")
        ref = cudnn().float()
        base = [replay_us(cudnn), replay_us(default)]
        oh, ow = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
        node, w_nchw = depthwise(c, k, s, p, d, f"dw{i}"), wt.contiguous()
        best = (float("inf"), None)
        for bc in [v for v in channels if v <= max(16, 1 << (c - 1).bit_length())]:
            for bp in pixels:
                for nw in warps:
                    if not 32 * nw <= bp * bc <= 8192:
                        continue
                    f = functools.partial(triton_depthwise(node, (bp, bc, nw)), x, w_nchw, None)
                    err = ((f().float() - ref).abs().max() / ref.abs().max()).item()
                    us = replay_us(f)
                    print(f"cfg\t{i}\tc{c} {h}x{w} k{k} s{s}\t{bp}x{bc} w{nw}\t{us:.2f}\terr {err:.1e}", flush=True)
                    best = min(best, (us, (bp, bc, nw)))
        sums = [sums[0] + base[0], sums[1] + base[1], sums[2] + best[0]]
        print(f"{i} c{c} {h}x{w} k{k} s{s}\tus cudnn {base[0]:.2f} default {tile(oh * ow, c)} {base[1]:.2f} "
              f"best {best[1]} {best[0]:.2f}", flush=True)
    print(f"{','.join(models)}: {len(seen)} shapes; summed us cudnn {sums[0]:.1f} default tile {sums[1]:.1f} "
          f"best tile per shape {sums[2]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="nasnet", help="a network, or several (comma separated) with --tiles")
    ap.add_argument("--tiles", type=ints, help="pixel tiles to time the Triton kernel with (powers of two)")
    ap.add_argument("--channels", type=ints, default=[16, 32, 64], help="channel tiles, with --tiles")
    ap.add_argument("--warps", type=ints, default=[4], help="warps a program, with --tiles")
    ap.add_argument("--precision", default="fp16", choices=("fp16", "fp32"))
    ap.add_argument("--search", default="benchmark", choices=("benchmark", "heuristic"))
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = a.search == "benchmark"
    dtype = torch.float16 if a.precision == "fp16" else torch.float32
    if a.tiles:
        tiles(a.model.split(","), dtype, a.tiles, a.channels, a.warps)
        return
    # each path's one-off costs (cuDNN's handle, Triton's import and launcher) on a shape of no network's
    x, wt = tensors(8, 5, 5, (1, 1), dtype)
    for f in kernels(8, (1, 1), (1, 1), (0, 0), (1, 1), x, wt, "warmup"):
        f()
    rows, faster = [], 0
    for i, (c, h, w, k, s, p, d) in enumerate(shapes(a.model)):
        x, wt = tensors(c, h, w, k, dtype)
        cudnn, triton, native = kernels(c, k, s, p, d, x, wt, f"dw{i}")
        firsts = [first_ms(f) for f in (cudnn, triton, native)]
        err = ((triton().float() - cudnn().float()).abs().max() / cudnn().float().abs().max()).item()
        steady = [replay_us(f) for f in (cudnn, triton, native)]
        faster += steady[1] < steady[0]
        rows.append((firsts, steady))
        oh, ow = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
        print(f"{i} c{c} {h}x{w} k{k} s{s} tile {tile(oh * ow, c)}\t"
              f"first ms cudnn {firsts[0]:.1f} triton {firsts[1]:.1f} aten {firsts[2]:.1f}\t"
              f"us cudnn {steady[0]:.2f} triton {steady[1]:.2f} aten {steady[2]:.2f}\terr {err:.1e}", flush=True)
    sums = [sum(r[j][q] for r in rows) for j in (0, 1) for q in range(3)]
    print(f"{a.model} {a.precision} search={a.search} torch {torch.__version__} cudnn {torch.backends.cudnn.version()}"
          f": {len(rows)} shapes; first calls s cudnn {sums[0] / 1e3:.2f} triton {sums[1] / 1e3:.2f} aten "
          f"{sums[2] / 1e3:.2f}; summed us cudnn {sums[3]:.1f} triton {sums[4]:.1f} aten {sums[5]:.1f}; "
          f"Triton faster than cuDNN on {faster} of {len(rows)}")


if __name__ == "__main__":
    main()
