"""Where the GPU time goes: IOS (Greedy, every default: NHWC, passes, kernel choice) beside
torch.compile reduce-overhead, kernel by kernel, from torch.profiler over captured replays.

    python bench/kernel_profile.py --model inception_v3 --precision fp16 --batch 1 128
    python bench/kernel_profile.py --model timm:mobilevit_s --batch 1   (any model=timm/torchvision arch)

Prints per inference: wall time (CUDA events, back to back), summed kernel time, kernel count,
and the kernel time by category (cuDNN conv, GEMM, Triton template/pointwise, pool, concat,
layout conversion, other), then the largest kernels. For issue 24's "what stands in the way"."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

import numpy as np
import torch

from harness_plugins.pytorch.layout import time_ms
from ios_core.interpreters.torch import to_torch
from ios_core.models import build_model
from ios_core.passes import PASSES, apply_passes
from ios_core.runtime import ScheduledModel, TorchTarget
from ios_core.runtime.kernels import KernelTable
from ios_core.runtime.timer import kernel_timer
from ios_core.schedule.schedule import greedy

#: first match wins: cuDNN's convolutions are "implicit GEMM" kernels (xmma_fprop_implicit_gemm), so they are
#: told apart before cuBLAS's GEMMs (nvjet on Hopper, xmma_gemm, cutlass); Triton's templates before its other kernels
CATEGORIES = [("layout", r"nchwtonhwc|nhwctonchw"), ("triton-template", r"^triton_(tem|conv)"),
              ("triton-fused", r"^triton_"), ("pool", r"pool"), ("concat", r"cat"),
              ("conv", r"fprop|implicit|conv|cudnn"), ("gemm", r"gemm|cublas|cutlass|nvjet"),
              ("conv", r"xmma|sm\d\d_")]


def category(name: str) -> str:
    low = name.lower()
    return next((c for c, pat in CATEGORIES if re.search(pat, low)), "other")


def profile(name: str, infer, x, calls: int = 10) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    wall = time_ms(infer, x)
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            infer(x)
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = defaultdict(float)
    count = 0
    for e in prof.events():
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        us = getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
        per_kernel[e.name] += us / calls
        count += 1
    total = sum(per_kernel.values()) / 1000
    cats: dict[str, float] = defaultdict(float)
    for k, us in per_kernel.items():
        cats[category(k)] += us / 1000
    print(f"\n== {name}: wall {wall:.3f} ms/inference, kernels {total:.3f} ms in {count / calls:.0f} launches "
          f"(GPU busy {min(total / wall, 9.99):.0%} of wall)")
    print("   " + ", ".join(f"{c} {ms:.3f}" for c, ms in sorted(cats.items(), key=lambda kv: -kv[1])))
    for k, us in sorted(per_kernel.items(), key=lambda kv: -kv[1])[:8]:
        print(f"   {us / 1000:8.3f} ms  {category(k):16s} {k[:110]}")


def source(name: str, batch: int):
    """The IR and the PyTorch module to compile: a zoo network's own IR (and the IR as a module), or a timm or
    torchvision architecture (``timm:mobilevit_s``) imported as the harness does (ONNX export, then the IR)."""
    if ":" not in name:
        g = build_model(name)
        return g, to_torch(g)
    from harness.models import Model
    from harness.models.source import ModelSource

    zoo, arch = name.split(":", 1)
    model = Model(ModelSource(zoo, arch), batch)
    return model.graph(), model.module()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 128])
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    for batch in args.batch:
        g0, module = source(args.model, batch)
        g, rewrites = apply_passes(g0, list(PASSES))
        print(f"{args.model} bs{batch}: {sum(1 for _ in g0.nodes())} operators, "
              f"{sum(1 for _ in g.nodes())} after the passes {rewrites}")
        x = np.random.default_rng(0).standard_normal((batch, *g0.input_shape)).astype(np.float32)
        target = TorchTarget("cuda", args.precision, True)
        table = KernelTable("auto", kernel_timer(target))
        model = ScheduledModel(g, greedy(g), "cuda", args.precision, "graph", channels_last=True, kernels=table)
        infer, load = model.prepare(batch)
        profile(f"{args.model} {args.precision} bs{batch} IOS Greedy (NHWC, passes, kernels auto)", infer, load(x))
        del model, infer
        if args.no_compile:
            continue
        module = target.module(module)
        fn = torch.compile(module, mode="reduce-overhead")
        xt = target.tensor(x)
        with torch.inference_mode():
            for _ in range(3):
                fn(xt)

            def run(t, fn=fn):
                return fn(t)
            profile(f"{args.model} {args.precision} bs{batch} torch.compile reduce-overhead (NHWC)", run, xt)
        torch._dynamo.reset()


if __name__ == "__main__":
    with torch.inference_mode():
        main()
