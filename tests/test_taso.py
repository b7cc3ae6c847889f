"""TASO backend without TASO: the converter drives a recording fake of TASO's graph builder
(the signatures and shape rules of python/taso/_cython/core.pyx and src/core/*.cc), whose
recorded graph is also evaluated with numpy as TASO's kernels compute (SAME = (total+1)//2 on
both sides, average pools excluding padding) and compared with the float64 reference."""

from __future__ import annotations

import itertools
import sys
import types
from collections import Counter
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.backend import BackendError, MissingDependency
from harness.config import ConfigError
from harness.models import Model
from harness_plugins.taso import TasoBackend, TasoConfig
from harness_plugins.taso.convert import convert
from harness_plugins.taso.export import repair
from harness_plugins.taso.padding import SAME, VALID, same_pad
from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import activation, conv2d, pool2d, reference_forward
from ios_core.ir import Graph, GraphBuilder, Node, Sequential, Value
from ios_core.ir.nodes import Flatten, Linear, Pool
from ios_core.models import MODELS, build_model

from .helpers import SMALL, rel_err

ZOO = [m for m in MODELS if m in SMALL]
TASO_LIMIT = 6  # include/taso/ops.h MAX_NUM_INPUTS / MAX_NUM_OUTPUTS


# -- the fake ----------------------------------------------------------------------------
class T:
    """A fake PyTensor: dims as TASO computes them, and a float64 value when the input has one."""

    ids = itertools.count()

    def __init__(self, dims, value=None):
        self.dims, self.value, self.id = tuple(int(d) for d in dims), value, next(T.ids)
        if value is not None:
            assert value.shape == self.dims, (value.shape, self.dims)

    def dim(self, i):
        return self.dims[i]

    @property
    def nDim(self):  # noqa: N802 (TASO's name)
        return len(self.dims)


