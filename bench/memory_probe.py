"""What IOS leaves allocated on the GPU after a plan (issue 42's memory question): a cold plan held 797 MB in
PyTorch's allocator when the timed loop began, a plan that reused the schedule 195 MB (inception_v3 fp16 bs1,
H100), against torch.compile's 43.

    python bench/memory_probe.py --model inception_v3 [--precision fp16] [--batch 1]

Plans twice in a fresh store (cold: searched; warm: the saved schedule) and after each prints the allocator's
live bytes split by memory pool (the default pool, and each CUDA graph's private pool), the bytes Python-visible
CUDA tensors hold (unique storages), and the largest of those tensors with what refers to them."""

from __future__ import annotations

import argparse
import gc
import tempfile
from collections import defaultdict
from pathlib import Path

import torch

from ios_core.models import build_model
from ios_core.planner import Planner, PlanOptions
from ios_core.workload import Workload

MB = 2**20


def pools() -> dict[str, float]:
    """Live (allocated) MB per memory pool, from the allocator's snapshot."""
    out: dict[str, float] = defaultdict(float)
    for seg in torch.cuda.memory_snapshot():
        pool = tuple(seg.get("segment_pool_id", (0, 0)))
        name = "default" if pool == (0, 0) else f"graph pool {pool}"
        out[name] += seg.get("allocated_size", 0) / MB
    return dict(out)


def owners(t: torch.Tensor, ignore: set[int], depth: int = 3) -> str:
    """A short chain of what refers to ``t`` (types, and a dict's key where one names it); ``ignore``: the ids
    of this probe's own lists."""
    chain: list[str] = []
    obj: object = t
    for _ in range(depth):
        refs = [r for r in gc.get_referrers(obj) if id(r) not in ignore and type(r).__name__ != "frame"]
        if not refs:
            break
        r = refs[0]
        label = type(r).__name__
        if isinstance(r, dict):
            key = next((k for k, v in r.items() if v is obj), None)
            label += f"[{str(key)[:40]}]" if key is not None else ""
        chain.append(label)
        obj = r
    return " <- ".join(chain)


def report(label: str) -> None:
    gc.collect()
    torch.cuda.synchronize()
    tensors, seen, held = [], set(), 0
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor) and o.is_cuda:
                key = o.untyped_storage().data_ptr()
                if key not in seen:
                    seen.add(key)
                    held += o.untyped_storage().nbytes()
                    tensors.append(o)
        except Exception:  # noqa: BLE001 - some objects refuse isinstance or storage access
            continue
    print(f"\n== {label}: allocated {torch.cuda.memory_allocated() / MB:.1f} MB, reserved "
          f"{torch.cuda.memory_reserved() / MB:.1f} MB; Python-visible CUDA tensors {len(tensors)} holding "
          f"{held / MB:.1f} MB")
    for name, mb in sorted(pools().items(), key=lambda kv: -kv[1])[:8]:
        print(f"   {name}: {mb:.1f} MB live")
    largest = sorted(tensors, key=lambda t: -t.untyped_storage().nbytes())[:12]
    ignore = {id(tensors), id(largest)}
    for t in largest:
        print(f"   {t.untyped_storage().nbytes() / MB:8.2f} MB {tuple(t.shape)} {t.dtype}  {owners(t, ignore)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as store:
        work = Workload(build_model(args.model), args.batch, args.precision, torch.cuda.get_device_name())
        plan = Planner(PlanOptions(), Path(store)).plan(work, "cuda")
        report(f"after a cold plan ({plan.source})")
        del plan
        report("the cold plan dropped")
        plan = Planner(PlanOptions(), Path(store)).plan(work, "cuda")
        report(f"after a warm plan ({plan.source})")


if __name__ == "__main__":
    with torch.inference_mode():
        main()
