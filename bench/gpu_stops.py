"""Stops that stop, on the GPU (issue 55): a load-aware zoo sweep is sent SIGTERM (or SIGKILL) some seconds in, and
this prints how long its whole process tree took to go, which phase its jobs were in, whether any job's record was
created after the signal, and the records' statuses. The CPU test (tests/test_launcher_stops.py) does the same with
synthetic phases; this one has real model builds, ONNX exports, Inductor compiles, IOS searches and CUDA graphs.

    python bench/gpu_stops.py OUT_DIR [--at 12,35,60,90] [--kill9-at 40] [--sweep "OVERRIDES"] [overrides...]

Each case runs in a fresh results folder and store under OUT_DIR/case_<signal>_<s>/ (console log, records); a
table line per case goes to stdout and OUT_DIR/stops.csv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

SWEEP = ["-m", "harness", "-m", "hydra/launcher=loadaware", "model=timm",
         "model.arch=mobilenetv3_large_100,resnet18,tf_efficientnet_b0",
         "backend=ios,pytorch_compile,pytorch_cudagraph", "precision=fp16", "batch=1", "device=cuda"]


def session(sid: int) -> list[int]:
    """Processes of the session ``sid`` still alive (zombies left out)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,sid=,stat="], capture_output=True, text=True).stdout
    return [int(p) for p, s, st in (line.split() for line in out.splitlines()) if int(s) == sid and "Z" not in st]


def phases(log: Path) -> str:
    """The running jobs' phases in the launcher's last progress block (``#0 arch=.. [device 0] PHASE, N s``)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    block = text.rsplit("\nsweep ", 1)[1] if "\nsweep " in text else ""
    found = re.findall(r"^  #\d+ .*?\] (.*?), \d+ s", block, flags=re.M)
    return "; ".join(found) or "start-up"


def case(out: Path, sig: signal.Signals, at: float, extra: list[str]) -> dict:
    name = f"case_{sig.name}_{at:g}"
    rd = out / name
    shutil.rmtree(rd, ignore_errors=True)
    rd.mkdir(parents=True)
    log = rd / "console.log"
    env = dict(os.environ, TRITON_CACHE_DIR=str(rd / "triton"), TORCHINDUCTOR_CACHE_DIR=str(rd / "inductor"))
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, *SWEEP, f"++backend.store={rd}/store", f"tracking.results_dir={rd}",
                                 *extra], stdout=f, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    time.sleep(at)
    where = phases(log)
    signalled = datetime.now().astimezone()
    t0 = time.monotonic()
    os.kill(proc.pid, sig)
    limit = 30.0
    while time.monotonic() - t0 < limit and (proc.poll() is None or session(proc.pid)):
        time.sleep(0.1)
    took = time.monotonic() - t0
    left = session(proc.pid)
    for p in left:  # leave nothing for the next case
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    records = []
    for p in (rd / "records").rglob("*.json"):
        try:
            r = json.loads(p.read_text())
        except ValueError:
            continue
        if isinstance(r, dict) and "run_id" in r and "status" in r:
            records.append(r)
    late = [r["run_id"] for r in records if datetime.fromisoformat(r["created"]) > signalled]
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    sweeps = [json.loads(s.read_text()).get("status") for s in (rd / "records" / "sweeps").glob("*/sweep.json")]
    return {"case": name, "signal": sig.name, "at_s": at, "phases": where, "gone_s": round(took, 2),
            "left": len(left), "exit": proc.returncode, "records": len(records), "late": len(late),
            "statuses": " ".join(f"{k}:{v}" for k, v in sorted(statuses.items())), "sweep": " ".join(map(str, sweeps))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--at", default="12,35,60,90")
    ap.add_argument("--kill9-at", default="40")
    ap.add_argument("--sweep", help="the sweep's own overrides instead of the zoo one (a CPU check of this script)")
    a, a.extra = ap.parse_known_args()
    if a.sweep:
        SWEEP[3:] = a.sweep.split()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = [case(a.out, signal.SIGTERM, float(t), a.extra) for t in a.at.split(",") if t]
    rows += [case(a.out, signal.SIGKILL, float(t), a.extra) for t in a.kill9_at.split(",") if t]
    keys = list(rows[0])
    lines = [",".join(keys)] + [",".join(str(r[k]) for k in keys) for r in rows]
    (a.out / "stops.csv").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