def taso_window(padding, hw, kernel, strides):
    """(per-side pads, output H W) of TASO's SAME/VALID (Conv2D::get_padding, Pool2D::Pool2D)."""
    assert padding in (SAME, VALID), padding
    if padding == VALID:
        return (0, 0), tuple((n - k) // s + 1 for n, k, s in zip(hw, kernel, strides))
    return (tuple(same_pad(n, k, s) for n, k, s in zip(hw, kernel, strides)),
            tuple(-(-n // s) for n, s in zip(hw, strides)))


def act_of(x, mode):
    return activation(x, {"NONE": "identity", "RELU": "relu", "SIGMOID": "sigmoid", "TANH": "tanh"}[mode])


class FakeTaso:
    """PyGraph's methods with their signatures (keyword-only where core.pyx has ``*``)."""

    def __init__(self, x: np.ndarray | None = None):
        self.x, self.calls = x, []

    def _out(self, op, args, dims, value=None):
        t = T(dims, value)
        self.calls.append((op, args, t))
        return t

    def _val(self, fn, *ts):
        return fn(*[t.value for t in ts]) if all(t.value is not None for t in ts) else None

    def new_input(self, *, dims: tuple):
        assert isinstance(dims, tuple)
        return self._out("new_input", {"dims": dims}, dims, None if self.x is None else self.x.astype(np.float64))

    def new_weight(self, *, dims: tuple, data=None):
        assert isinstance(dims, tuple) and dims == data.shape and data.dtype == np.float32
        return self._out("new_weight", {"dims": dims, "data": data}, dims, data.astype(np.float64))

    def conv2d(self, *, input, weight, strides, padding, activation="NONE"):
        n, c, h, w = input.dims
        o, cg, kh, kw = weight.dims
        assert c % cg == 0
        pads, out = taso_window(padding, (h, w), (kh, kw), strides)
        val = self._val(lambda x, k: act_of(conv2d(x, k, None, tuple(strides), pads, c // cg), activation),
                        input, weight)
        return self._out("conv2d", {"input": input, "weight": weight, "strides": tuple(strides), "padding": padding,
                                    "activation": activation}, (n, o, *out), val)

    def _pool(self, op, kind, input, kernels, strides, padding, activation):
        n, c, h, w = input.dims
        pads, out = taso_window(padding, (h, w), kernels, strides)
        node = Pool(name="fake", pool_type=kind, kernel=tuple(kernels), stride=tuple(strides), padding=pads,
                    count_include_pad=False)  # cuDNN: max ignores padding, avg excludes it
        val = self._val(lambda x: act_of(pool2d(x, node), activation), input)
        return self._out(op, {"input": input, "kernels": tuple(kernels), "strides": tuple(strides),
                              "padding": padding}, (n, c, *out), val)

    def maxpool2d(self, input, kernels, strides, padding, activation="NONE"):
        return self._pool("maxpool2d", "max", input, kernels, strides, padding, activation)

    def avgpool2d(self, *, input, kernels, strides, padding, activation="NONE"):
        return self._pool("avgpool2d", "avg", input, kernels, strides, padding, activation)

    def _unary(self, op, input, mode):
        return self._out(op, {"input": input}, input.dims, self._val(lambda x: act_of(x, mode), input))

    def relu(self, input, inplace=False):
        return self._unary("relu", input, "RELU")

    def sigmoid(self, input, inplace=False):
        return self._unary("sigmoid", input, "SIGMOID")

    def tanh(self, input, inplace=False):
        return self._unary("tanh", input, "TANH")

    def _element(self, op, x, y, fn):
        for a, b in zip(reversed(x.dims), reversed(y.dims)):  # Model::broadcastable
            assert a == b or 1 in (a, b), (x.dims, y.dims)
        dims = np.broadcast_shapes(x.dims, y.dims)
        return self._out(op, {"x": x, "y": y}, dims, self._val(fn, x, y))

    def add(self, x, y):
        return self._element("add", x, y, np.add)

    def mul(self, x, y):
        return self._element("mul", x, y, np.multiply)

    def concat(self, axis: int, inputs: list):
        assert isinstance(inputs, list) and 2 <= len(inputs) <= TASO_LIMIT
        assert all(len(t.dims) == len(inputs[0].dims) for t in inputs)
        assert all(t.dims[:axis] + t.dims[axis + 1:] == inputs[0].dims[:axis] + inputs[0].dims[axis + 1:]
                   for t in inputs)
        dims = list(inputs[0].dims)
        dims[axis] = sum(t.dims[axis] for t in inputs)
        return self._out("concat", {"axis": axis, "inputs": inputs}, dims,
                         self._val(lambda *v: np.concatenate(v, axis=axis), *inputs))

    def split(self, input, axis: int, sizes):
        assert isinstance(sizes, list) and 2 <= len(sizes) <= TASO_LIMIT and sum(sizes) == input.dims[axis]
        ends = np.cumsum(sizes)
        outs = []
        for end, size in zip(ends, sizes):
            dims = list(input.dims)
            dims[axis] = size
            val = None if input.value is None else np.take(input.value, range(end - size, end), axis=axis)
            outs.append(T(dims, val))
        self.calls.append(("split", {"input": input, "axis": axis, "sizes": sizes}, outs))
        return outs

    def reshape(self, input, shape: tuple):
        assert isinstance(shape, tuple) and np.prod(shape) == np.prod(input.dims)
        return self._out("reshape", {"input": input, "shape": shape}, shape,
                         self._val(lambda x: x.reshape(shape), input))

    def matmul(self, input, weight, activation="NONE"):
        assert len(input.dims) == len(weight.dims) == 2 and input.dims[1] == weight.dims[0]
        return self._out("matmul", {"input": input, "weight": weight}, (input.dims[0], weight.dims[1]),
                         self._val(lambda a, b: act_of(a @ b, activation), input, weight))

    # the parts of the API the backend reads back
    def ops(self) -> Counter:
        return Counter(op for op, _, _ in self.calls)

    def get_operator_list(self):
        return [c for c in self.calls if c[0] not in ("new_input", "new_weight")]

    def get_operator_type(self, op):
        return ONNX_TYPES[op[0]]

    def cost(self):
        return 1.5

    def run_time(self):
        return 2.5


ONNX_TYPES = {"conv2d": "Conv", "maxpool2d": "MaxPool", "avgpool2d": "AveragePool", "relu": "Relu",
              "sigmoid": "Sigmoid", "tanh": "Tanh", "add": "Add", "mul": "Mul", "concat": "Concat",
              "split": "Split", "reshape": "Reshape", "matmul": "MatMul"}


def converted(graph: Graph, batch: int = 1, x: np.ndarray | None = None) -> tuple[FakeTaso, T]:
    fake = FakeTaso(x)
    return fake, convert(graph, fake, batch)


# -- what the IR says the op list must be ----------------------------------------------------
def expected_ops(graph: Graph) -> Counter:
    """Op counts implied by the IR's node kinds (zoo models: no slices, no explicit padding)."""
    want: Counter = Counter()
    for node in graph.nodes():
        if node.kind == "placeholder":
            continue
        if node.kind == "element":
            want[node.op] += len(node.inputs[0]) - 1
            continue
        want["add"] += sum(len(t) - 1 for t in node.inputs)
        want["concat"] += len(node.inputs) > 1
        for inner in node.nodes if isinstance(node, Sequential) else [node]:
            if inner.kind == "conv":
                want["conv2d"] += 1
                want["add"] += inner.bias is not None
                want[inner.act] += inner.act != "identity"
            elif inner.kind == "pool":
                want["maxpool2d" if "max" in inner.pool_type else "avgpool2d"] += 1
                want["mul"] += inner.pool_type == "avg" and inner.count_include_pad and inner.padding != (0, 0)
            elif inner.kind == "activation":
                want[inner.act] += inner.act != "identity"
    return +want


def taso_importer_mode(kernel, padding) -> str:
    """TASO's own ONNX importer's choice (_get_conv_pool_pads_attr in python/taso/__init__.py)."""
    return VALID if sum(padding) == 0 and sum(kernel) > 2 else SAME


@pytest.mark.parametrize("model", ZOO)
def test_zoo_op_list_matches_the_ir(model):
    g = build_model(model, **SMALL[model])
    fake, out = converted(g, batch=2)
    ops = fake.ops()
    assert ops["new_input"] == 1
    assert out.dims == (2, *g.output_shape)
    want = expected_ops(g)
    assert {k: ops[k] for k in want} == dict(want)
    assert set(ops) - set(want) <= {"new_input", "new_weight"}
    # every window op is SAME or VALID, never padded explicitly, and agrees with TASO's importer
    windows = [n for node in g.nodes() for n in (node.nodes if isinstance(node, Sequential) else [node])
               if n.kind == "conv" or (n.kind == "pool" and not n.is_global)]
    calls = [a for op, a, _ in fake.calls if op in ("conv2d", "maxpool2d", "avgpool2d")
             and not (op != "conv2d" and a["strides"] == (1, 1) and a["padding"] == VALID
                      and a["kernels"] == a["input"].dims[2:])]
    assert len(calls) == len(windows)
    for node, args in zip(windows, calls):
        assert args["padding"] == taso_importer_mode(node.kernel, node.padding), node.name
        assert args["strides"] == node.stride
    assert all(a["axis"] == 1 for op, a, _ in fake.calls if op == "concat")


@pytest.mark.parametrize("model", ZOO)
def test_zoo_recorded_graph_computes_the_reference(model):
    g = build_model(model, **SMALL[model])
    x = seeded_input(g, 2, 0)
    _, out = converted(g, 2, x)
    assert rel_err(out.value, reference_forward(g, x)) < 1e-5


def test_sample_calls_exactly():
    g = build_model("sample", channels=8, size=7)
    fake, out = converted(g)
    shown = lambda v: v.dims if isinstance(v, T) else [shown(t) for t in v] if isinstance(v, list) else v  # noqa: E731
    seq = [(op, {k: shown(v) for k, v in a.items() if k != "data"}) for op, a, _ in fake.calls if op != "new_weight"]
    conv = {"strides": (1, 1), "padding": SAME, "activation": "NONE"}
    block = lambda cin, cout: [("conv2d", {"input": (1, cin, 7, 7), "weight": (cout, cin, 3, 3), **conv}),  # noqa: E731
                               ("add", {"x": (1, cout, 7, 7), "y": (1, cout, 1, 1)}),
                               ("relu", {"input": (1, cout, 7, 7)})]
    assert seq == [("new_input", {"dims": (1, 8, 7, 7)}), *block(8, 8), *block(8, 16), *block(8, 8),
                   *block(8, 16), ("concat", {"axis": 1, "inputs": [(1, 16, 7, 7), (1, 16, 7, 7), (1, 8, 7, 7)]})]
    weights = [a["data"] for op, a, _ in fake.calls if op == "new_weight"]
    first = next(n for n in g.nodes() if n.kind == "conv")
    np.testing.assert_array_equal(weights[0], first.weight)
    np.testing.assert_array_equal(weights[1], first.bias.reshape(1, 8, 1, 1))
    assert out.dims == (1, 40, 7, 7)


# -- the edge cases the zoo does not reach -------------------------------------------------------
def edge_graph() -> Graph:
    """Explicit padding (conv, even kernel, ceil_mode max and avg pools), SAME with a rescaled
    average, slices through 9 cut points, a 9-way concat, element mul, a sum term, sigmoid and tanh,
    a bias-less conv, global pools, flatten of a spatial map and linear."""
    b = GraphBuilder("edge", (4, 9, 9))
    b.block()
    a = b.conv2d([[b.x]], 18, (3, 3), padding=(2, 2))  # 11x11: no TASO mode, explicit zeros
    c = b.conv2d([[b.x]], 6, (2, 2), padding=(1, 1), act="sigmoid")  # 10x10: even kernel, explicit
    d = b.conv2d([[b.x]], 6, (3, 3), stride=(2, 2), padding=(1, 1), act="tanh")  # 5x5: SAME
    m = b.pool([[c]], "max", kernel=3, stride=2, padding=1, ceil_mode=True)  # 6x6: explicit, MAX_FILL
    p1 = b.pool([[a]], "avg", kernel=3, stride=1, padding=1)  # SAME, divisor rescaled
    p2 = b.pool([[c]], "avg", kernel=3, stride=2, ceil_mode=True, count_include_pad=False)  # 5x5: explicit
    s = b.element([[Value(p1.node, 0, 6), Value(p1.node, 6, 12), Value(p1.node, 12, 18)]], op="mul")
    cat = b.identity([[Value(a.node, i, i + 2)] for i in range(0, 18, 2)])
    summed = b.identity([[Value(cat.node, 0, 6), s, Value(cat.node, 12, 18)], [Value(cat.node, 6, 8)]])
    e = b.conv2d([[summed]], 8, (1, 1), act="identity")
    ga = b.pool([[e]], "global_avg")
    gm = b.pool([[m]], "global_max")
    f = b.add(Flatten(name="flat", inputs=[[d], [p2]]))
    out = b.identity([[ga], [gm], [f]])
    b.add(Linear(name="fc", inputs=[[out]], out_features=5))
    g = b.build(0)
    g.node(e.node).bias = None
    return g


def test_edge_cases_are_exact():
    g = edge_graph()
    x = seeded_input(g, 2, 1)
    fake, out = converted(g, 2, x)
    assert out.dims == (2, 5, 1, 1)
    assert rel_err(out.value, reference_forward(g, x)) < 1e-5
    ops = fake.ops()
    concats = Counter(a["axis"] for op, a, _ in fake.calls if op == "concat")
    assert concats == {2: 4, 3: 4, 1: 8}  # pads: a, c, m, p2 on H and W; the 9-way concat as a tree of 5
    assert ops["split"] == 7  # a: 9 pieces as a tree (5 + 1 + 1 + 1 + 1), p1 and cat: one each
    fills = {float(a["data"].flat[0]) for op, a, _ in fake.calls
             if op == "new_weight" and a["data"].size and np.all(a["data"] == a["data"].flat[0])}
    assert {float(np.finfo(np.float32).min), 0.0} <= fills
    assert ops["mul"] == 4  # the element mul's chain of 2, p1 and p2 rescaled
    assert ops["add"] == 6  # biases of a, c, d and fc; the three-value sum
    assert (ops["matmul"], ops["reshape"], ops["relu"], ops["sigmoid"], ops["tanh"]) == (1, 3, 1, 1, 1)
    windows = {a["input"].dims[1:]: a["padding"] for op, a, _ in fake.calls if op in ("conv2d", "maxpool2d")}
    assert windows[(4, 13, 13)] == VALID and windows[(6, 13, 13)] == VALID and windows[(4, 9, 9)] == SAME


def test_unsupported_op_names_the_node():
    class Resize(Node):
        kind = "resize"

    g = build_model("sample", channels=8, size=7)
    out = g.blocks[-1].nodes[-1]
    bad = Resize(name="up", inputs=[[Value(out.name, 0, 40)]])
    bad.output_shape = out.output_shape
    g.blocks[-1].nodes.append(bad)
    with pytest.raises(BackendError, match=r"node up: IR op 'resize'"):
        converted(g)


def test_padding_modes_follow_taso():
    assert same_pad(8, 3, 2) == 1 and same_pad(7, 3, 2) == 1 and same_pad(7, 1, 1) == 0
    assert same_pad(8, 2, 2) == 0 and same_pad(9, 7, 1) == 3 and same_pad(6, 4, 1) == 2  # odd totals round up


# -- config, installation, export repair, prepare --------------------------------------------------
def test_config_checks():
    assert TasoConfig().budget == 1000 and TasoConfig(name="taso").alpha == 1.05
    for bad in ({"alpha": 0.9}, {"alpha": float("nan")}, {"budget": -1}):
        with pytest.raises(ConfigError, match="backend.(alpha|budget)"):
            TasoConfig(name="taso", **bad)
    with pytest.raises(ConfigError, match="not an option"):
        TasoConfig.from_mapping({"name": "taso", "iterations": 3})


def test_missing_taso_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "taso", None)  # import fails as it does without TASO
    with pytest.raises(MissingDependency) as err:
        TasoBackend.check_installed()
    with pytest.raises(MissingDependency) as err2:
        model = Model.from_graph(build_model("sample", channels=8, size=7))
        TasoBackend({"name": "taso"}).prepare(model, 1, "cuda", "fp32")
    for e in (err, err2):
        msg = str(e.value)
        assert "\n" not in msg and "not on PyPI" in msg and "python setup.py install" in msg
        assert "cmake" in msg and "TASO_HOME" in msg
    assert TasoBackend.devices == ("cuda",) and "unverified" in TasoBackend.runs


def test_taso_home_is_checked(monkeypatch, tmp_path):
    from harness_plugins.taso.backend import taso_home_problem
    monkeypatch.delenv("TASO_HOME", raising=False)
    assert "TASO_HOME is not set" in taso_home_problem()
    monkeypatch.setenv("TASO_HOME", str(tmp_path))
    assert "graph_subst.pb" in taso_home_problem()
    (tmp_path / "graph_subst.pb").write_bytes(b"")
    assert taso_home_problem() is None and TasoBackend.not_ready() is None


def taso_like_export(fake: FakeTaso) -> onnx.ModelProto:
    """The recorded graph as TASO's export_onnx writes it: SAME as symmetric pads, an entry per
    input edge named `data`, weights also as inputs, every unconsumed tensor an output."""
    names: dict[int, str] = {}
    nodes, inputs, inits = [], [], []
    consumed: set[int] = set()

    def ref(t: T) -> str:
        consumed.add(t.id)
        if names[t.id] == "data":
            inputs.append(helper.make_tensor_value_info("data", TensorProto.FLOAT, t.dims))
        return names[t.id]

    for op, a, out in fake.calls:
        outs = out if isinstance(out, list) else [out]
        for t in outs:
            names[t.id] = f"{op}{t.id}"
        if op == "new_input":
            names[out.id] = "data"
            continue
        if op == "new_weight":
            inits.append(numpy_helper.from_array(a["data"], names[out.id]))
            inputs.append(helper.make_tensor_value_info(names[out.id], TensorProto.FLOAT, out.dims))
            continue
        attrs: dict[str, Any] = {}
        if op in ("conv2d", "maxpool2d", "avgpool2d"):
            x = a["input"]
            kernel = a["weight"].dims[2:] if op == "conv2d" else a["kernels"]
            pads, _ = taso_window(a["padding"], x.dims[2:], kernel, a["strides"])
            attrs = {"kernel_shape": list(kernel), "strides": list(a["strides"]), "pads": [*pads, *pads]}
            if op == "conv2d":
                attrs["group"] = x.dims[1] // a["weight"].dims[1]
        elif op in ("concat", "split"):
            attrs = {"axis": a["axis"], **({"split": a["sizes"]} if op == "split" else {})}
        ins = [ref(v) for k in ("input", "weight", "x", "y") if isinstance(v := a.get(k), T)] + \
            [ref(v) for v in a.get("inputs", [])]
        if op == "reshape":
            inits.append(numpy_helper.from_array(np.array(a["shape"], np.int64), f"shape{out.id}"))
            ins.append(f"shape{out.id}")
        nodes.append(helper.make_node(ONNX_TYPES[op], ins, [names[t.id] for t in outs], **attrs))
    dangling = [t for op, _, out in fake.calls if op not in ("new_input", "new_weight")
                for t in (out if isinstance(out, list) else [out]) if t.id not in consumed]
    outputs = [helper.make_tensor_value_info(names[t.id], TensorProto.FLOAT, t.dims) for t in dangling]
    return helper.make_model(helper.make_graph(nodes, "main", inputs, outputs, inits))


def test_repair_makes_the_export_runnable():
    ort = pytest.importorskip("onnxruntime")
    g = edge_graph()
    x = seeded_input(g, 2, 0)
    fake, _ = converted(g, 2)
    model = taso_like_export(fake)
    assert len(model.graph.output) > 1 and [i.name for i in model.graph.input].count("data") > 1
    fixed = repair(model, (2, *g.output_shape))
    assert [i.name for i in fixed.graph.input] == ["data"] and len(fixed.graph.output) == 1
    assert fixed.opset_import[0].version == 12
    sess = ort.InferenceSession(fixed.SerializeToString(), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"data": x})[0]
    assert rel_err(y, reference_forward(g, x)) < 1e-4


def test_repair_refuses_an_ambiguous_output():
    g = build_model("sample", channels=8, size=7)
    fake, _ = converted(g)
    model = taso_like_export(fake)
    model.graph.output.append(model.graph.output[0])
    with pytest.raises(BackendError, match="cannot tell which"):
        repair(model, (1, *g.output_shape))


def fake_taso_module(optimized: list) -> types.ModuleType:
    def optimize(graph, alpha=1.0, budget=1000, print_subst=False):
        optimized.append((alpha, budget))
        return graph

    mod = types.ModuleType("taso")
    mod.__dict__.update(__version__="0.1.0", new_graph=FakeTaso, optimize=optimize, export_onnx=taso_like_export)
    return mod


@pytest.mark.parametrize("optimize", [True, False])
def test_prepare_end_to_end_with_a_fake_taso(monkeypatch, tmp_path, optimize):
    pytest.importorskip("onnxruntime")
    from harness_plugins.taso import backend as taso_backend
    calls: list = []
    monkeypatch.setitem(sys.modules, "taso", fake_taso_module(calls))
    monkeypatch.setattr(taso_backend, "PROVIDER", "CPUExecutionProvider")
    monkeypatch.setenv("TASO_HOME", str(tmp_path))
    (tmp_path / "graph_subst.pb").write_bytes(b"")
    g = build_model("squeezenet", **SMALL["squeezenet"])
    cfg = {"name": "taso", "alpha": 1.2, "budget": 7, "optimize": optimize, "store": str(tmp_path / "results")}
    prep = TasoBackend(cfg).prepare(Model.from_graph(g, 2), 2, "cuda", "fp32")
    x = seeded_input(g, 2, 0)
    assert rel_err(prep.to_numpy(prep.infer(prep.load_input(x))), reference_forward(g, x)) < 1e-4
    assert calls == ([(1.2, 7)] if optimize else [])
    assert prep.display_name == ("TASO" if optimize else "TASO-SEQ")
    assert prep.metrics["taso_cost_ms"] == 1.5 and prep.metrics["taso_run_time_ms"] == 2.5
    convs = sum(n.kind == "conv" for n in g.nodes())
    assert prep.metrics["taso_activations"] == prep.metrics["taso_activations_initial"] == convs
    assert f'"Conv": {convs}' in prep.artifacts["taso_ops.json"]
    assert (tmp_path / "results" / "taso").is_dir() == optimize
    with pytest.raises(BackendError, match="precision=fp16"):
        TasoBackend(cfg).prepare(Model.from_graph(g, 2), 2, "cuda", "fp16")
    monkeypatch.delenv("TASO_HOME")
    with pytest.raises(BackendError, match="TASO_HOME"):
        TasoBackend({**cfg, "optimize": True}).prepare(Model.from_graph(g, 2), 2, "cuda", "fp32")


def test_graphs_beyond_tasos_operator_list_are_refused(monkeypatch, tmp_path):
    from harness_plugins.taso import backend as taso_backend
    monkeypatch.setitem(sys.modules, "taso", fake_taso_module([]))
    monkeypatch.setattr(taso_backend, "OP_LIST_LIMIT", 20)
    monkeypatch.setenv("TASO_HOME", str(tmp_path))
    (tmp_path / "graph_subst.pb").write_bytes(b"")
    g = build_model("sample", channels=8, size=7)  # 13 operators: fits once, not twice
    with pytest.raises(BackendError, match="13 TASO operators.*may double"):
        TasoBackend({"name": "taso", "store": str(tmp_path)}).prepare(Model.from_graph(g), 1, "cuda", "fp32")
