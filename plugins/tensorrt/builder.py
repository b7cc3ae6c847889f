"""From the model's ONNX form to a serialized engine: the ONNX TensorRT parses, the build, and the engine
cache under ``<store>/tensorrt/`` (a build takes seconds to minutes; reuse takes milliseconds)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.backend import BackendError, Model
from ios_core.workload import slug

from .plan import BuildPlan, apply, batch_label, network_flags

if TYPE_CHECKING:  # onnx itself is imported where it is used: every harness process loads this plugin
    import onnx


def onnx_for_tensorrt(model: Model, plan: BuildPlan) -> onnx.ModelProto:
    """The ONNX model TensorRT is given for ``plan`` (the backend and the tests call this one)."""
    onnx_model = model.onnx()
    return to_float16(onnx_model) if plan.onnx_dtype == "float16" else onnx_model


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """float16 weights and math between a Cast after the input and one before the output.

    For TensorRT 11, whose networks are strongly typed: the types in the graph decide the
    kernels. Input and output stay float32, as they do with TensorRT 10's FP16 flag, so both
    paths take and return the same tensors."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    inits = [numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
             if t.data_type == TensorProto.FLOAT else t for t in g.initializer]
    del g.initializer[:]
    g.initializer.extend(inits)
    (inp,), (outp,) = g.input, g.output
    for node in g.node:
        node.input[:] = [f"{inp.name}_fp16" if n == inp.name else n for n in node.input]
        node.output[:] = [f"{outp.name}_fp16" if n == outp.name else n for n in node.output]
    nodes = [helper.make_node("Cast", [inp.name], [f"{inp.name}_fp16"], name="cast_input", to=TensorProto.FLOAT16),
             *g.node,
             helper.make_node("Cast", [f"{outp.name}_fp16"], [outp.name], name="cast_output", to=TensorProto.FLOAT)]
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(out)
    return out


def build_engine(trt: Any, model: bytes, plan: BuildPlan, logger: Any) -> bytes:
    """Parse the ONNX bytes, apply the plan, build; the serialized engine."""
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt, plan))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BackendError(f"TensorRT's ONNX parser refused the export: {errors or 'no error given'}")
    config = builder.create_builder_config()
    apply(trt, builder, config, plan, network.get_input(0).name)
    blob = builder.build_serialized_network(network, config)
    if blob is None:
        raise BackendError("TensorRT built no engine (its log above says why; a larger backend.workspace_mb "
                           "may help)")
    return bytes(blob)


def model_digest(model: bytes) -> str:
    """The graph hash leaves weights out; the engine holds them, so its key includes them."""
    return hashlib.sha256(model).hexdigest()[:16]


def engine_path(root: Path, source: Model, gpu: str, version: str, plan: BuildPlan, model: bytes) -> Path:
    """``<root>/tensorrt/<model>-<digest>/<gpu>-trt<version>-bs<batch or range>-<precision>-<key>.engine``."""
    name = (f"{slug(gpu)}-trt{version}-bs{batch_label(plan)}-{plan.precision}-"
            f"{plan.key(model_digest(model))}.engine")
    return root / "tensorrt" / f"{slug(source.name)}-{source.digest()}" / name


def cached_or_built(path: Path, use_cache: bool, build: Callable[[], bytes]) -> tuple[bytes, bool]:
    """(serialized engine, whether it came from the cache); a new build is saved when caching."""
    if use_cache and path.is_file():
        return path.read_bytes(), True
    blob = build()
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # parallel jobs: no reader sees half a file
        tmp.write_bytes(blob)
        os.replace(tmp, path)
    return blob, False
