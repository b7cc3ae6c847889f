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

# IOS-Both searches first, so its search cost is measured with a cold cost cache; research=true
# so that a schedule saved by an earlier bench run is not reused.
IOS_RUNS = [("IOS-Both", {"schedule": "ios-both", "research": True}),
            ("IOS-Both-rerun", {"schedule": "ios-both", "research": False}),  # reuses the saved schedule
            ("Sequential", {"schedule": "sequential"}),
            ("Greedy", {"schedule": "greedy"}), ("IOS-Merge", {"schedule": "ios-merge", "research": True}),
            ("IOS-Parallel", {"schedule": "ios-parallel", "research": True}),
            # the stream assignment before producer-chain/false-dependency avoidance, for comparison
            ("Greedy-stage-order", {"schedule": "greedy", "streams": "stage-order"}),
            ("IOS-Both-stage-order", {"schedule": "ios-both", "research": True, "streams": "stage-order"})]
TORCH_RUNS = [("PyTorch", {"mode": "eager"}), ("PyTorch-CUDAGraph", {"mode": "cudagraph"}),
              ("TorchCompile-RO", {"mode": "compile", "compile_mode": "reduce-overhead"})]
SECTION = "<!-- ios-bench -->"


def one(model: str, backend: dict, precision: str, device: str, runner: dict, results: str, batch: int = 1) -> dict:
    from harness.job import run

    cfg = {"model": {"name": model}, "backend": backend, "batch": batch, "precision": precision,
           "device": {"type": device}, "runner": runner,
           "tracking": {"enabled": False, "results_dir": results}}
    rec = run(cfg)
    return {"model": model, "precision": precision, "batch": batch, "backend": backend["name"], "status": rec.status,
            "summary": rec.summary or "", "error": rec.error, "metrics": rec.metrics, "params": rec.params}


def bench(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runner = {"isolate": False, "min_time_s": args.min_time, "max_time_s": 10.0, "warmup_time_s": 0.5}
    log = out / "ios_runs.jsonl"
    wanted = set(args.only.split(","))
    for batch in [int(b) for b in args.batches.split(",")]:
        for precision in args.precisions.split(","):
            for model in args.models.split(","):
                for label, extra in IOS_RUNS:
                    if label not in wanted and args.only != "all":
                        continue
                    be = {"name": "ios", "progress": True, "store": args.results, **extra}
                    if args.cost:
                        be["cost_model"] = args.cost
                    r = one(model, be, precision, args.device, runner, args.results, batch)
                    r["label"] = label
                    _write(log, r)
                for k in range(args.cold_searches):  # each with an empty store: a cold cost cache
                    be = {"name": "ios", "progress": True, "store": f"{args.results}/cold{k}-{model}-{precision}",
                          "schedule": "ios-both", "research": True, **({"cost_model": args.cost} if args.cost else {})}
                    r = one(model, be, precision, args.device, runner, args.results, batch)
                    r["label"] = f"IOS-Both (cold search {k + 1})"
                    _write(log, r)
                for label, extra in TORCH_RUNS:
                    if label not in wanted and args.only != "all":
                        continue
                    r = one(model, {"name": "pytorch", **extra}, precision, args.device, runner, args.results, batch)
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
    cells = dict.fromkeys((r.get("batch", 1), r["precision"], r["model"]) for r in rows)
    for batch, precision, model in sorted(cells, key=lambda c: (c[0], c[1])):
        rs = [r for r in rows if r["model"] == model and r["precision"] == precision and r.get("batch", 1) == batch]
        get = {r["label"]: r.get("metrics", {}).get("latency_median_ms") for r in rs if r["status"] == "FINISHED"}
        greedy, seq = get.get("Greedy"), get.get("Sequential")
        lines += [f"\n**{model}, batch {batch}, {precision}**\n",
                  "| schedule / backend | median ms | vs Greedy | vs Sequential | search s | stages timed | "
                  "predicted (stage sum) | predicted (in situ) | latency / critical path |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rs:
            m = r["metrics"]
            lat = m.get("latency_median_ms")
            if r["status"] != "FINISHED" or lat is None:
                lines.append(f"| {r['label']} | failed: {(r.get('error') or '')[:80]} | | | | | | | |")
                continue
            cp = m.get("critical_path_ms")

            def f(key: str, fmt: str = "{:.3f}", m: dict = m) -> str:
                return fmt.format(m[key]) if key in m else ""
            pred = f"{m['predicted_ms']:.3f} ({m['prediction_error_pct']:+.0f}%)" if "predicted_ms" in m else ""
            ins = (f"{m['predicted_insitu_ms']:.3f} ({m['predicted_insitu_error_pct']:+.0f}%)"
                   if "predicted_insitu_ms" in m else "")
            lines.append(f"| {r['label']} | {lat:.3f} | " + (f"{greedy / lat:.2f}x" if greedy else "") + " | "
                         + (f"{seq / lat:.2f}x" if seq else "") + " | " + f("search_cost_s", "{:.1f}") + " | "
                         + f("search_measurements", "{:.0f}") + f" | {pred} | {ins} | "
                         + (f"{lat / cp:.2f} (cp {cp:.3f} ms)" if cp else "") + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="inception_v3,randwire,nasnet,squeezenet")
    ap.add_argument("--precisions", default="tf32,fp16,fp32")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="all", help="comma list of row labels to run (default all)")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--cold-searches", type=int, default=0, help="extra IOS-Both searches, each from an empty store")
    ap.add_argument("--cost", default="", help="cost model for every model (default: the backend's, auto)")
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
