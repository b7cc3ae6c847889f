"""Fuzzing the two file readers a user feeds (ONNX models, schedule files): every failure is
the project's own error type with a one-line message, never another exception."""

import json

import numpy as np
import pytest

from ios_core.ir import GraphError
from ios_core.models import build_model
from ios_core.onnx import OnnxImportError, export_onnx, import_onnx
from ios_core.schedule import Schedule, ScheduleError, greedy

from .helpers import SMALL


def one_line(exc: BaseException) -> bool:
    return "\n" not in str(exc).strip() and str(exc).strip() != ""


@pytest.mark.parametrize("seed", range(3))
def test_random_and_mutated_onnx_files(tmp_path, seed):
    rng = np.random.default_rng(seed)
    good = export_onnx(build_model("sample", **SMALL["sample"])).SerializeToString()
    blobs = [rng.integers(0, 256, size=int(rng.integers(0, 400)), dtype=np.uint8).tobytes() for _ in range(15)]
    for _ in range(25):  # a valid model with a few bytes changed, or cut short
        b = bytearray(good)
        for i in rng.integers(0, len(b), size=int(rng.integers(1, 6))):
            b[i] = int(rng.integers(0, 256))
        blobs.append(bytes(b[: int(rng.integers(len(b) // 2, len(b) + 1))]))
    for i, blob in enumerate(blobs):
        path = tmp_path / f"m{i}.onnx"
        path.write_bytes(blob)
        try:
            import_onnx(path)
        except (OnnxImportError, GraphError) as exc:
            assert one_line(exc), repr(exc)


@pytest.mark.parametrize("seed", range(3))
def test_random_schedule_json(seed):
    rng = np.random.default_rng(seed)
    g = build_model("sample", **SMALL["sample"])
    good = greedy(g).to_dict()

    def noise(depth=0):
        kind = int(rng.integers(0, 6 if depth < 3 else 4))
        if kind == 4:
            return [noise(depth + 1) for _ in range(int(rng.integers(0, 3)))]
        if kind == 5:
            return {str(k): noise(depth + 1) for k in range(int(rng.integers(0, 3)))}
        return [None, int(rng.integers(-3, 9)), "x" * int(rng.integers(0, 3)), bool(rng.integers(0, 2))][kind]
    docs = [noise() for _ in range(20)]
    for _ in range(40):  # a valid schedule with one field replaced by noise
        d = json.loads(json.dumps(good))
        key = list(d)[int(rng.integers(0, len(d)))]
        d[key] = noise()
        docs.append(d)
    for _ in range(20):  # or one stage mangled
        d = json.loads(json.dumps(good))
        blk = d["blocks"][int(rng.integers(0, len(d["blocks"])))]
        if blk:
            blk[int(rng.integers(0, len(blk)))] = noise()
        docs.append(d)
    for d in docs:
        try:
            Schedule.from_dict(d).check(g)
        except (ScheduleError, GraphError) as exc:
            assert one_line(exc), repr(exc)


@pytest.mark.parametrize("seed", range(4))
def test_random_small_onnx_graphs(seed):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    ops = ["Conv", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "Add", "Concat", "Flatten", "Gemm",
           "BatchNormalization", "Sigmoid", "Identity", "Softmax", "Reshape"]
    for trial in range(40):
        nodes, inits, last = [], [], "x"
        for k in range(int(rng.integers(1, 4))):
            op = ops[int(rng.integers(0, len(ops)))]
            out = f"t{k}"
            attrs = {}
            ins = [last]
            if op == "Conv":
                kk = int(rng.integers(1, 4))
                w = rng.standard_normal((int(rng.integers(1, 5)), int(rng.integers(1, 5)), kk, kk)).astype(np.float32)
                inits.append(numpy_helper.from_array(w, f"w{k}"))
                ins.append(f"w{k}")
                attrs = {"pads": [int(rng.integers(0, 2))] * 4, "strides": [int(rng.integers(1, 3))] * 2}
            elif op in ("MaxPool", "AveragePool"):
                attrs = {"kernel_shape": [int(rng.integers(1, 4))] * 2, "strides": [int(rng.integers(1, 3))] * 2}
            elif op in ("Add", "Concat"):
                ins = [last, last if rng.random() < 0.7 else "x"]
                if op == "Concat":
                    attrs = {"axis": int(rng.integers(-1, 4))}
            elif op == "Gemm":
                w = rng.standard_normal((int(rng.integers(1, 5)), int(rng.integers(1, 80)))).astype(np.float32)
                inits.append(numpy_helper.from_array(w, f"w{k}"))
                ins.append(f"w{k}")
                attrs = {"transB": 1}
            elif op == "BatchNormalization":
                c = int(rng.integers(1, 5))
                for nm in ("g", "b", "m", "v"):
                    inits.append(numpy_helper.from_array(rng.uniform(0.5, 1, c).astype(np.float32), f"{nm}{k}"))
                ins += [f"g{k}", f"b{k}", f"m{k}", f"v{k}"]
            nodes.append(helper.make_node(op, ins, [out], name=f"n{k}", **attrs))
            last = out
        nodes.append(helper.make_node("Identity", [last], ["y"], name="out"))
        g = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        try:
            import_onnx(model)
        except (OnnxImportError, GraphError) as exc:
            assert one_line(exc), f"trial {trial}: {exc!r}"
