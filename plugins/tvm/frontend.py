"""The IR in TVM: exported to ONNX (the exporter is exact, and tested to be) and imported
with Relax's ONNX frontend, which converts every op the exporter emits exactly; and the
target TVM compiles for on each device."""

from __future__ import annotations

from typing import Any

from harness.backend import BackendError
from harness.machine.leases import cores
from ios_core.ir import Graph


def to_relax(graph: Graph, batch: int, precision: str):
    """A Relax IRModule computing ``graph`` at ``batch``, weights bound as constants.

    fp16 rewrites the module with ``ToMixedPrecision`` (fp16 storage and math; the
    input and output stay float32). tf32 runs float32 code: TVM emits no TF32 kernels.
    """
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    from ios_core.onnx import export_onnx

    if precision == "bf16":
        raise BackendError("the TVM backends run fp32, tf32 (as fp32) or fp16; precision=bf16 is not supported")
    model = export_onnx(graph)
    try:
        mod = from_onnx(model, shape_dict={model.graph.input[0].name: (batch, *graph.input_shape)},
                        keep_params_in_input=False)
    except tvm.error.OpNotImplemented as err:
        raise BackendError(f"TVM {tvm.__version__} cannot import {graph.name}: {err}") from None
    if precision == "fp16":
        mod = relax.transform.ToMixedPrecision(out_dtype="float16")(mod)
    return mod


def make_target(device: str):
    """``cuda`` with the real GPU's attributes where TVM sees one, else the host CPU."""
    import tvm
    from tvm.target import codegen

    if device == "cuda":
        dev = tvm.cuda(0)
        if not dev.exist:
            raise BackendError(f"TVM {tvm.__version__} sees no CUDA device (its CUDA runtime found no GPU or "
                               f"driver); run with device=cpu, or check nvidia-smi")
        return tvm.target.Target.from_device(dev)
    return tvm.target.Target({"kind": "llvm", "mcpu": codegen.llvm_get_system_cpu(),
                              "num-cores": cores()})


def device_of(target):
    import tvm
    return tvm.cuda(0) if target.kind.name == "cuda" else tvm.cpu(0)


def target_info(target) -> dict[str, Any]:
    """What the run really compiled for (logged as params)."""
    attrs = {k: v for k, v in target.export().items() if k in ("kind", "arch", "mcpu", "num-cores",
                                                                "max_shared_memory_per_block")}
    return {f"tvm_target_{k.replace('-', '_')}": v for k, v in attrs.items()}
