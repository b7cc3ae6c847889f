import re

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from ios_core.inputs import seeded_input
from ios_core.interpreters import reference_forward
from ios_core.models import MODELS, build_model
from ios_core.onnx import SUPPORTED_OPS, OnnxImportError, export_onnx, import_onnx

from .helpers import SMALL, import_torchvision_models, rel_err

ort = pytest.importorskip("onnxruntime")


def run_ort(model, x):
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("name", [m for m in MODELS if m != "onnx"])
def test_export_matches_onnxruntime_and_reimports(name):
    g = build_model(name, **SMALL[name])
    x = seeded_input(g, 2)
    ref = reference_forward(g, x)
    model = export_onnx(g)
    assert rel_err(run_ort(model, x), ref) < 1e-5
    g2 = import_onnx(model)
    assert g2.output_shape == g.output_shape
    assert rel_err(reference_forward(g2, x), ref) < 1e-12


@pytest.mark.parametrize("arch,size,dynamo", [("resnet18", 64, True), ("squeezenet1_1", 64, True),
                                              ("googlenet", 64, True), ("inception_v3", 96, True),
                                              ("resnet18", 64, False), ("squeezenet1_0", 64, False)])
def test_torchvision_models_import(arch, size, dynamo, tmp_path):
    models = import_torchvision_models()
    torch.manual_seed(0)
    kw = {"aux_logits": False, "init_weights": True} if arch in ("googlenet", "inception_v3") else {}
    net = getattr(models, arch)(**kw).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)
    path = tmp_path / f"{arch}.onnx"
    torch.onnx.export(net, (torch.from_numpy(x),), str(path), dynamo=dynamo, verbose=False)  # both exporters
    g = import_onnx(path)
    assert g.output_shape == (1000, 1, 1)
    ref = reference_forward(g, x)
    assert rel_err(run_ort(path, x), ref) < 1e-4
    with torch.no_grad():
        assert rel_err(net(torch.from_numpy(x)).numpy(), ref) < 1e-4


def _model(nodes, inits, out_shape=(1, 4, 5, 5), in_shape=(1, 3, 5, 5)):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_batchnorm_folds_into_conv():
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
             "g": rng.uniform(0.5, 2, 4).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32),
             "m": rng.standard_normal(4).astype(np.float32), "v": rng.uniform(0.5, 2, 4).astype(np.float32)}
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                    helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"], name="bn"),
                    helper.make_node("Relu", ["n"], ["y"], name="relu")], inits)
    g = import_onnx(model)
    assert g.num_units() == 1 and g.node("1").act == "relu"
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    assert rel_err(reference_forward(g, x), run_ort(model, x)) < 1e-5


def test_unsupported_operator_is_named():
    model = _model([helper.make_node("LpNormalization", ["x"], ["y"], name="lpn")], {}, (1, 3, 5, 5))
    with pytest.raises(OnnxImportError, match=r"ONNX node 'lpn' \(LpNormalization\): operator 'LpNormalization' is "
                                              r"not supported; supported: .*AveragePool, BatchNormalization"):
        import_onnx(model)


def test_batchnorm_without_conv_is_a_channel_affine_op():
    rng = np.random.default_rng(0)
    stats = {k: rng.uniform(0.5, 1.5, 3).astype(np.float32) for k in "gbmv"}
    model = _model([helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], name="bn0")],
                   stats, (1, 3, 5, 5))
    graph = import_onnx(model)
    assert [n.label() for n in graph.nodes()][1:] == ["ChannelAffine"]
    x = rng.standard_normal((1, 3, 5, 5))
    want = (x - stats["m"][:, None, None]) / np.sqrt(stats["v"][:, None, None] + 1e-5) * stats["g"][:, None, None] \
        + stats["b"][:, None, None]
    np.testing.assert_allclose(reference_forward(graph, x), want, rtol=1e-6, atol=1e-6)  # float32 constants


