"""The ONNX form of a model: a user's file read and checked, a module exported with torch.onnx (the dynamo
exporter first, then the legacy one), and a float64 copy evaluated by onnx's reference evaluator, the
reference for a file the IR cannot import."""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .attention import batch_first_attention
from .errors import FormError

DYNAMO_OPSET, LEGACY_OPSET = 18, 17


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip() and not line.startswith(("Traceback", "  File")):
            return f"{type(exc).__name__}: {line.strip()[:300]}"
    return type(exc).__name__


def graph_inputs(model: Any) -> list[Any]:
    """An ONNX model's real inputs (its graph inputs that are not initializers), as ``ValueInfoProto``."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def load_file(path: str, batch: int) -> Any:
    """A user's ONNX file, checked, with one float input whose batch dimension is free or ``batch``."""
    import onnx

    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as exc:  # DecodeError, ValidationError, ...
        raise FormError(f"{path}: not a valid ONNX model ({_first_line(exc)})") from None
    check_input(model, path, batch)
    return model


def check_input(model: Any, path: str, batch: int, image_size: int = 0) -> None:
    """The file's one image input, (N, C, H, W) with N free or ``batch`` and C, H, W fixed (and H, W equal to
    ``image_size`` where one is asked for): what every run of the file needs, knowable from the file alone."""
    inputs = graph_inputs(model)
    if len(inputs) != 1:
        raise FormError(f"{path}: the harness feeds one image input; this model has {len(inputs)} "
                        f"({', '.join(i.name for i in inputs)})")
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != 4:
        raise FormError(f"{path}: input {inputs[0].name!r} has rank {len(dims)}; an image input is (N, C, H, W)")
    if dims[0].HasField("dim_value") and dims[0].dim_value not in (0, batch):
        raise FormError(f"{path}: input {inputs[0].name!r} has batch size {dims[0].dim_value} fixed in the file; "
                        f"run it with batch={dims[0].dim_value}, or export it with a dynamic batch dimension")
    try:
        _, h, w = input_shape(model)
    except FormError as exc:
        raise FormError(f"{path}: {exc}") from None
    if image_size and (h, w) != (image_size, image_size):
        raise FormError(f"{path}: its input {inputs[0].name!r} is fixed at {h}x{w} px, not "
                        f"model.image_size={image_size}: leave model.image_size out, or export the file at "
                        f"{image_size} px")


def input_shape(model: Any) -> tuple[int, int, int]:
    """(C, H, W) of an ONNX model's image input; a symbolic one is an error that says how to fix it."""
    value = graph_inputs(model)[0]
    dims = value.type.tensor_type.shape.dim[1:]
    if not all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        named = ", ".join(d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in dims)
        raise FormError(f"input {value.name!r} has symbolic sizes ({named}): "
                        f"export the file with a fixed channel count and image size")
    c, h, w = (int(d.dim_value) for d in dims)
    return c, h, w


def export_module(module: Any, example: Any) -> Any:
    """The module as an ONNX model for this example input's shape: torch.onnx's dynamo exporter, and the
    legacy TorchScript exporter where that one fails; both failures are said in one line. MultiheadAttention
    is exported batch-first (:mod:`.attention`)."""
    import onnx
    import torch

    module = batch_first_attention(module)
    errors = []
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
                program = torch.onnx.export(module, (example,), dynamo=True, opset_version=DYNAMO_OPSET,
                                            verbose=False)
            assert program is not None  # the dynamo exporter returns its program
            return program.model_proto
        except Exception as exc:
            errors.append(f"dynamo exporter: {_first_line(exc)}")
        try:
            buf = io.BytesIO()
            torch.onnx.export(module, (example,), buf, dynamo=False,  # type: ignore[arg-type]
                              opset_version=LEGACY_OPSET, input_names=["input"], output_names=["output"])
            return onnx.load_from_string(buf.getvalue())
        except Exception as exc:
            errors.append(f"legacy exporter: {_first_line(exc)}")
    raise FormError("torch.onnx could not export it (" + "; ".join(errors) + ")")


def float64_copy(model: Any) -> Any:
    """The same model computing in float64: float tensors (weights, constants, inputs, outputs, value infos)
    and casts to float become double."""
    import onnx
    from onnx import TensorProto, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    float_types = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)

    def widen(t: Any) -> None:
        if t.data_type in float_types:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))

    def graphs(g: Any):
        yield g
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    yield from graphs(a.g)

    for g in graphs(m.graph):
        for t in g.initializer:
            widen(t)
        for v in [*g.input, *g.output, *g.value_info]:
            if v.type.tensor_type.elem_type in float_types:
                v.type.tensor_type.elem_type = TensorProto.DOUBLE
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    widen(a.t)
                elif node.op_type in ("Cast", "CastLike", "EyeLike", "RandomNormal", "RandomUniform") \
                        and a.name in ("to", "dtype") and a.i in float_types:
                    a.i = TensorProto.DOUBLE
    return m


def float64_evaluator(model: Any) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> the model's first output``, computed in float64 by onnx's reference evaluator on a float64 copy
    (made once, for every call)."""
    from onnx.reference import ReferenceEvaluator

    m = float64_copy(model)
    name = graph_inputs(m)[0].name
    evaluator = ReferenceEvaluator(m)

    def evaluate(x: np.ndarray) -> np.ndarray:
        try:
            out = evaluator.run(None, {name: np.asarray(x, np.float64)})[0]  # type: ignore[index]
        except Exception as exc:
            raise FormError(f"onnx's reference evaluator cannot run it in float64 ({_first_line(exc)})") from None
        return np.asarray(out, np.float64)
    return evaluate
