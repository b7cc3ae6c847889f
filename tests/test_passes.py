"""The graph passes compute the same function (float64 reference) and rewrite what they claim.

A rewritten weight is stored in float32 like every weight, so the rewritten graph differs from
the original by float32 rounding of its weights (~1e-8 relative), far below what any backend's
float32 run differs by (the correctness check allows 1e-4)."""

import numpy as np
import pytest

from ios_core.interpreters.reference import reference_forward
from ios_core.ir.nodes import Conv, Pool
from ios_core.models import build_model
from ios_core.passes import PASSES, apply_passes, check_passes

from .helpers import SMALL, import_torchvision_models, rel_err

TOL = 1e-6

#: rewrites each pass makes on the small zoo models (the structure, not the size, decides them)
EXPECTED = {
    ("inception_v3", "pool_conv"): 9, ("inception_v3", "fold_bias"): 0,
    ("nasnet", "fold_bias"): None, ("randwire", "fold_bias"): None,  # None: at least one
    ("squeezenet", "pool_conv"): 0, ("squeezenet", "fold_bias"): 0,
}


def _nodes(graph):
    for block in graph.blocks:
        for n in block.nodes:
            yield n
            yield from getattr(n, "nodes", [])


@pytest.mark.parametrize("model", ["inception_v3", "nasnet", "randwire", "squeezenet"])
@pytest.mark.parametrize("name", list(PASSES))
def test_each_pass_keeps_the_function(model, name):
    g = build_model(model, **SMALL[model])
    x = np.random.default_rng(1).standard_normal((2, *g.input_shape)).astype(np.float32)
    before = reference_forward(g, x)
    out, counts = apply_passes(g, [name])
    assert set(counts) == {name}
    want = EXPECTED.get((model, name), "any")
    if want is None:
        assert counts[name] > 0
    elif want != "any":
        assert counts[name] == want
    if counts[name]:
        assert out is not g
        assert rel_err(reference_forward(out, x), before) < TOL
    else:
        assert out is g
    assert rel_err(reference_forward(g, x), before) == 0  # the caller's graph is untouched


def test_pool_conv_removes_the_pools_it_merges():
    g = build_model("inception_v3", **SMALL["inception_v3"])
    out, counts = apply_passes(g, ["pool_conv"])
    pools = [n for n in _nodes(g) if isinstance(n, Pool) and n.pool_type == "avg" and n.stride == (1, 1)]
    left = [n for n in _nodes(out) if isinstance(n, Pool) and n.pool_type == "avg" and n.stride == (1, 1)]
    assert len(pools) - len(left) == counts["pool_conv"] == 9
    merged = [n for n in _nodes(out) if isinstance(n, Conv) and n.hint == "PoolConv"]
    assert len(merged) == 9 and all(c.kernel == (3, 3) and c.padding == (1, 1) for c in merged)
    names = {n.name for n in _nodes(out)}
    for block in out.blocks:  # no part of a block names a removed node
        assert all(x in names for part in block.parts or [] for x in part)


def test_fold_bias_moves_every_folded_bias():
    g = build_model("nasnet", **SMALL["nasnet"])
    out, counts = apply_passes(g, ["fold_bias"])
    before = sum(1 for n in _nodes(g) if isinstance(n, Conv) and n.bias is None)
    after = sum(1 for n in _nodes(out) if isinstance(n, Conv) and n.bias is None)
    assert after - before == counts["fold_bias"] > 0


def test_passes_on_an_imported_onnx_model(tmp_path):
    """torchvision's Inception v3 through ONNX: BatchNorm folded at import, then both passes."""
    import torch

    from ios_core.onnx import import_onnx

    torch.manual_seed(0)
    net = import_torchvision_models().inception_v3(aux_logits=False, init_weights=True).eval()
    x = np.random.default_rng(0).standard_normal((1, 3, 96, 96)).astype(np.float32)
    path = tmp_path / "inception_v3.onnx"
    torch.onnx.export(net, (torch.from_numpy(x),), str(path), dynamo=False, verbose=False)
    g = import_onnx(path)
    assert not any(type(n).__name__ == "BatchNorm" for n in _nodes(g))
    out, counts = apply_passes(g, list(PASSES))
    assert counts["pool_conv"] == 9
    ref = reference_forward(g, x)
    assert rel_err(reference_forward(out, x), ref) < TOL
    with torch.no_grad():
        assert rel_err(net(torch.from_numpy(x)).numpy(), reference_forward(out, x)) < 1e-4


def test_unknown_pass_is_named():
    with pytest.raises(ValueError, match="unknown graph pass 'fuse_all'; choose from: fold_bias, pool_conv"):
        check_passes(["fold_bias", "fuse_all"])
