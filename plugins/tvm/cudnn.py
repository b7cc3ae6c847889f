"""Relax's cuDNN partitioning: conv2d (+bias, +ReLU) regions become cuDNN calls.

The partitioning itself is pure IR work and runs anywhere; emitting the calls needs the
``relax.ext.cudnn`` codegen, which only a TVM built with USE_CUDNN has (PyPI's has not).
"""

from __future__ import annotations

from harness.backend import BackendError

BUILD_HINT = ("build TVM from source with set(USE_CUDNN ON) (and USE_CUDA ON) in config.cmake: "
              "https://tvm.apache.org/docs/install/from_source.html")


def calls(mod, pred) -> int:
    """How many bindings of ``main`` are calls that ``pred`` accepts."""
    from tvm import relax
    n = 0
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            if isinstance(binding.value, relax.Call) and pred(binding.value):
                n += 1
    return n


def conv_calls(mod) -> int:
    return calls(mod, lambda c: getattr(c.op, "name", "") == "relax.nn.conv2d")


def has_cudnn() -> bool:
    import tvm
    return tvm.get_global_func("relax.ext.cudnn", allow_missing=True) is not None


def partition(mod):
    """(partitioned module, convs offloaded, convs in all)."""
    from tvm.relax.backend.cuda.cudnn import partition_for_cudnn

    total = conv_calls(mod)
    out = partition_for_cudnn(mod)
    codegen = {gv for gv, f in out.functions.items() if f.attrs is not None and "Codegen" in f.attrs}
    offloaded = calls(out, lambda c: c.op in codegen)
    return out, offloaded, total


def require_cudnn(offloaded: int, total: int) -> None:
    import tvm
    if not has_cudnn():
        raise BackendError(f"backend tvm_cudnn: this TVM ({tvm.__version__}) is built without cuDNN (USE_CUDNN "
                           f"is {tvm.support.libinfo().get('USE_CUDNN', 'OFF')}; {offloaded} of {total} convolutions "
                           f"would go to cuDNN); {BUILD_HINT}")
