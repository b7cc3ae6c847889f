"""What a network's convolutions cost the first time a process runs them (issue 42: a warm rerun of nasnet spent
7-10 s preparing with nothing searched or compiled, inception_v3 about 1 s).

    python bench/conv_first_call.py --model nasnet [--precision fp16] [--batch 1] [--search benchmark|heuristic]
                                    [--depthwise cudnn|native] [--threads N]

Each distinct convolution of the network (after IOS's default passes; NHWC memory) is run once and timed to its
end (cuDNN picks, or searches for, its execution plan and loads its kernels), then again (the steady state). By
kind (depthwise, pointwise 1x1, other): count, first-call seconds, steady microseconds, and the slowest first
calls. ``--depthwise native`` runs depthwise convolutions with cuDNN off (ATen's own CUDA kernel). One process
per setting: cuDNN keeps the first plan a shape gets for the life of the process. PyTorch's legacy (v7) cuDNN
API instead of the graph (v8) one: TORCH_CUDNN_V8_API_DISABLED=1, read once per process. ``--threads N``: the
first calls from N threads at once (cuDNN builds plans on the host: whether a warm rerun could build them in
parallel), timed as one wall time before the per-kind steady state."""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

from ios_core.ir.nodes import Conv, Sequential
from ios_core.models import build_model
from ios_core.passes import apply_passes
from ios_core.planner import DEFAULT_PASSES


def convs(graph):
    """(node, input shape (C, H, W)) of every convolution, those inside compounds included."""
    for node in graph.nodes():
        if isinstance(node, Sequential):
            shape = graph.input_shape_of(node)
            for inner in node.nodes:
                if isinstance(inner, Conv):
                    yield inner, shape
                shape = inner.output_shape
        elif isinstance(node, Conv):
            yield node, graph.input_shape_of(node)


def kind(node: Conv, channels: int) -> str:
    if node.groups > 1 and node.groups == channels:
        return "depthwise"
    return "pointwise" if node.kernel == (1, 1) else "other"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="nasnet")
    ap.add_argument("--precision", default="fp16", choices=("fp16", "fp32"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--search", default="benchmark", choices=("benchmark", "heuristic"))
    ap.add_argument("--depthwise", default="cudnn", choices=("cudnn", "native"))
    ap.add_argument("--threads", type=int, default=0, help="first calls from this many threads at once")
    a = ap.parse_args()
    if a.threads and a.depthwise == "native":
        ap.error("--threads with --depthwise native: cuDNN's on/off flag is process-wide, threads would race on it")
    torch.backends.cudnn.benchmark = a.search == "benchmark"
    dtype = torch.float16 if a.precision == "fp16" else torch.float32
    graph, _ = apply_passes(build_model(a.model), list(DEFAULT_PASSES))
    torch.zeros(1, device="cuda")  # the context, outside the timings
    seen: set[tuple] = set()
    first: dict[str, list[float]] = defaultdict(list)
    steady: dict[str, list[float]] = defaultdict(list)
    slowest: list[tuple[float, str]] = []
    runs = []
    for node, (c, h, w) in convs(graph):
        key = (c, h, w, node.out_channels, node.kernel, node.stride, node.padding, node.groups, node.dilation)
        if key in seen:
            continue
        seen.add(key)
        x = torch.randn(a.batch, c, h, w, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
        wt = torch.randn(node.out_channels, c // node.groups, *node.kernel, device="cuda", dtype=dtype)
        wt = wt.contiguous(memory_format=torch.channels_last)
        k = kind(node, c)
        native = k == "depthwise" and a.depthwise == "native"

        def run(x=x, wt=wt, node=node, native=native) -> None:
            with torch.backends.cudnn.flags(enabled=not native, benchmark=a.search == "benchmark"):
                F.conv2d(x, wt, None, node.stride, node.padding, node.dilation, node.groups)
        runs.append((k, key, run))
    parallel_s = None
    if a.threads:  # every first call at once; PyTorch keeps cuDNN plans per thread, so the calls below (this
        # thread's own first ones) show what a plan build from other threads leaves to the thread that runs
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(a.threads) as pool:
            list(pool.map(lambda r: (r[2](), torch.cuda.synchronize()), runs))
        parallel_s = time.perf_counter() - t0
    for k, key, run in runs:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        first[k].append(t1 - t0)
        steady[k].append((t2 - t1) / 3 * 1e6)
        slowest.append((t1 - t0, f"{k} {key}"))
    print(f"{a.model} {a.precision} batch {a.batch} search={a.search} depthwise={a.depthwise} "
          f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} "
          f"TORCH_CUDNN_V8_API_DISABLED={os.environ.get('TORCH_CUDNN_V8_API_DISABLED', '')}")
    if parallel_s is not None:
        print(f"parallel first calls\t{len(runs)} convs\t{a.threads} threads\t{parallel_s:.2f} s")
    print("kind\tconvs\tfirst_s\tfirst_ms_each\tsteady_us_sum")
    for k in sorted(first):
        print(f"{k}\t{len(first[k])}\t{sum(first[k]):.2f}\t{1e3 * sum(first[k]) / len(first[k]):.1f}\t"
              f"{sum(steady[k]):.0f}")
    for s, what in sorted(slowest, reverse=True)[:8]:
        print(f"slowest\t{1e3 * s:.0f} ms\t{what}")


if __name__ == "__main__":
    main()
