"""What stands in the way of IOS's latency, kernel by kernel on the critical path (issue 42).

    python bench/critical_path.py --model inception_v3 --store /tmp/store [--triton-convs] [--out path.tsv]

Plans the model as the ios backend does (IOS-Both, every default; with ``--store`` a schedule saved there by an
earlier run is reused), replays the captured model under torch.profiler with 2 ms idle between inferences
(the trace is split where every stream idles 1 ms), and walks each inference's trace back from its last kernel
(:mod:`ios_core.runtime.critical`). Prints the median inference's path: each kernel's time, the idle gap before
it, its stream and kind; then the totals (span, kernel time, gaps) and the kernel time by kind. ``--out``
writes the path as a TSV."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from kernel_profile import category

from ios_core.models import build_model
from ios_core.planner import Planner, PlanOptions
from ios_core.runtime.critical import critical_path, read_trace, split_runs, summary
from ios_core.workload import Workload


def trace_runs(infer, x, calls: int) -> list:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        infer(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            infer(x)
            torch.cuda.synchronize()
            time.sleep(0.002)  # an idle stretch tells the inferences apart in the trace
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return split_runs(read_trace(path), idle_us=1000.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--store", default="", help="a store to reuse (and save) the schedule, layout and kernels in")
    ap.add_argument("--triton-convs", action="store_true")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.store:  # the Triton kernels the runs before compiled into this store: cache hits, as in the harness
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(args.store) / "inductor")
    work = Workload(build_model(args.model), args.batch, args.precision, torch.cuda.get_device_name())
    t0 = time.perf_counter()
    plan = Planner(PlanOptions(triton_convs=args.triton_convs), Path(args.store) if args.store else None).plan(
        work, "cuda")
    print(f"{args.model} {args.precision} bs{args.batch}: planned in {time.perf_counter() - t0:.1f} s "
          f"({plan.source}, {'NHWC' if plan.channels_last else 'NCHW'}, "
          f"{int(plan.metrics.get('kernel_conv_triton', 0))} Triton convs)")
    x = plan.load_input(np.random.default_rng(0).standard_normal((args.batch, *work.graph.input_shape))
                        .astype(np.float32))
    runs = trace_runs(plan.infer, x, args.calls)
    if len(runs) != args.calls:
        print(f"warning: the trace split into {len(runs)} inferences, not {args.calls}: the idle gap did not "
              "separate them")
    paths = sorted((critical_path(r) for r in runs), key=lambda p: summary(p)["span_us"])
    path = paths[len(paths) // 2]
    s = summary(path)
    spans = [summary(p)["span_us"] for p in paths]
    print(f"{len(runs)} inferences traced, {statistics.median(len(r) for r in runs)} kernels each; span median "
          f"{statistics.median(spans):.1f} us (min {spans[0]:.1f}, max {spans[-1]:.1f})")
    print(f"critical path of the median one: {s['kernels']:.0f} kernels on {s['streams']:.0f} streams, span "
          f"{s['span_us']:.1f} us = kernels {s['kernel_us']:.1f} + gaps {s['gap_us']:.1f}")
    kinds: dict[str, list[float]] = defaultdict(list)
    for st in path:
        kinds[category(st.kernel.name)].append(st.kernel.dur_us)
    print("by kind: " + ", ".join(f"{k} {len(v)} x {np.mean(v):.1f} us = {sum(v):.1f}"
                                  for k, v in sorted(kinds.items(), key=lambda kv: -sum(kv[1]))))
    rows = [f"{st.kernel.dur_us:.1f}\t{st.gap_us:.1f}\t{st.kernel.stream}\t{category(st.kernel.name)}\t"
            f"{st.kernel.name[:100]}" for st in path]
    print("kernel_us\tgap_us\tstream\tkind\tname")
    print("\n".join(rows))
    if args.out:
        Path(args.out).write_text("kernel_us\tgap_us\tstream\tkind\tname\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
