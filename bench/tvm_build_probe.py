"""Where CUDA candidate builds spend their time: the same candidates built serially and on
threads by autotvm's builder (``plugins/tvm/tuning.py``), with each of TVM's CUDA compilers
(TVM_CUDA_COMPILE_MODE nvrtc / nvcc). Usage: python bench/tvm_build_probe.py [model] [n]
(bench/results/h100-2026-11-22/tvm/build_probe.txt also has a process-pool row from an
earlier version of the builder)."""

import os
import sys
import tempfile
import time

import tvm
from tvm.relax.backend.cuda.pipeline import legalize_passes
from tvm.s_tir.meta_schedule.builder import BuilderInput

from harness_plugins.tvm.frontend import make_target, to_relax
from harness_plugins.tvm.tuning import PhaseTimes, make_builder
from ios_core.models import build_model


def candidates(model: str, n: int, target):
    """The model's fused functions with TVM's default schedules (its CUDA legalize passes)."""
    with target:
        mod = tvm.transform.Sequential(legalize_passes(target))(to_relax(build_model(model), 1, "fp32"))
    funcs = [f for _, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)][:n]
    return [BuilderInput(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}), target) for f in funcs]


def main() -> None:
    model, n = (sys.argv[1:] + ["inception_v3"])[0], int((sys.argv[2:] + ["32"])[0])
    target = make_target("cuda" if tvm.cuda(0).exist else "cpu")
    inputs = candidates(model, n, target)
    print(f"{len(inputs)} candidates of {model} for {target.kind.name}, {os.cpu_count()} CPUs", flush=True)
    for mode in ("nvrtc", "nvcc"):
        os.environ["TVM_CUDA_COMPILE_MODE"] = mode
        for label, threads in (("serial", 1), ("threads", 0)):
            builder = make_builder(tempfile.mkdtemp(), PhaseTimes(), threads)
            t = time.perf_counter()
            results = builder.build(inputs)
            dt = time.perf_counter() - t
            errors = [r.error_msg for r in results if r.artifact_path is None]
            print(f"{mode:6s} {label:9s} {dt:7.2f} s  {dt / len(inputs) * 1e3:7.1f} ms/candidate  "
                  f"errors {len(errors)} {errors[:1]}", flush=True)


if __name__ == "__main__":
    main()