def test_transpose_without_perm_of_a_held_back_transpose_reverses_its_axes():
    """ONNX's Transpose without ``perm`` reverses the axes, also of a transpose held back because it moves the
    batch axis (which has no shape of its own to count the axes of); a ``perm`` that is no permutation of the
    axes is refused by name."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 2, 3, 0], name="hold"),  # (3, 4, 5, B): held
             helper.make_node("Transpose", ["t"], ["y"], name="rev")]  # (B, 5, 4, 3)
    model = _model(nodes, {}, (2, 5, 4, 3), in_shape=(2, 3, 4, 5))
    g = import_onnx(model)
    assert g.output_shape == (5, 4, 3)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    assert rel_err(reference_forward(g, x), run_ort(model, x)) < 1e-6
    nodes[1] = helper.make_node("Transpose", ["t"], ["y"], perm=[3, 0, 1], name="rev")
    with pytest.raises(OnnxImportError, match=r"'rev' \(Transpose\): perm \[3, 0, 1\] is not a permutation of the 4 "
                                              r"axes of 't'"):
        import_onnx(_model(nodes, {}, (2, 5, 4), in_shape=(2, 3, 4, 5)))


def test_squeeze_without_axes_of_a_held_back_transpose_squeezes_its_size_1_axes():
    """A Squeeze without axes (opset 13+: an optional input) drops every axis of size 1: of a held-back transpose,
    those of the view, found through its permutation."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2, 3], name="hold"),  # (3, B, 1, 5): held
             helper.make_node("Slice", ["t", "s", "e"], ["u"], name="pick"),  # (1, B, 1, 5)
             helper.make_node("Squeeze", ["u"], ["y"], name="squeeze")]  # (B, 5)
    model = _model(nodes, {"s": np.array([1]), "e": np.array([2])}, (2, 5), in_shape=(2, 3, 1, 5))
    g = import_onnx(model)
    x = np.random.default_rng(0).standard_normal((2, 3, 1, 5)).astype(np.float32)
    want = run_ort(model, x)
    assert want.shape == (2, 5)
    assert np.prod(g.output_shape) == 5 and rel_err(reference_forward(g, x), want) < 1e-6


@pytest.mark.parametrize("op", [op for op in SUPPORTED_OPS if op != "Constant"])
def test_an_unknown_input_is_named_by_every_converter(op):
    """A tensor no graph input, initializer or earlier node makes is refused in one line naming it, before the
    converter runs: some read the input's shape first (Reshape, MatMul, Einsum gave a bare KeyError)."""
    kw = {"equation": "bij,bjk->bik"} if op == "Einsum" else {}
    model = _model([helper.make_node(op, ["ghost", "k"], ["y"], name="bad", **kw)],
                   {"k": np.ones((3, 3), np.float32)})
    with pytest.raises(OnnxImportError, match=rf"^ONNX node 'bad' \({op}\): input 'ghost' is unknown: no graph "
                                              rf"input, initializer or earlier node makes it$"):
        import_onnx(model)


@pytest.mark.parametrize(("node", "why"), [
    (helper.make_node("Add", ["x"], ["y"], name="bad"), "1 input(s), where Add takes 2"),
    (helper.make_node("MatMul", ["x"], ["y"], name="bad"), "1 input(s), where MatMul takes 2"),
    (helper.make_node("Clip", ["x", "k", "k", "k"], ["y"], name="bad"), "4 input(s), where Clip takes 1 to 3")])
def test_a_node_with_the_wrong_number_of_inputs_is_one_line(node, why):
    """ONNX's own schema says how many inputs an operator takes: Add with one gave StopIteration, MatMul
    IndexError."""
    model = _model([node], {"k": np.ones(1, np.float32)}, (1, 3, 5, 5))
    with pytest.raises(OnnxImportError, match=re.escape(f"ONNX node 'bad' ({node.op_type}): {why} (ONNX opset 17)")):
        import_onnx(model)


