"""The model in TVM: its ONNX form (the user's file, torch.onnx's export of the module, or the IR's exact
export) imported with Relax's ONNX frontend; and the target TVM compiles for on each device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.backend import BackendError, Model
from harness.machine.leases import cores
from harness.models.onnx_io import graph_inputs


@dataclass(frozen=True)
class Work:
    """What a build or a tuning database is for: the model (its name and digest), batch, precision, device."""

    name: str
    digest: str
    batch: int
    precision: str
    device_name: str


def to_relax(model: Model, batch: int, precision: str):
    """A Relax IRModule computing the model at ``batch``, weights bound as constants.

    fp16 rewrites the module with ``ToMixedPrecision`` (fp16 storage and math; the
    input and output stay float32). tf32 runs float32 code: TVM emits no TF32 kernels.
    """
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    if precision == "bf16":
        raise BackendError("the TVM backends run fp32, tf32 (as fp32) or fp16; precision=bf16 is not supported")
    onnx_model = model.onnx()
    name = graph_inputs(onnx_model)[0].name
    try:
        mod = from_onnx(onnx_model, shape_dict={name: (batch, *model.input_shape)}, keep_params_in_input=False)
    except Exception as err:  # OpNotImplemented, or a frontend's assertion on an operator's form
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise BackendError(f"TVM {tvm.__version__}'s ONNX frontend cannot import {model.name}: "
                           f"{type(err).__name__}: {first}") from None
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
