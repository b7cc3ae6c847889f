"""What ``torch.compile(model, backend="ios")`` takes of the zoos' classifiers (issue 59 item 5), on the CPU:

    python bench/fx_coverage.py                       # torchvision's classifiers and one timm model per family
    python bench/fx_coverage.py --size 64 timm:resnet50 torchvision:swin_t
    python bench/fx_coverage.py --onnx --out cov.jsonl  # and whether the ONNX path imports each

Each model is built as ``model=timm``/``model=torchvision`` builds it (random init, BatchNorm calibrated), compiled
with the ``ios`` backend (Greedy schedules on the analytic cost model: nothing is timed, so this measures what
the FX import takes, not speed; eager runs what falls back) and run once; its output is compared with eager's.
One process per model (a hang or a crash is that model's line). One line per model: how many operators IOS
runs of how many, in how many plans, Dynamo's graphs, the relative error, the seconds; the operators that fell
back and why, counted over the sweep, close the output."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

#: a timm family's smallest-sounding model stands for it
SMALL = ("atto", "femto", "pico", "nano", "tiny", "xxs", "xs", "small", "_s", "b0", "18", "050", "100", "_t")
OPTIONS = {"schedule": "greedy", "cost_model": "analytic", "select": False, "fallback": "eager"}
REPORT = re.compile(r"IOS runs (?:all )?(\d+)(?: of (\d+))? operators in (\d+) plan\(s\)(?:; the fallback runs \d+: "
                    r"(.*))?")


def timm_families() -> list[str]:
    from harness.models import zoos

    timm = zoos.import_zoo("timm")
    picked = []
    for module in timm.list_modules():
        names = timm.list_models(module=module)
        if names:
            picked.append("timm:" + min(names, key=lambda n: (not any(s in n for s in SMALL), len(n), n)))
    return picked


def torchvision_classifiers() -> list[str]:
    from harness.models import zoos

    tv = zoos.import_zoo("torchvision")
    return ["torchvision:" + a for a in tv.models.list_models(module=tv.models)]


def one(model: str, size: int, onnx: bool) -> dict:
    """Compile one model with the ``ios`` backend and run it once; what IOS took, from its report lines."""
    import logging

    import torch

    from harness.models import zoos

    kind, arch = model.split(":", 1)
    out: dict = {"model": model}
    t = time.perf_counter()
    net, shape = zoos.build(kind, arch, size, 0)
    out["build_s"] = round(time.perf_counter() - t, 1)
    x = torch.randn(1, *shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = net(x)
    reports: list[str] = []

    class Said(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            reports.append(record.getMessage())
    logging.getLogger("ios_core.dynamo").addHandler(Said())
    logging.getLogger("ios_core.dynamo").setLevel(logging.INFO)
    t = time.perf_counter()
    try:
        with torch.no_grad():
            got = torch.compile(net, backend="ios", options=OPTIONS)(x)
        out["compile_s"] = round(time.perf_counter() - t, 1)
        out["rel_err"] = float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))
    except Exception as exc:  # noqa: BLE001 - the model's line says what went wrong
        out["error"] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"
    taken = total = plans = 0
    refused: Counter[str] = Counter()
    for line in reports:
        m = REPORT.search(line)
        if m is None:
            if "IOS takes none" in line:
                refused["a graph not traced to ATen"] += 1
            continue
        taken += int(m[1])
        total += int(m[2] or m[1])
        plans += int(m[3])
        for item in (m[4] or "").split("; "):
            if item:
                n, _, label = item.partition("x ") if re.match(r"\d+x ", item) else ("1", "", item)
                refused[label] += int(n)
    out.update(graphs=len(reports), taken=taken, total=total, plans=plans, refused=dict(refused))
    if onnx:
        out["onnx"] = _onnx(net, shape, arch)
    return out


def _onnx(net, shape, arch: str) -> str:
    import torch

    from harness.models.onnx_io import export_module
    from ios_core.onnx import import_onnx

    try:
        import_onnx(export_module(net, torch.zeros(1, *shape)), name=arch)
        return "OK"
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def line(r: dict) -> str:
    if "error" in r:
        head = f"ERROR {r['error']}"
    elif r.get("total") and r["taken"] == r["total"]:
        head = f"WHOLE {r['taken']} ops, {r['plans']} plan(s)"
    else:
        head = f"PART {r.get('taken', 0)}/{r.get('total', 0)} ops, {r.get('plans', 0)} plan(s)"
    err = f", rel. error {r['rel_err']:.1e}" if "rel_err" in r else ""
    onnx = f", onnx {r['onnx']}" if "onnx" in r else ""
    return f"{r['model']}\t{head}, {r.get('graphs', 0)} graph(s){err}{onnx}\t{r.get('seconds', 0):.0f} s"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64, help="input size (0: each model's own)")
    ap.add_argument("--onnx", action="store_true", help="also import each through the ONNX path")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per model")
    ap.add_argument("--out", type=Path, help="append each model's result here as a JSON line")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("models", nargs="*", help="kind:arch (default: torchvision's classifiers and timm's families)")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.size, args.onnx)), flush=True)
        return 0
    models = args.models or torchvision_classifiers() + timm_families()
    kept = args.out.read_text().splitlines() if args.out and args.out.exists() else []
    done = {json.loads(s)["model"] for s in kept}
    results = []
    for model in models:
        if model in done:
            continue
        t = time.perf_counter()
        cmd = [sys.executable, __file__, "--one", model, "--size", str(args.size)] + ["--onnx"] * args.onnx
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            said = [s for s in proc.stdout.splitlines() if s.startswith("{")]
            last = (proc.stderr.strip().splitlines() or [""])[-1][:300]
            r = json.loads(said[-1]) if said else {"model": model, "error": f"exit {proc.returncode}: {last}"}
        except subprocess.TimeoutExpired:
            r = {"model": model, "error": f"over {args.timeout:.0f} s"}
        r["seconds"] = round(time.perf_counter() - t, 1)
        results.append(r)
        print(line(r), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(r) + "\n")
    why: Counter[str] = Counter()
    for r in results:
        why.update(r.get("refused", {}))
    whole = sum(1 for r in results if "error" not in r and r.get("total") and r["taken"] == r["total"])
    print(f"{whole} of {len(results)} compile whole; fell back: "
          + "; ".join(f"{n}x {label}" for label, n in why.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
