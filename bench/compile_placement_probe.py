"""Does where torch.compile's buffers land move its latency? (issue 56 item 8)

Fresh processes of torch.compile reduce-overhead on inception_v3 split into a fast and a slow group (BENCHMARKS.md,
"What makes processes differ"), with cuDNN's plans fixed and the allocator's segments either way. Here one process
compiles the same model again and again, each time after holding a block of GPU memory of a different size (or of
the same size, the control), and times each compiled function's CUDA-graph replays with CUDA events. If the
latencies split by the block's size, placement moves them; if they split in the control too, the compile itself
(its kernels or the graph tree) does.

    python bench/compile_placement_probe.py [--rounds 12] [--control] [--iters 2000] [--inductor KEY=VALUE ...]

--inductor sets an entry of torch._inductor.config (a Python literal), e.g. triton.autotune_pointwise=False.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import statistics

import torch
import torchvision


def timed(fn, x: torch.Tensor, iters: int) -> float:
    """Median of per-call CUDA-event times, ms, after three warm-up calls."""
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--control", action="store_true", help="the same block size every round")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inductor", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    for item in args.inductor:
        path, value = item.split("=", 1)
        *groups, name = path.split(".")
        owner = torch._inductor.config
        for group in groups:
            owner = getattr(owner, group)
        setattr(owner, name, ast.literal_eval(value))
    torch.backends.cudnn.benchmark = False
    rng = random.Random(args.seed)
    model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False).eval()
    model = model.half().cuda().to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 299, 299, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    held = []
    for r in range(args.rounds):
        torch._dynamo.reset()
        mib = 64 if args.control else rng.randrange(1, 512)
        held.append(torch.empty(mib << 20, dtype=torch.uint8, device="cuda"))
        fn = torch.compile(model, mode="reduce-overhead")
        with torch.inference_mode():
            ms = timed(fn, x, args.iters)
            out = fn(x)
        print(json.dumps({"round": r, "block_mib": mib, "median_ms": round(ms, 4),
                          "out_ptr_mod_2mib": out.data_ptr() % (2 << 20)}), flush=True)


if __name__ == "__main__":
    main()