def test_corrupt_and_missing_files(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x01garbage that is not protobuf\xff\xff")
    with pytest.raises(OnnxImportError, match="bad.onnx: not a valid ONNX model"):
        import_onnx(bad)
    with pytest.raises(OnnxImportError, match="missing.onnx: no such file"):
        import_onnx(tmp_path / "missing.onnx")


def test_onnx_zoo_entry(tmp_path):
    g = build_model("sample", **SMALL["sample"])
    export_onnx(g, tmp_path / "s.onnx")
    g2 = build_model("onnx", path=str(tmp_path / "s.onnx"))
    x = seeded_input(g, 1)
    assert rel_err(reference_forward(g2, x), reference_forward(g, x)) < 1e-12


def test_identity_on_an_initializer_as_the_legacy_exporter_writes_it():
    # torch.onnx.export(dynamo=False) shares folded weights through Identity nodes on initializers
    rng = np.random.default_rng(1)
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32)}
    model = _model([helper.make_node("Identity", ["b"], ["b2"], name="share"),
                    helper.make_node("Conv", ["x", "w", "b2"], ["y"], pads=[1, 1, 1, 1], name="conv")], inits)
    g = import_onnx(model)
    assert g.num_units() == 1
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    assert rel_err(reference_forward(g, x), run_ort(model, x)) < 1e-5


def test_einsum_batched_matrix_products_import_as_matmuls():
    """MaxViT writes attention as einsums: both batched-product forms import (the ``...jd`` one with its right
    operand transposed) and compute the module's function; any other equation is refused by name."""

    class Heads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 1)

        def forward(self, x):
            t = self.conv(x).reshape(x.shape[0], 2, 4, 16).transpose(2, 3)  # (B, 2 heads, 16 tokens, 4)
            s = torch.einsum("bhid,bhjd->bhij", t, t * 0.5).softmax(-1)
            return torch.einsum("bhij,bhjd->bhid", s, t).flatten(1)

    torch.manual_seed(0)
    net = Heads().eval()
    with torch.no_grad():
        program = torch.onnx.export(net, (torch.randn(2, 3, 4, 4),), dynamo=True, verbose=False)
    model = program.model_proto
    assert [n.op_type for n in model.graph.node].count("Einsum") == 2
    g = import_onnx(model, batch=2)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4))
    want = net.double()(torch.from_numpy(x)).detach().numpy()
    assert rel_err(reference_forward(g, x).reshape(want.shape), want) < 1e-12
    for node in model.graph.node:
        if node.op_type == "Einsum":
            node.attribute[0].s = b"bhid,bhjd->bhjd"
            break
    with pytest.raises(OnnxImportError, match=r"Einsum 'bhid,bhjd->bhjd' is not supported: only batched matrix"):
        import_onnx(model, batch=2)


def test_expand_of_a_norm_imports_where_the_batch_is_merged_into_windows():
    """Swin V2's F.normalize exports an Expand of the norm before the division, on windows that merge the batch
    axis: it imports as a broadcast and computes the module's function; a shape it cannot take is named."""

    class Windows(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 1)

        def forward(self, x):
            t = self.conv(x).reshape(x.shape[0] * 2, 4, 16)  # two windows per sample, batch merged into axis 0
            return torch.nn.functional.normalize(t, dim=-1).reshape(x.shape[0], -1)

    torch.manual_seed(0)
    net = Windows().eval()
    with torch.no_grad():
        model = torch.onnx.export(net, (torch.randn(2, 3, 4, 4),), dynamo=True, verbose=False).model_proto
    expand = next(n for n in model.graph.node if n.op_type == "Expand")
    g = import_onnx(model, batch=2)
    assert "expand" in {getattr(n, "op", "") for n in g.nodes()}
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4))
    want = net.double()(torch.from_numpy(x)).detach().numpy()
    assert rel_err(reference_forward(g, x).reshape(want.shape), want) < 1e-12
    from ios_core.interpreters.torch import to_torch

    with torch.no_grad():  # the IR's PyTorch form (what IOS runs) and its ONNX export compute it too
        assert rel_err(to_torch(g).double()(torch.from_numpy(x)).numpy().reshape(want.shape), want) < 1e-12
    assert rel_err(reference_forward(import_onnx(export_onnx(g), batch=2), x).reshape(want.shape), want) < 1e-12
    shape = next(i for i in model.graph.initializer if i.name == expand.input[1])
    grown = numpy_helper.to_array(shape).copy()
    grown[0] *= 3
    model.graph.initializer.append(numpy_helper.from_array(grown, "grown"))  # its own: the shape is shared
    expand.input[1] = "grown"
    with pytest.raises(OnnxImportError, match=r"'node_expand' \(Expand\): cannot expand \(4, 4, 1\) to \(12, 4, 16\)"):
        import_onnx(model, batch=2)
