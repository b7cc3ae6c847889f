"""TASO's ONNX export (``taso.export_onnx``, python/taso/__init__.py), made runnable.

The exporter writes what ONNX Runtime refuses or cannot use as is:

- one graph-input entry per edge out of the input, all named ``data`` (a duplicate name),
  and every weight both as an initializer and as a graph input;
- every tensor no op consumes as a graph output (split pieces nobody reads, too), so the
  model's own output is found by its shape;
- the installed onnx's newest opset, while its Split carries ``split`` as an attribute,
  which ONNX made an input at opset 13.

``repair`` fixes those three and nothing else: the ops stay TASO's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.backend import BackendError

if TYPE_CHECKING:  # only its types: importing onnx costs every harness process 0.6 s at plugin load
    import onnx

OPSET = 12  # the newest opset whose Split takes `split` as an attribute
IR_VERSION = 7  # the ONNX IR of opset 12


def dims(value: onnx.ValueInfoProto) -> tuple[int, ...]:
    return tuple(d.dim_value for d in value.type.tensor_type.shape.dim)


def repair(model: onnx.ModelProto, output_dims: Sequence[int]) -> onnx.ModelProto:
    """The exported ``model`` with one input, the output of ``output_dims`` as its only output,
    and opset 12. Raises BackendError where the output cannot be told apart."""
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    inputs: dict[str, onnx.ValueInfoProto] = {}
    for v in graph.input:
        if v.name not in weights:
            inputs.setdefault(v.name, v)
    if len(inputs) != 1:
        raise BackendError(f"TASO's ONNX export has {len(inputs)} data inputs ({', '.join(inputs)}); "
                           f"the harness feeds exactly one")
    del graph.input[:]
    graph.input.extend(inputs.values())
    want = tuple(output_dims)
    outputs = [v for v in graph.output if dims(v) == want]
    if len(outputs) != 1:
        shapes = ", ".join(f"{v.name} {dims(v)}" for v in graph.output)
        raise BackendError(f"TASO's ONNX export has {len(outputs)} outputs of the model's shape {want} "
                           f"(outputs: {shapes}); cannot tell which one is the model's")
    keep = outputs[0]
    del graph.output[:]
    graph.output.append(keep)
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = min(opset.version, OPSET)
    model.ir_version = min(model.ir_version, IR_VERSION)
    return model


def export(taso: Any, tg: Any, output_dims: Sequence[int]) -> onnx.ModelProto:
    """``taso.export_onnx(tg)``, repaired; TASO's own failures become one BackendError line."""
    try:
        model = taso.export_onnx(tg)
    except Exception as err:  # the exporter asserts or raises KeyError on ops it does not know
        raise BackendError(f"taso.export_onnx failed on the TASO graph ({type(err).__name__}: {err})") from err
    return repair(model, output_dims)
