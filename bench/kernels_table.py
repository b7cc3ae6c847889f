"""Print one row per record of a results folder: what ran (model, variant, precision, batch,
layout, passes, kernels) and its median latency. Used by bench/gpu_kernels.sh on machines
without MLflow, where the records are the results."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(results: Path):
    for p in sorted((results / "records").rglob("*.json"), key=lambda p: p.stat().st_mtime):
        try:
            r = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if "config" not in r:
            continue
        c, m, pa = r["config"], r.get("metrics", {}), r.get("params", {})
        be = c.get("backend", {})
        yield {
            "model": c["model"]["name"], "variant": r.get("label"), "precision": c["precision"],
            "batch": c["batch"], "status": r.get("status"), "median_ms": m.get("latency_median_ms"),
            "layout": pa.get("layout", be.get("channels_last")), "how": pa.get("layout_chosen_by", ""),
            "passes": pa.get("passes", ""), "kernels": be.get("kernels", ""),
            "gemm": m.get("kernel_gemm"), "nchw_ms": m.get("layout_nchw_ms"), "nhwc_ms": m.get("layout_nhwc_ms"),
            "cost_s": m.get("optimization_cost_s"), "final": pa.get("ios_final", ""),
            "greedy_ms": m.get("schedule/search_whole_greedy_ms", m.get("search_whole_greedy_ms")),
            "pools_triton": m.get("kernel_pool_triton"), "rel_err": m.get("max_rel_error"),
            "seq_ms": m.get("search_whole_sequential_ms"),
            "error": (r.get("error") or "")[:120],
        }


def main() -> None:
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "results")
    keys = ["model", "variant", "precision", "batch", "status", "median_ms", "layout", "how", "passes", "kernels",
            "gemm", "nchw_ms", "nhwc_ms", "greedy_ms", "seq_ms", "final", "cost_s", "pools_triton", "rel_err", "error"]
    print("\t".join(keys))
    for row in rows(results):
        print("\t".join("" if row[k] is None else (f"{row[k]:.4g}" if isinstance(row[k], float) else str(row[k]))
                        for k in keys))


if __name__ == "__main__":
    main()
