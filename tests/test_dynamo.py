"""torch.compile(model, backend="ios") on the CPU: a module planned whole, outputs equal to eager, what IOS cannot
take left to the fallback and named in one line, a plan per batch size, options checked in one line."""

import logging

import pytest
import torch
from torch import nn

from ios_core.dynamo import Compiled, parse_options
from ios_core.schedule import OptionError

FAST = {"cost_model": "analytic", "select": False}  # nothing timed: the CPU has nothing to overlap


class Net(nn.Module):
    """The operators IOS's CNNs have: conv+BN+ReLU, two branches concatenated, a residual sum, both pools, a
    squeeze-excite gate, a flatten and a classifier."""

    def __init__(self, flip: bool = False):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 2, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.a = nn.Conv2d(8, 8, 1)
        self.b = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.Hardswish())
        self.gate = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 16, 1), nn.Sigmoid())
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, 5)
        self.flip = flip
        for bn in self.modules():  # statistics that are not the identity, so that folding them is checked
            if isinstance(bn, nn.BatchNorm2d):
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = self.stem(torch.nn.functional.pad(x, (0, 1, 1, 0)))  # TF's "same" padding, as timm's tf_ models pad
        if self.flip:
            x = torch.flip(x, dims=[3])  # no converter: the fallback runs it
        y = torch.cat([self.a(x), self.b(x)], dim=1)
        y = y * self.gate(y) + torch.cat([x, x], dim=1)
        y = self.pool(y).mean(dim=(2, 3))
        return self.fc(torch.flatten(y, 1))


def _compiled(model, **options):
    torch._dynamo.reset()
    return torch.compile(model, backend="ios", options={**FAST, **options})


def _planned_whole(model, caplog, size: int = 16, batches=(1, 2)) -> None:
    """``model`` compiled once, run at each batch size: eager's output, and every line says IOS ran all of it."""
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="ios_core.dynamo"):
        fn = _compiled(model)
        for batch in batches:
            x = torch.randn(batch, 3, size, size)
            torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)
    said = [r.getMessage() for r in caplog.records if "IOS runs" in r.getMessage()]
    assert said and all("IOS runs all" in s for s in said), said


