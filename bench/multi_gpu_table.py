"""Issue 30's check of a multi-GPU run of bench/gpu_multi.sh, from the records it brought back.

For each job of the load-aware sweep: the GPU it ran on, its latency, the same job (the same IOS
schedule, read from the load-aware sweep's store) measured alone on that GPU afterwards, and the
difference with both CIs; the basic one-GPU sweep's latency (its own search) beside them; the
exclusive (measuring) spans per GPU checked for overlap; the two sweeps' walls and makespans.

    python bench/multi_gpu_table.py OUTDIR    (OUTDIR: the files gpu_multi.sh wrote under $OUT)
"""
from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path
from typing import Any

Job = tuple[str, str, int]


def records(tgz: Path) -> list[dict[str, Any]]:
    """The run records of one sweep's records tarball (its sweep entries left out)."""
    if not tgz.exists():
        return []
    with tarfile.open(tgz) as tar:
        return [json.load(tar.extractfile(m)) for m in tar.getmembers()  # type: ignore[arg-type]
                if m.isfile() and m.name.count("/") == 1 and m.name.endswith(".json")]


def job(rec: dict[str, Any]) -> Job:
    c = rec["config"]
    return c["model"]["name"], c["backend"]["name"], int(c["batch"])


def gpu_of(rec: dict[str, Any]) -> int:
    tags, params = rec.get("tags", {}), rec.get("params", {})
    return int(params.get("launcher_gpu_index", tags.get("gpu_index", 0)))


def latency(rec: dict[str, Any] | None) -> tuple[float, float] | None:
    """Median ms and the CI's relative half-width."""
    if rec is None or "latency_median_ms" not in rec.get("metrics", {}):
        return None
    m = rec["metrics"]
    return m["latency_median_ms"], m.get("latency_ci_rel_halfwidth", 0.0)


def spans(rec: dict[str, Any]) -> list[tuple[float, float]]:
    text = rec.get("artifacts", {}).get("leases.json")
    return [tuple(s) for s in json.loads(text).get("spans", [])] if text else []  # type: ignore[misc]


def overlaps(by_gpu: dict[int, list[tuple[float, float, Job]]]) -> tuple[int, int]:
    """Exclusive spans of different jobs on one GPU that intersect, and spans in all."""
    bad = total = 0
    for items in by_gpu.values():
        items.sort()
        total += len(items)
        end, owner = float("-inf"), None
        for start, stop, who in items:  # each span against the latest-ending one before it
            bad += start < end and who != owner
            if stop > end:
                end, owner = stop, who
    return bad, total


def cell(value: tuple[float, float] | None) -> str:
    return "—" if value is None else f"{value[0]:.3f} ±{value[1]:.1%}"


def diff(a: tuple[float, float] | None, b: tuple[float, float] | None) -> str:
    if a is None or b is None:
        return "—"
    change = a[0] / b[0] - 1
    ci = (a[1] ** 2 + b[1] ** 2) ** 0.5
    return f"{change:+.1%} (±{ci:.1%})" + (" **>3%**" if abs(change) > 0.03 else "")


def table(out: Path) -> str:
    basic = {job(r): r for r in records(out / "records_basic.tgz")}
    la = {job(r): r for r in records(out / "records_loadaware.tgz")}
    alone = {(job(r), gpu_of(r)): r for r in records(out / "records_alone.tgz")}
    lines = ["| job | GPU | basic, own search (GPU 0) | load-aware | same schedule alone, same GPU | "
             "load-aware vs alone | noisy |", "|---|---|---|---|---|---|---|"]
    by_gpu: dict[int, list[tuple[float, float, Job]]] = {}
    for key in sorted(la):
        rec, g = la[key], gpu_of(la[key])
        by_gpu.setdefault(g, []).extend((s, e, key) for s, e in spans(rec))
        solo = alone.get((key, g))
        noisy = "yes" if any(r and r["metrics"].get("latency_cv", 0) > 0.1 for r in (rec, solo)) else ""
        lines.append(f"| {key[0]} {key[1]} bs{key[2]} | {g} | {cell(latency(basic.get(key)))} | "
                     f"{cell(latency(rec))} | {cell(latency(solo))} | {diff(latency(rec), latency(solo))} | {noisy} |")
    bad, total = overlaps(by_gpu)
    lines += ["", f"exclusive (measuring) spans: {total} over {len(by_gpu)} GPU(s), {bad} overlapping on one GPU"]
    walls = out / "walls.txt"
    if walls.exists():
        lines += ["", "```", walls.read_text().strip(), "```"]
    summary = out / "launcher_loadaware.json"
    if summary.exists():
        s = json.loads(summary.read_text())
        lines.append(f"load-aware makespan {s['makespan_s']:.1f} s, device busy "
                     + ", ".join(f"{u:.0%}" for u in s["device_utilization"])
                     + f", own work {s['work_s']:.1f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python bench/multi_gpu_table.py OUTDIR (the folder gpu_multi.sh wrote)")
    print(table(Path(sys.argv[1])))
