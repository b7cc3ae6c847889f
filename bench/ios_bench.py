"""IOS benchmark: every schedule and runtime of the ios backend against the pytorch
backend's eager, CUDA-graph and torch.compile reduce-overhead modes, through the
harness's common protocol (correctness check included).

    python bench/ios_bench.py --models inception_v3,squeezenet --precisions tf32 --out results/bench
    python bench/ios_bench.py --table results/bench --benchmarks-md BENCHMARKS.md   # table only

Writes one JSON line per run to <out>/ios_runs.jsonl and the table to <out>/ios_table.md;
with --benchmarks-md the table replaces the IOS section of that file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# cost model per model: RandWire has ~650k distinct candidate stages and NASNet ~75k,
# too many to time in one bench call; they are planned with the calibrated model
# (every unit measured, stages composed). Override with --cost.
COST = {"inception_v3": "measured", "squeezenet": "measured", "nasnet": "calibrated", "randwire": "calibrated"}
# IOS-Both searches first, so its search cost is measured with a cold cost cache.
IOS_RUNS = [("Sequential", {"schedule": "sequential"}), ("Greedy", {"schedule": "greedy"}),
            ("IOS-Both", {"schedule": "ios-both", "profile": True}), ("IOS-Merge", {"schedule": "ios-merge"}),
            ("IOS-Parallel", {"schedule": "ios-parallel"})]
TORCH_RUNS = [("PyTorch", {"mode": "eager"}), ("PyTorch-CUDAGraph", {"mode": "cudagraph"}),
              ("TorchCompile-RO", {"mode": "compile", "compile_mode": "reduce-overhead"})]
SECTION = "<!-- ios-bench -->"


def one(model: str, backend: dict, precision: str, device: str, runner: dict, results: str) -> dict:
    from harness.runner import run

    cfg = {"model": {"name": model}, "backend": backend, "batch": 1, "precision": precision,
           "device": {"type": device}, "runner": runner,
           "tracking": {"enabled": False, "results_dir": results}}
    rec = run(cfg)
    m = rec.get("metrics", {})
    return {"model": model, "precision": precision, "backend": backend["name"], "status": rec["status"],
            "summary": rec.get("summary", ""), "error": rec.get("error"), "metrics": m,
            "params": rec.get("params", {})}


def bench(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runner = {"isolate": False, "min_time_s": args.min_time, "max_time_s": 10.0, "warmup_time_s": 0.5}
    log = out / "ios_runs.jsonl"
    for precision in args.precisions.split(","):
        for model in args.models.split(","):
            cost = args.cost or COST.get(model, "measured")
            both_path = None
            for label, extra in IOS_RUNS:
                if label not in args.only.split(",") and args.only != "all":
                    continue
                be = {"name": "ios", "cost_model": cost, "progress": False, "store": args.results, **extra}
                r = one(model, be, precision, args.device, runner, args.results)
                r["label"] = label
                if label == "IOS-Both":
                    both_path = r["params"].get("schedule_path")
                _write(log, r)
            if both_path and ("IOS-Both-faithful" in args.only or args.only == "all"):
                be = {"name": "ios", "schedule_file": both_path, "runtime": "ios-faithful", "cost_model": cost,
                      "store": args.results, "progress": False}
                r = one(model, be, precision, args.device, runner, args.results)
                r["label"] = "IOS-Both (ios-faithful runtime)"
                _write(log, r)
            for label, extra in TORCH_RUNS:
                if label not in args.only.split(",") and args.only != "all":
                    continue
                r = one(model, {"name": "pytorch", **extra}, precision, args.device, runner, args.results)
                r["label"] = label
                _write(log, r)


def _write(log: Path, r: dict) -> None:
    print(json.dumps({k: r[k] for k in ("label", "model", "precision", "status")}),
          f"{r['metrics'].get('latency_median_ms', float('nan')):.3f} ms", r.get("error") or "", flush=True)
    with log.open("a") as f:
        f.write(json.dumps(r) + "\n")


def table(out: Path) -> str:
    rows = [json.loads(x) for p in sorted(out.glob("**/ios_runs.jsonl")) for x in p.read_text().splitlines() if x]
    lines = []
    for precision in sorted({r["precision"] for r in rows}):
        for model in dict.fromkeys(r["model"] for r in rows if r["precision"] == precision):
            rs = [r for r in rows if r["model"] == model and r["precision"] == precision]
            get = {r["label"]: r for r in rs}
            seq = get.get("Sequential", {}).get("metrics", {}).get("latency_median_ms")
            lines += [f"\n**{model}, batch 1, {precision}**\n",
                      "| schedule / backend | median ms | vs Sequential graph | search s | measured stages | "
                      "cache hit rate | latency / critical path |", "|---|---|---|---|---|---|---|"]
            for r in rs:
                m = r["metrics"]
                lat = m.get("latency_median_ms")
                if r["status"] != "FINISHED" or lat is None:
                    lines.append(f"| {r['label']} | failed: {(r.get('error') or '')[:80]} | | | | | |")
                    continue
                cp = m.get("critical_path_ms")
                lines.append(
                    f"| {r['label']} | {lat:.3f} | {seq / lat:.2f}x | "
                    + (f"{m['search_cost_s']:.1f}" if "search_cost_s" in m else "") + " | "
                    + (f"{int(m['search_measurements'])}" if "search_measurements" in m else "") + " | "
                    + (f"{m['search_cache_hit_rate']:.2f}" if "search_cache_hit_rate" in m else "") + " | "
                    + (f"{lat / cp:.2f} (cp {cp:.3f} ms)" if cp else "") + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="inception_v3,randwire,nasnet,squeezenet")
    ap.add_argument("--precisions", default="tf32,fp16,fp32")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="all", help="comma list of row labels to run (default all)")
    ap.add_argument("--cost", default="", help="cost model for every model (default: per model, see COST)")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench"))
    ap.add_argument("--results", default=str(ROOT / "results"))
    ap.add_argument("--table", default="", help="only build the table from the runs under this folder")
    ap.add_argument("--benchmarks-md", default="", help="write the table into this file's IOS section")
    args = ap.parse_args()
    if not args.table:
        t = time.time()
        bench(args)
        print(f"bench done in {time.time() - t:.0f} s")
    text = table(Path(args.table or args.out))
    Path(args.table or args.out, "ios_table.md").write_text(text)
    print(text)
    if args.benchmarks_md:
        p = Path(args.benchmarks_md)
        old = p.read_text() if p.exists() else ""
        head = old.split(SECTION)[0].rstrip() + "\n\n" if SECTION in old else old.rstrip() + "\n\n## IOS\n\n"
        tail = old.split(SECTION)[2] if old.count(SECTION) >= 2 else ""
        p.write_text(head + SECTION + "\n" + text + SECTION + tail)


if __name__ == "__main__":
    main()
