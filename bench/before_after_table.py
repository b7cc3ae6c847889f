"""The table of bench/gpu_before_after.sh: per model and backend, before and after, the median latency with its
CI, whether the CIs overlap, and the optimization cost (each run in its order: the sweep's, then the rerun's).

    python bench/before_after_table.py <folder with before/ and after/ unpacked>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def runs(folder: Path) -> list[dict]:
    """The records of one tree's runs, oldest first (the sweep's, then the mission rerun)."""
    found = [json.loads(p.read_text()) for p in folder.glob("records/**/*.json") if "sweeps" not in p.parts]
    return sorted((r for r in found if "metrics" in r and "config" in r), key=lambda r: r.get("created", ""))


def key(record: dict) -> tuple[str, str]:
    """(model, backend as the record labels it: IOS-Both, PyTorch compile reduce-overhead, ...)."""
    model = record["config"]["model"]["name"]
    return model, record.get("label", "").removesuffix(f" {model}").strip() or record["config"]["backend"]["name"]


def main(root: Path) -> None:
    tables = {}
    for tag in ("before", "after"):
        seen: dict[tuple[str, str], int] = {}
        tables[tag] = {}
        for r in runs(root / tag):
            model, backend = key(r)
            n = seen[(model, backend)] = seen.get((model, backend), 0) + 1
            tables[tag][(model, backend, n)] = r["metrics"], r.get("status")
    print("| model | backend | run | before ms [CI] | after ms [CI] | CIs overlap | cost before s | cost after s |")
    print("|---|---|---|---|---|---|---|---|")
    for k in sorted(set(tables["before"]) | set(tables["after"])):
        cells = []
        bounds = []
        for tag in ("before", "after"):
            m, status = tables[tag].get(k, ({}, "missing"))
            if "latency_median_ms" not in m:
                cells.append(str(status))
                bounds.append(None)
                continue
            med = m["latency_median_ms"]
            lo, hi = m.get("latency_ci_low_ms", med), m.get("latency_ci_high_ms", med)
            cells.append(f"{m['latency_median_ms']:.3f} [{lo:.3f}, {hi:.3f}]")
            bounds.append((lo, hi))
        overlap = "-" if None in bounds else "yes" if bounds[0][0] <= bounds[1][1] and bounds[1][0] <= bounds[0][1] \
            else "no"
        costs = [tables[tag].get(k, ({}, ""))[0].get("optimization_cost_s") for tag in ("before", "after")]
        cost = [f"{c:.1f}" if c is not None else "-" for c in costs]
        print(f"| {k[0]} | {k[1]} | {k[2]} | {cells[0]} | {cells[1]} | {overlap} | {cost[0]} | {cost[1]} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
