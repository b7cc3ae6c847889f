"""How long MetaSchedule's import of TVM's tensor intrinsics takes in a process that has loaded
torch (as the harness's measuring process has), as TVM does it and as the harness's tuning does it
(`harness_plugins.tvm.tuning.import_tensor_intrinsics`), each in a fresh process.

``--build``: instead, TVM's default cuda build (no GPU needed) of an fp16 (128, 2048) x (2048, 1000)
matmul (the classifier at batch 128), which dlight tensorizes and so imports the intrinsics: with
``tvm.compile`` alone and through the TVM backend's ``lower`` (both with the backend imported).

    python bench/tvm_intrinsics_import.py [--repeat 2] [--build]
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
MATMUL = ("import numpy as np; from tvm import relax; from tvm.script import relax as R; bb = relax.BlockBuilder(); "
          "x = relax.Var('x', R.Tensor((128, 2048), 'float16')); "
          "w = relax.const(np.zeros((2048, 1000), 'float16'))\n"
          "with bb.function('main', [x]):\n"
          "    with bb.dataflow():\n"
          "        out = bb.emit_output(bb.emit(relax.op.matmul(x, w)))\n"
          "    bb.emit_func_output(out)\n"
          "mod = bb.get(); target = tvm.target.Target({{'kind': 'cuda', 'arch': 'sm_90'}})\n")
BUILD_TVM = "tvm.compile(mod, target=target)"
BUILD_HARNESS = "backend.lower(mod, target, None, {}, {})"
BACKEND = "from harness_plugins.tvm.backend import TvmBackend; backend = TvmBackend({{'name': 'tvm'}})\n"
TIMED_BUILD = ("import time, torch, tvm, sys\n" + MATMUL + BACKEND + "t = time.perf_counter(); {code}; "
               "print(time.perf_counter() - t, len(sys.modules))")


def timed(code: str, template: str = TIMED) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", template.format(code=code)], capture_output=True, text=True,
                         check=True)
    seconds, modules = out.stdout.split()[-2:]
    return float(seconds), int(modules)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--build", action="store_true", help="time an fp16 cuda build that imports them instead")
    args = ap.parse_args()
    ways, template = (((("tvm", BUILD_TVM), ("harness", BUILD_HARNESS)), TIMED_BUILD) if args.build
                      else (WAYS, TIMED))
    rows = {name: [timed(code, template) for _ in range(args.repeat)] for name, code in ways}
    print(json.dumps({name: {"seconds": [round(s, 2) for s, _ in r], "modules": r[0][1]} for name, r in rows.items()}))


if __name__ == "__main__":
    main()