def test_a_cnn_is_planned_whole_and_computes_what_eager_does(caplog):
    model, x = Net().eval(), torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        want = model(x)
        with caplog.at_level(logging.INFO, logger="ios_core.dynamo"):
            got = _compiled(model)(x)
    assert got.shape == want.shape == (2, 5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert any("IOS runs all" in r.getMessage() and "1 plan(s)" in r.getMessage() for r in caplog.records)


def test_what_ios_cannot_take_falls_back_and_is_named(caplog):
    model, x = Net(flip=True).eval(), torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        want = model(x)
        with caplog.at_level(logging.WARNING, logger="ios_core.dynamo"):
            got = _compiled(model, fallback="eager")(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    (line,) = [r.getMessage() for r in caplog.records if "fallback runs" in r.getMessage()]
    assert "flip.default (IOS has no converter for it)" in line
    assert "in 2 plan(s)" in line  # the stem before the flip, the rest after it


def test_each_batch_size_gets_its_own_plan():
    model = Net().eval()
    fn = _compiled(model)
    with torch.no_grad():
        for batch in (1, 3):
            x = torch.randn(batch, 3, 16, 16)
            torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


def test_options_are_checked_in_one_line():
    assert parse_options({"schedule": "greedy", "precision": "fp16"}).plan.schedule == "greedy"
    with pytest.raises(OptionError, match=r"unknown option\(s\) shedule; valid: .*schedule"):
        parse_options({"shedule": "greedy"})
    with pytest.raises(OptionError, match="fallback='tvm'; choose one of inductor, eager"):
        parse_options({"fallback": "tvm"})
    with pytest.raises(OptionError, match="precision='fp8'"):
        parse_options({"precision": "fp8"})


def test_the_backend_is_found_by_name():
    """The package's entry point registers it: no import of ios_core needed before torch.compile."""
    from torch._dynamo.backends.registry import lookup_backend

    assert lookup_backend("ios").__module__ == "ios_core.dynamo"


def test_a_plan_is_picked_by_the_shapes_of_the_inputs_that_are_not_weights():
    gm = torch.fx.symbolic_trace(nn.Sequential(nn.Conv2d(3, 4, 1)))
    weight = nn.Parameter(torch.zeros(4, 3, 1, 1))
    compiled = Compiled(gm, parse_options(FAST), [torch.zeros(2, 3, 4, 4), weight])
    assert compiled.watched == [0]
    assert compiled.key([torch.zeros(5, 3, 4, 4), weight]) == (torch.Size([5, 3, 4, 4]),)


def test_the_harness_measures_it_as_a_pytorch_compile_form(bench_cfg):
    """backend=pytorch_ios: torch.compile(backend="ios") under the harness's protocol and correctness check, its
    label its own, what IOS ran noted in the record."""
    import harness

    cfg = bench_cfg(**{"backend.mode": "compile", "backend.compile_backend": "ios"})
    rec = harness.run(cfg, quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.label == "TorchCompile-IOS"
    assert any("IOS runs all" in n for n in rec.notes), rec.notes


def test_a_channels_last_module_is_planned_whole(caplog):
    """A channels-last mean comes out of ATen restrided in place (as_strided_): the same values, no fallback."""
    model = Net().eval().to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 16, 16).to(memory_format=torch.channels_last)
    with torch.inference_mode(), caplog.at_level(logging.INFO, logger="ios_core.dynamo"):
        torch.testing.assert_close(_compiled(model)(x), model(x), rtol=1e-5, atol=1e-5)
    assert any("IOS runs all" in r.getMessage() for r in caplog.records)


def test_the_example_compiles_a_torchvision_classifier(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, str(repo / "examples" / "compile.py"), "--arch", "mobilenet_v3_small"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "IOS runs all" in out.stderr + out.stdout
    last = out.stdout.splitlines()[-1]
    assert last.startswith("output (1, 1000), relative difference from eager ") and float(last.rsplit(" ", 1)[1]) < 1e-4


class Vit(nn.Module):
    """A vision transformer as timm writes one: patches, a class token, q/k/v from one linear split along an axis
    permuted before the batch (``permute(2, 0, 3, 1, 4).unbind(0)``), SDPA, a residual MLP, a response norm over
    the tokens, the class token and the patch tokens' normalized mean out."""

    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, 17, dim))
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.fc_norm = nn.LayerNorm(dim)
        self.gamma = nn.Parameter(torch.randn(dim))
        self.head = nn.Linear(dim, 5)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        b, n, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, c))
        x = x + self.mlp(self.norm2(x))
        gx = torch.norm(x, p=2, dim=1, keepdim=True)  # ConvNeXt-V2's global response norm, over the tokens
        x = x + self.gamma * x * (gx / (gx.mean(dim=-1, keepdim=True) + 1e-6))
        return self.head(x[:, 0] + self.fc_norm(x[:, 1:].mean(1)))  # BEiT's pooling of the patch tokens


def test_a_vision_transformer_is_planned_whole(caplog):
    """Attention's batch-moving layout ops are rewritten per sample (a select before the permute, permute chains
    folded) and its batched products taken as the IR's matmul: no fallback, eager's output."""
    model = Vit().eval()
    with torch.no_grad():
        for batch in (1, 2):
            x = torch.randn(batch, 3, 16, 16)
            with caplog.at_level(logging.INFO, logger="ios_core.dynamo"):
                got = _compiled(model)(x)
            torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)
    said = [r.getMessage() for r in caplog.records if "IOS runs" in r.getMessage()]
    assert said and all("IOS runs all" in s and "1 plan(s)" in s for s in said), said


