"""The spread between fresh processes of each job (bench/gpu_process_spread.sh): one Markdown row per network,
backend and cuDNN plan choice with the processes' medians, their CV, the headline and the preparation cost.
    python bench/spread_table.py OUT/records_*.tgz [more record folders]"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path


def records(source: str):
    path = Path(source)
    if path.is_dir():
        for f in sorted(path.rglob("*.json")):
            data = json.loads(f.read_text())
            if "/sweeps/" not in str(f) and "metrics" in data:
                yield data
        return
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".json") and "/sweeps/" not in member.name:
                data = json.load(tar.extractfile(member))
                if "metrics" in data:
                    yield data


def main(sources: list[str]) -> None:
    print("| network | backend | cudnn_search | medians of the processes, ms | headline ms | CV between | "
          "min-max | cost first / last s |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for source in sources:
        for r in records(source):
            cfg, m = r["config"], r["metrics"]
            search = cfg["backend"].get("cudnn_search", "-")
            name = cfg["model"].get("arch") or cfg["model"]["name"]  # a zoo model by its architecture
            medians = r["params"].get("process_medians_ms", "")
            if r["status"] != "FINISHED":
                rows.append((name, r.get("label", ""), search, r["status"], "-", "-", "-", "-"))
                continue
            rows.append((name, r.get("label", ""), search,
                         " ".join(f"{float(v):.3f}" for v in medians.split(",") if v),
                         f"{m['latency_median_ms']:.4f}", f"{100 * m.get('latency_process_cv', 0):.1f}%",
                         f"{m.get('latency_process_min_ms', 0):.3f}-{m.get('latency_process_max_ms', 0):.3f}",
                         f"{m['optimization_cost_s']:.1f} / {m.get('optimization_cost_last_s', 0):.1f}"))
    for row in sorted(rows):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
