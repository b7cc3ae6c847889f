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
    # the paper's networks have no registry operators: the transformer passes leave them as they are
    **{(m, p): 0 for m in ("inception_v3", "nasnet", "randwire", "squeezenet")
       for p in ("attention", "fuse_pointwise")},
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
    with pytest.raises(ValueError, match="unknown graph pass .fuse_all.; choose from: fold_bias, pool_conv, "
                                         "attention, fuse_pointwise"):
        check_passes(["fold_bias", "fuse_all"])


def _tiny_transformer():
    """A patch embedding, a class token and one pre-norm block with biased and masked multi-head attention (two
    constants added, as Swin's relative position bias and shifted-window mask), GELU and a LayerScale, as
    torch.onnx exports it."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, dim=16, heads=2, tokens=10):
            super().__init__()
            self.embed = nn.Conv2d(3, dim, 4, stride=4)
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.bias = nn.Parameter(torch.randn(heads, tokens, tokens) * 0.1)
            self.gamma = nn.Parameter(torch.rand(dim))
            self.cls = nn.Parameter(torch.randn(1, 1, dim))
            self.register_buffer("mask", torch.triu(torch.full((tokens, tokens), -100.0), 1))  # Swin: a 2nd add
            self.heads = heads

        def forward(self, x):
            x = self.embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
            b, n, c = x.shape
            qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            attn = ((q * (c // self.heads) ** -0.5) @ k.transpose(-2, -1) + self.bias + self.mask).softmax(-1)
            x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))
            h = self.fc1(self.norm2(x))
            h = h * 0.5 * (1.0 + torch.erf(h / 1.4142135623730951))  # GELU as timm's models export it
            x = x + self.gamma * self.fc2(h)
            return x.mean(1)

    torch.manual_seed(0)
    return Block().eval()


def test_attention_and_pointwise_groups_become_one_operator_each(tmp_path):
    import torch

    from ios_core.interpreters.torch import GraphModule
    from ios_core.ir.nodes import Op
    from ios_core.onnx import import_onnx

    path = tmp_path / "block.onnx"
    torch.onnx.export(_tiny_transformer(), (torch.randn(2, 3, 12, 12),), str(path), dynamo=True, verbose=False)
    import onnx

    g = import_onnx(onnx.load(str(path)), batch=2)
    out, counts = apply_passes(g, ["attention", "fuse_pointwise"])
    assert counts == {"attention": 1, "fuse_pointwise": 6}
    ops = [n.op for n in _nodes(out) if isinstance(n, Op)]
    assert ops.count("attention") == 1 and "softmax" not in ops and "erf" not in ops and "matmul" not in ops
    *heads, merge, gelu, scale = [[s["op"] for s in n.params["steps"]] for n in _nodes(out)
                                  if isinstance(n, Op) and n.op == "fused"]
    assert heads == [["slice", "reshape", "transpose"]] * 3 and merge == ["transpose", "reshape"]  # Q, K, V; heads
    assert sorted(gelu) == ["add", "div", "erf", "mul", "mul"] and scale == ["mul", "add"]  # LayerScale + residual
    (attention,) = [n for n in _nodes(out) if isinstance(n, Op) and n.op == "attention"]
    assert attention.params["scale"] == pytest.approx(8 ** -0.5) and attention.const_shapes == [(2, 10, 10)]
    x = np.random.default_rng(2).standard_normal((2, *g.input_shape))
    want = reference_forward(g, x)
    assert rel_err(reference_forward(out, x), want) < 1e-12  # the same operators in the same order
    with torch.no_grad():  # PyTorch's fused attention on the CPU
        got = GraphModule(out).eval()(torch.tensor(x, dtype=torch.float32)).numpy()
    assert rel_err(got.reshape(want.shape), want) < 1e-5
    # attention: mul, matmul, 2 adds, softmax; GELU: 4 of 5; scale; Q, K and V's heads: 2 of 3 each; merge: 1 of 2
    assert g.num_units() - out.num_units() == 5 + 4 + 1 + 3 * 2 + 1
    from onnx.reference import ReferenceEvaluator

    from ios_core.onnx.export import export_onnx

    exported = export_onnx(out)  # the compound operators as their ONNX operators, the class token over the batch
    got = ReferenceEvaluator(exported).run(None, {exported.graph.input[0].name: x.astype(np.float32)})[0]
    assert rel_err(got.reshape(want.shape), want) < 1e-5
