"""How long MetaSchedule's import of TVM's tensor intrinsics takes in a process that has loaded
torch (as the harness's measuring process has), as TVM does it and as the harness's tuning does it
(`harness_plugins.tvm.tuning.import_tensor_intrinsics`), each in a fresh process.

    python bench/tvm_intrinsics_import.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

AS_TVM = "import tvm.s_tir.tensor_intrin"
AS_HARNESS = "from harness_plugins.tvm.tuning import import_tensor_intrinsics; import_tensor_intrinsics()"
TIMED = ("import time, torch, tvm, sys; t = time.perf_counter(); {code}; "
         "print(time.perf_counter() - t, len(sys.modules))")
WAYS = (("tvm", AS_TVM), ("harness", AS_HARNESS))


def timed(code: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", TIMED.format(code=code)], capture_output=True, text=True, check=True)
    seconds, modules = out.stdout.split()[-2:]
    return float(seconds), int(modules)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    rows = {name: [timed(code) for _ in range(args.repeat)] for name, code in WAYS}
    print(json.dumps({name: {"seconds": [round(s, 2) for s, _ in r], "modules": r[0][1]} for name, r in rows.items()}))


if __name__ == "__main__":
    main()
