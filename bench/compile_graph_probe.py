"""Is torch.compile's per-compile spread made when its CUDA graph is captured? (issue 56 item 8)

bench/compile_placement_probe.py showed that recompiling inception_v3 with reduce-overhead in one process gives
latencies of 0.98-1.24 ms, whatever memory is held first and with or without the graph tree. Here the parts are
taken apart in one process:

- ``inductor``: one compile with ``mode="default"`` (Inductor's kernels, no CUDA graph), captured into ``--graphs``
  separate CUDA graphs (each with its own memory pool); every graph's replays are timed, then all are timed again in
  reverse order. A spread between graphs that repeats in the second pass is made by the capture, not the compile.
- ``eager``: the same with the eager module (cuDNN and ATen kernels, no Inductor): the control.
- ``recompile``: ``--graphs`` fresh compiles (``torch._dynamo.reset()``), each captured once.
- ``ro``: ``--graphs`` fresh compiles with ``mode="reduce-overhead"`` (torch's own CUDA graphs), each called as a user
  calls it: per call synchronised (CUDA events around the call, as the harness's GPU times), per call pipelined
  (200 calls back to back, events around all), and the host's time to return from one call.

    python bench/compile_graph_probe.py [--graphs 10] [--iters 1000] [--parts inductor,eager,recompile]

One JSON line per graph: part, index, the two passes' medians (ms, CUDA events around each replay).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torchvision


def replay_ms(graph: torch.cuda.CUDAGraph, iters: int) -> float:
    """Median of per-replay CUDA-event times, ms, after ten warm-up replays."""
    for _ in range(10):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def captured(fn, x: torch.Tensor) -> torch.cuda.CUDAGraph:
    """``fn(x)`` captured into a new CUDA graph (its own pool), after three warm-up calls on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(x)
    return graph


def timed_twice(part: str, graphs: list[torch.cuda.CUDAGraph], iters: int) -> None:
    first = [replay_ms(g, iters) for g in graphs]
    second = [replay_ms(g, iters) for g in reversed(graphs)][::-1]
    for i, (a, b) in enumerate(zip(first, second)):
        print(json.dumps({"part": part, "graph": i, "first_ms": round(a, 4), "second_ms": round(b, 4)}), flush=True)
    cv = statistics.pstdev(first) / statistics.mean(first)
    print(json.dumps({"part": part, "graphs": len(graphs), "cv_between": round(cv, 4),
                      "min_ms": round(min(first), 4), "max_ms": round(max(first), 4)}), flush=True)


def called(fn, x: torch.Tensor, iters: int) -> dict[str, float]:
    """A compiled function as users call it: per-call event times synchronised after each call, the per-call
    time of 200 calls in a row, and the host's time inside one call (median ms each)."""
    import time

    for _ in range(10):
        fn(x)
    torch.cuda.synchronize()
    synced, host = [], []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        fn(x)
        host.append((time.perf_counter() - t0) * 1e3)
        end.record()
        end.synchronize()
        synced.append(start.elapsed_time(end))
    rows = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(200):
            fn(x)
        end.record()
        end.synchronize()
        rows.append(start.elapsed_time(end) / 200)
    return {"synced_ms": round(statistics.median(synced), 4), "pipelined_ms": round(statistics.median(rows), 4),
            "host_ms": round(statistics.median(host), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", type=int, default=10)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--guard-filter", action="store_true",
                    help="ro with options={'guard_filter_fn': skip_guard_on_all_nn_modules_unsafe}")
    ap.add_argument("--parts", default="inductor,eager,recompile,ro")
    args = ap.parse_args()
    parts = args.parts.split(",")
    torch.backends.cudnn.benchmark = False  # the harness's default (backend.cudnn_search=heuristic)
    model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False).eval()
    model = model.half().cuda().to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 299, 299, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    with torch.inference_mode():
        if "inductor" in parts:
            fn = torch.compile(model, mode="default")
            fn(x)
            timed_twice("inductor", [captured(fn, x) for _ in range(args.graphs)], args.iters)
        if "eager" in parts:
            timed_twice("eager", [captured(model, x) for _ in range(args.graphs)], args.iters)
        if "recompile" in parts:
            graphs = []
            for _ in range(args.graphs):
                torch._dynamo.reset()
                fn = torch.compile(model, mode="default")
                fn(x)
                graphs.append(captured(fn, x))
            timed_twice("recompile", graphs, args.iters)
        if "ro" in parts:
            for i in range(args.graphs):
                torch._dynamo.reset()
                options = {"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe} \
                    if args.guard_filter else None
                fn = torch.compile(model, mode=None if options else "reduce-overhead",
                                   options={**options, "triton.cudagraphs": True} if options else None)
                print(json.dumps({"part": "ro", "guard_filter": args.guard_filter, "compile": i,
                                  **called(fn, x, args.iters)}), flush=True)


if __name__ == "__main__":
    main()
