import numpy as np
import pytest
import torch

from ios_core.inputs import seeded_input
from ios_core.interpreters import reference_forward
from ios_core.interpreters.torch import to_torch
from ios_core.ir import GraphError, Sequential
from ios_core.models import MODELS, build_model
from ios_core.models.randwire import read_edge_list, stage_graphs, watts_strogatz, write_edge_list

from .helpers import SMALL, rel_err


@pytest.mark.parametrize("name,blocks,units,unit_list,out,gmacs", [
    ("inception_v3", 13, 119, [7, 9, 9, 9, 6, 12, 12, 12, 12, 8, 11, 11, 1], (2048, 1, 1), 5.7),
    ("squeezenet", 12, 50, None, (1000, 1, 1), 1.2),
    ("randwire", 6, 120, [1, 17, 33, 33, 33, 3], (1280, 1, 1), 7.8),
    ("nasnet", 1, 374, [374], (3360, 1, 1), 22.5),
    ("resnet50", 18, 71, None, (2048, 1, 1), 4.1),
    ("sample", 1, 5, [5], (1875, 15, 15), 1.7),
])
def test_full_size_counts(name, blocks, units, unit_list, out, gmacs):
    g = build_model(name)
    assert len(g.blocks) == blocks
    assert g.num_units() == units
    if unit_list:
        assert [len(b.nodes) for b in g.blocks] == unit_list
    assert g.output_shape == out
    assert g.macs() / 1e9 == pytest.approx(gmacs, rel=0.03)


def test_inception_op_mix():
    kinds = [n.kind for n in build_model("inception_v3").nodes()]
    assert (kinds.count("conv"), kinds.count("pool"), kinds.count("identity")) == (94, 14, 11)


def test_nasnet_parts_and_op_mix():
    g = build_model("nasnet")
    assert [len(p) for p in g.blocks[0].parts] == [1, 18, 21, 18, 16, 16, 16, 16, 16, 19, 18, 16, 16, 16, 16, 16,
                                                   19, 18, 16, 16, 16, 16, 16, 1, 1]
    inner = [i for n in g.nodes() if isinstance(n, Sequential) for i in n.nodes]
    top = [n for n in g.nodes() if not isinstance(n, Sequential)]
    convs = sum(i.kind == "conv" for i in inner) + sum(n.kind == "conv" for n in top)
    relus = sum(i.kind == "activation" for i in inner) + sum(n.kind == "activation" for n in top)
    assert (convs, relus) == (488, 268)
    assert sum(n.kind == "pool" for n in top) == 71
    assert sum(n.kind == "identity" for n in top) == 34


def test_randwire_seeded_and_edge_lists(tmp_path):
    a, b = watts_strogatz(32, 4, 0.75, seed=5), watts_strogatz(32, 4, 0.75, seed=5)
    assert a == b and len(a) == 64 and all(u < v for u, v in a)
    assert watts_strogatz(32, 4, 0.75, seed=6) != a
    small = build_model("randwire", **SMALL["randwire"]).hash()
    assert build_model("randwire", **SMALL["randwire"]).hash() == small
    assert build_model("randwire", seed=1, **SMALL["randwire"]).hash() != small
    for i, (n, edges) in enumerate(stage_graphs(7)):
        write_edge_list(tmp_path / f"ws-{i}.txt", n, edges)
    assert read_edge_list(tmp_path / "ws-0.txt") == stage_graphs(7)[0]
    from_dir = build_model("randwire", graph_dir=str(tmp_path), **SMALL["randwire"])
    assert from_dir.hash() == build_model("randwire", seed=7, **SMALL["randwire"]).hash()
    (tmp_path / "ws-0.txt").write_text("16\n3\n0 1\n")
    with pytest.raises(GraphError, match="expected 3 edges"):
        build_model("randwire", graph_dir=str(tmp_path))


def test_unknown_model_and_parameter():
    with pytest.raises(GraphError, match="unknown model 'vgg'; choose one of: sample, inception_v3"):
        build_model("vgg")
    with pytest.raises(GraphError, match="model 'squeezenet' has no parameter depth; valid: image_size, seed"):
        build_model("squeezenet", depth=3)


@pytest.mark.parametrize("name", [m for m in MODELS if m != "onnx"])
def test_reference_matches_torch(name):
    """The numpy float64 reference and an independent torch float64 evaluation agree."""
    g = build_model(name, **SMALL[name])
    x = seeded_input(g, 2)
    ref = reference_forward(g, x)
    assert ref.shape == (2, *g.output_shape)
    with torch.no_grad():
        out = to_torch(g).double()(torch.from_numpy(x).double()).numpy()
    assert rel_err(out, ref) < 1e-10
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0


def test_reference_rejects_wrong_input():
    g = build_model("sample", **SMALL["sample"])
    with pytest.raises(ValueError, match=r"input of shape \(1, 3, 7, 7\) does not match graph sample's \(N, 8, 7, 7\)"):
        reference_forward(g, np.zeros((1, 3, 7, 7)))