def test_torchs_guard_filter_goes_beside_ioss_options():
    """torch.compile takes ``guard_filter_fn`` out of ``options`` before the backend sees them: IOS folds the weights
    into its plan, so dropping the guards on the module's weights (the per-call cost docs/ios.md measures) is safe
    for what it reads."""
    model, x = Net().eval(), torch.randn(1, 3, 16, 16)
    torch._dynamo.reset()
    fn = torch.compile(model, backend="ios", options={
        **FAST, "guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})
    with torch.no_grad():
        torch.testing.assert_close(fn(x), model(x), rtol=1e-5, atol=1e-5)


class TokenOps(nn.Module):
    """What the zoos' token mixers use besides attention: a gate split off the features (gMLP) through GELU's tanh
    approximation, a sum and an RMS norm over them (``pow``, ``rsqrt``), a per-token scale broadcast with
    ``expand``."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.patch = nn.Conv2d(3, 2 * dim, 4, stride=4)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)  # (B, 16, 2 dim)
        u, v = x.split(x.shape[-1] // 2, dim=-1)
        x = u * torch.nn.functional.gelu(v, approximate="tanh")  # MaxViT's and SigLIP-NaFlex's GELU
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        x = x + x.sum(dim=1, keepdim=True).expand(-1, x.shape[1], -1) / x.shape[1]
        return self.head(x.mean(1))


def test_token_mixers_ops_are_planned_whole(caplog):
    _planned_whole(TokenOps().eval(), caplog, batches=(2,))


class ReadsAScalar(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y * int(y.abs().max().item() > 0)  # data-dependent: ATen's trace cannot read the value


def test_a_graph_that_cannot_be_traced_runs_in_the_fallback_said_in_one_line(caplog):
    model, x = ReadsAScalar().eval(), torch.randn(1, 3, 8, 8)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="ios_core.dynamo"), \
            torch._dynamo.config.patch(capture_scalar_outputs=True):
        torch.testing.assert_close(_compiled(model, fallback="eager")(x), model(x))
    said = [r.getMessage() for r in caplog.records if "IOS takes none" in r.getMessage()]
    assert said and "tracing it to ATen failed" in said[0] and said[0].endswith("the fallback runs it"), said


def test_a_separable_conv_after_a_fused_activation_is_one_unit():
    """conv+relu -> depthwise -> 1x1: the relu is fused into the first conv, and the depthwise/pointwise pair is
    still one schedule unit, as the zoo's NASNet cells have it (left apart, its cells had a third more units)."""
    from ios_core.fx.aten import to_aten
    from ios_core.fx.split import split
    from ios_core.ir.nodes import Sequential

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=8), nn.Conv2d(8, 8, 1)).eval()
    graphs = []
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=lambda gm, ins: (graphs.append((gm, ins)), gm.forward)[1])(torch.randn(1, 3, 9, 9))
    (part,) = split(to_aten(*graphs[0])).parts
    units = [n for b in part.graph.blocks for n in b.nodes]
    assert [type(n).__name__ for n in units][:2] == ["Conv", "Sequential"]
    assert isinstance(units[1], Sequential) and units[1].hint == "SepConv"


class AttentionPool(nn.Module):
    """SigLIP's head: a learned query attends over the tokens (a product of a constant and a feature map)."""

    def __init__(self, dim: int = 8, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.patch = nn.Conv2d(3, dim, 4, stride=4)
        self.query = nn.Parameter(torch.randn(1, 1, dim))
        self.kv = nn.Linear(dim, 2 * dim)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        b, n, c = x.shape
        q = self.query.expand(b, -1, -1).reshape(b, 1, self.heads, c // self.heads).transpose(1, 2)
        k, v = self.kv(x).reshape(b, n, 2, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v).reshape(b, c)


def test_a_learned_querys_attention_is_planned_whole(caplog):
    _planned_whole(AttentionPool().eval(), caplog)


class CropAndVector(nn.Module):
    """NASNet-A Large's crops (negative padding, and a pad and a crop at once) and CaiT's class token taken back
    to a token (a (B, F) vector to (B, 1, F))."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 1)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        x = torch.nn.functional.pad(self.a(x), (-1, -1, -1, -1))
        x = self.b(torch.nn.functional.pad(x, (1, -1, 0, 1)))
        token = x.mean(dim=(2, 3)).unsqueeze(1)  # (B, 1, 4)
        return self.head(torch.layer_norm(token, (4,)) + 1.0).squeeze(1)


def test_crops_and_a_vector_made_a_token_are_planned_whole(caplog):
    _planned_whole(CropAndVector().eval(), caplog, size=10)
