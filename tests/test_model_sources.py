"""Models as users bring them (issue 37): timm and torchvision by name, an ONNX file, a user's nn.Module factory;
each backend takes its own form of the model (the module, the ONNX model, the IR) and every output is compared
with the float64 reference of the source."""

import importlib.util

import numpy as np
import pytest

from harness.config import ConfigError, ModelConfig
from harness.job import run
from harness.models import FormError, Model, resolve, zoos

from .helpers import import_torchvision_models, rel_err

if importlib.util.find_spec("timm") is None:
    pytest.skip("timm is not installed (pip install -e '.[timm]')", allow_module_level=True)
zoos.import_zoo("timm")  # with torchvision's operators skipped beside the CPU torch, as the harness does

#: PyTorch's TIMM suite (benchmarks/dynamo/timm_models_list.txt) at reduced image sizes for the CPU
SUITE = {"adv_inception_v3": 96, "beit_base_patch16_224": 64, "convnextv2_nano": 64,
         "deit_base_distilled_patch16_224": 64, "deit_tiny_patch16_224": 64, "dm_nfnet_f0": 64, "ghostnet_100": 64,
         "inception_v3": 96, "mobilenetv2_100": 64, "mobilenetv3_large_100": 64, "mobilevit_s": 64, "nfnet_l0": 64,
         "repvgg_a2": 64, "swin_base_patch4_window7_224": 64, "tf_efficientnet_b0": 64, "visformer_small": 64,
         "vit_base_patch14_dinov2": 56, "vit_base_patch16_siglip_256": 64}


def timm_cfg(bench_cfg, arch, size, backend, **over):
    return bench_cfg(**{"model": {"name": "timm", "arch": arch, "image_size": size}, "backend.name": backend,
                        "runner.check_samples": 1, **over})


@pytest.mark.parametrize("arch", sorted(SUITE))
def test_the_timm_suite_runs_on_pytorch_onnxruntime_and_ios(bench_cfg, arch):
    """Each model by name: its module on PyTorch eager, its torch.onnx export on ONNX Runtime, the IR imported from
    that export scheduled by IOS-Both (analytic cost model and no timing of the candidates: the CPU's timings
    would only slow the suite) on IOS's runtime, all within the fp32 tolerance of the module in float64, and the
    check sees the input. What is checked is the output, so each is timed for one iteration."""
    pytest.importorskip("onnxruntime")
    for backend, form, over in (("pytorch", "module", {}), ("onnxruntime", "onnx", {}),
                                ("ios", "graph", {"backend.cost_model": "analytic", "backend.select": False})):
        rec = run(timm_cfg(bench_cfg, arch, SUITE[arch], backend, **{"runner.warmup_iters": 1, "runner.min_iters": 1,
                                                                     **over}), quiet=True)
        assert rec.status == "FINISHED", f"{backend}: {rec.error}"
        assert rec.metrics["max_rel_error"] < 1e-4
        assert rec.metrics["check_input_sensitivity"] > 1e-4
        assert rec.params["model_form"] == form and rec.params["reference"].startswith("the module in float64")
        assert rec.run_name.startswith(f"timm:{arch}@{SUITE[arch]} ")


@pytest.mark.parametrize("arch", ["deit_tiny_patch16_224", "mobilenetv3_large_100"])
def test_tvm_takes_the_onnx_export_of_a_timm_model(bench_cfg, arch):
    pytest.importorskip("tvm")
    rec = run(timm_cfg(bench_cfg, arch, 32, "tvm"), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4 and rec.params["model_form"] == "onnx"


def test_a_model_the_ir_cannot_take_fails_its_job_in_one_line_naming_the_node(bench_cfg):
    rec = run(bench_cfg(**{"model": {"name": "module", "target": "tests.helpers:cumsum_net", "image_size": 8},
                           "backend.name": "ios"}), quiet=True)
    assert rec.status == "FAILED" and "\n" not in rec.error
    assert rec.error.startswith("BackendError: backend ios cannot take module:cumsum_net@8: as ios_core's IR")
    assert "ONNX node" in rec.error and "operator 'CumSum' is not supported" in rec.error


def test_torchvision_by_name(bench_cfg):
    rec = run(bench_cfg(**{"model": {"name": "torchvision", "arch": "resnet18", "image_size": 64}}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4 and rec.run_name.startswith("torchvision:resnet18@64 PyTorch")


@pytest.fixture(scope="module", params=["dynamo", "legacy"])
def mobilenet_onnx(request, tmp_path_factory):
    """torchvision's MobileNetV3 (HardSwish, squeeze-excitation) exported by both exporters."""
    import torch

    torch.manual_seed(0)
    net = import_torchvision_models().mobilenet_v3_small().eval()
    path = tmp_path_factory.mktemp("onnx") / f"mobilenet_{request.param}.onnx"
    torch.onnx.export(net, (torch.randn(2, 3, 64, 64),), str(path), dynamo=request.param == "dynamo",
                      **({"verbose": False} if request.param == "dynamo" else {"opset_version": 17}))
    return str(path)


def test_any_torchvision_export_runs_on_onnxruntime_against_onnxs_float64_evaluation(bench_cfg, mobilenet_onnx):
    pytest.importorskip("onnxruntime")
    rec = run(bench_cfg(**{"model": {"name": "onnx", "path": mobilenet_onnx}, "backend.name": "onnxruntime",
                           "batch": 2}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4
    assert rec.params["reference"] == "ios_core's reference executor (float64)"  # the IR imports it
    rec = run(bench_cfg(**{"model": {"name": "onnx", "path": mobilenet_onnx}, "batch": 2}), quiet=True)
    assert rec.status == "FINISHED", rec.error  # PyTorch runs the IR's module
    assert rec.metrics["max_rel_error"] < 1e-4


@pytest.mark.parametrize("arch,kwargs", [("efficientnet_b0", {}), ("shufflenet_v2_x0_5", {}),
                                         ("regnet_x_400mf", {}), ("vit_b_16", {"image_size": 32})])
def test_torchvision_classifiers_exported_by_torch_onnx_run_on_onnxruntime(bench_cfg, tmp_path, arch, kwargs):
    pytest.importorskip("onnxruntime")
    import torch

    torch.manual_seed(0)
    net = getattr(import_torchvision_models(), arch)(**kwargs).eval()
    path = tmp_path / f"{arch}.onnx"
    torch.onnx.export(net, (torch.randn(1, 3, 32, 32),), str(path), dynamo=True, verbose=False)
    rec = run(bench_cfg(**{"model": {"name": "onnx", "path": str(path)}, "backend.name": "onnxruntime",
                           "runner.check_samples": 1}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4 and rec.run_name.startswith(f"onnx:{arch} ONNXRuntime")


def test_torchvision_vit_by_name_imports_into_the_ir_through_batch_first_attention():
    """torchvision's ViT (nn.MultiheadAttention moves the batch off axis 0 inside) is exported with its attention
    batch-first: the IR imports it and computes the module's function; the user's module is not touched."""
    import torch

    from harness.models.attention import batch_first_attention
    from ios_core.interpreters.reference import reference_forward

    model = Model(resolve(ModelConfig(name="torchvision", arch="vit_b_16", image_size=32)), 2)
    net = model._form("module", model._source_module)  # the module the reference computes with
    torch.manual_seed(0)
    torch.nn.init.normal_(net.heads.head.weight)  # torchvision starts the head at zero: an output of zeros
    graph = model.graph()
    assert model.input_shape == (3, 32, 32) and graph.num_units() > 100
    assert isinstance(net.encoder.layers[0].self_attention, torch.nn.MultiheadAttention)  # swapped in a copy only
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32))
    want = model.reference(x)
    assert rel_err(reference_forward(graph, x).reshape(want.shape), want) < 1e-6
    swapped = batch_first_attention(net).encoder.layers[0].self_attention
    t = torch.randn(2, 5, 768)
    with torch.no_grad():  # a call asking for the weights goes to the original module
        assert swapped(t, t, t)[1] is not None and swapped(t, t, t, need_weights=False)[1] is None


def test_a_users_module_factory_runs_as_given(bench_cfg):
    target = "tests.helpers:tiny_net"
    for backend in ("pytorch", "onnxruntime"):
        rec = run(bench_cfg(**{"model": {"name": "module", "target": target, "image_size": 16},
                               "backend.name": backend, "batch": 3}), quiet=True)
        assert rec.status == "FINISHED", rec.error
        assert rec.metrics["max_rel_error"] < 1e-4 and rec.run_name.startswith("module:tiny_net@16 ")
    model = Model(resolve(ModelConfig(name="module", target=target, image_size=16)), 1)
    assert float(model.module().inner.bn.running_mean[0]) == 0.25  # a factory's statistics are not recalibrated
    assert model.input_shape == (3, 16, 16)


@pytest.mark.parametrize("model,message", [
    ({"name": "timm", "arch": "deit_tiny_patch16_22"}, r"model.arch=deit_tiny_patch16_22: timm .* has no such model; "
                                                       r"closest: deit_tiny_patch16_224"),
    ({"name": "timm"}, r"model=timm needs the architecture: add model.arch=NAME"),
    ({"name": "timm", "arch": "resnet18", "params": {"depth": 2}}, r"model=timm takes model.arch and model.image_size"),
    ({"name": "timm", "arch": "resnet18", "path": "/x.onnx"}, r"model=timm takes model.arch, not model.path"),
    ({"name": "torchvision", "arch": "resnet5"}, r"torchvision .* has no such model; closest: resnet50"),
    ({"name": "vgg"}, r"unknown model 'vgg'.*model=timm model.arch=NAME"),
    ({"name": "module", "target": "tests.helpers"}, r"give package.module:factory"),
    ({"name": "module", "target": "nope_pkg.nets:make"}, r"no module 'nope_pkg.nets' on the Python path"),
    ({"name": "module", "target": "tests.helpers:nothing"}, r"tests.helpers has no function 'nothing'"),
    ({"name": "inception_v3", "arch": "x"}, r"model.arch is for model=timm/torchvision"),
    ({"name": "onnx", "path": "/nope/x.onnx"}, r"^model.path=/nope/x.onnx: no such file"),
    ({"name": "onnx", "path": "GARBAGE"}, r"^model.path=.*garbage.onnx: not a valid ONNX model"),
    ({"name": "module", "target": "tests.helpers:not_a_module"}, r"^model.target=tests.helpers:not_a_module "
                                                                 r"returned int, not a torch.nn.Module$"),
    ({"name": "torchvision", "arch": "squeezenet1_0", "image_size": 7},
     r"^model.image_size=7 is too small for squeezenet1_0: the smallest input it runs at is 21 px$"),
])
def test_bad_models_are_one_line_before_any_work(bench_cfg, tmp_path, model, message):
    """Issue 58: whatever the parent can know is refused there, before a measuring process or a record."""
    if model.get("path") == "GARBAGE":
        model = {**model, "path": str(tmp_path / "garbage.onnx")}
        (tmp_path / "garbage.onnx").write_bytes(b"this is no protobuf")
    with pytest.raises(ConfigError, match=message):
        run(bench_cfg(model=model), quiet=True)
    assert not (tmp_path / "results" / "records").exists()


def test_an_onnx_file_with_an_operator_the_ir_cannot_take_is_refused_before_any_work(bench_cfg, tmp_path):
    import torch

    from tests.helpers import cumsum_net

    path = tmp_path / "cum.onnx"
    torch.onnx.export(cumsum_net(), (torch.zeros(1, 3, 8, 8),), str(path), dynamo=False,
                      dynamic_axes={"input": {0: "n"}}, input_names=["input"])
    for backend in ("ios", "pytorch"):  # the IR itself, and the IR's module
        with pytest.raises(ConfigError, match=rf"^backend {backend} cannot take onnx:cum: ios_core's IR, which it "
                                              r"needs, cannot import it: ONNX node '[^']+' \(CumSum\): operator "
                                              r"'CumSum' is not supported; supported: "):
            run(bench_cfg(**{"model": {"name": "onnx", "path": str(path)}, "backend.name": backend}), quiet=True)
    assert not (tmp_path / "results" / "records").exists()
    pytest.importorskip("onnxruntime")  # a backend that takes the file as it is still runs it
    rec = run(bench_cfg(**{"model": {"name": "onnx", "path": str(path)}, "backend.name": "onnxruntime"}),
              quiet=True)
    assert rec.status == "FINISHED", rec.error


def test_a_fixed_batch_file_is_refused_in_one_line_before_any_work(bench_cfg, tmp_path):
    import torch

    path = tmp_path / "fixed.onnx"
    torch.onnx.export(torch.nn.Conv2d(3, 4, 3), (torch.zeros(1, 3, 8, 8),), str(path), dynamo=False)
    with pytest.raises(ConfigError, match=r"has batch size 1 fixed in the file; run it with batch=1"):
        run(bench_cfg(**{"model": {"name": "onnx", "path": str(path)}, "backend.name": "onnxruntime", "batch": 4}),
            quiet=True)
    assert not (tmp_path / "results" / "records").exists()


def test_a_missing_zoo_names_its_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "timm" else real(name, *a))
    zoos.architectures.cache_clear()
    try:
        with pytest.raises(zoos.MissingZoo, match=r"^model=timm needs timm, which is not installed: "
                                                   r"pip install -e '.\[timm\]'$"):
            resolve(ModelConfig(name="timm", arch="resnet18"))
    finally:
        zoos.architectures.cache_clear()


def test_forms_are_made_once_and_a_failure_is_said_again_not_retried():
    model = Model(resolve(ModelConfig(name="module", target="tests.helpers:cumsum_net", image_size=8)), 2)
    assert model.take(["graph", "onnx"]) == "onnx"  # the IR refuses, the ONNX export is the next preference
    first = model.onnx()
    assert model.onnx() is first and set(model.seconds) == {"module", "onnx"}
    with pytest.raises(FormError, match="ios_core's IR cannot import"):
        model.graph()
    assert "graph" not in model.seconds  # not retried
    a, b = model.module(), model.module()
    assert a is not b  # each backend moves and casts its own copy


def test_the_float64_evaluation_of_an_onnx_model_matches_the_module_in_float64():
    from harness.models import onnx_io
    model = Model(resolve(ModelConfig(name="timm", arch="mobilenetv3_large_100", image_size=32)), 2)
    x = model.input(0)
    got = onnx_io.float64_evaluator(model.onnx())(x)
    want = model.reference(x)
    # float64 arithmetic on the file's float32 numbers (the exporter folds BatchNorm into float32 weights)
    assert got.dtype == np.float64 and float(np.abs(got - want).max() / np.abs(want).max()) < 3e-5


def test_onnxruntimes_float16_conversion_keeps_float32_io():
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto

    from harness_plugins.onnxruntime.backend import to_float16
    model = Model(resolve(ModelConfig(name="timm", arch="deit_tiny_patch16_224", image_size=32)), 1)
    half = to_float16(model.onnx())
    assert half.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert half.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    big = [t for t in half.graph.initializer if len(t.dims) == 2]
    assert big and all(t.data_type == TensorProto.FLOAT16 for t in big)


@pytest.mark.gpu
def test_a_cuda_graph_keeps_the_modules_weights_alive(bench_cfg):
    """The captured graph reads the module's weights: a module nothing else held was freed after capture and the
    replays read freed memory (wrong outputs, illegal addresses: H200, 2026-11-26)."""
    for layout in ("auto", "true", "false"):
        rec = run(timm_cfg(bench_cfg, "mobilenetv2_100", 224, "pytorch", **{
            "device.type": "cuda", "backend.mode": "cudagraph", "backend.channels_last": layout,
            "precision": "fp16"}), quiet=True)
        assert rec.status == "FINISHED", rec.error
        assert rec.metrics["max_rel_error"] < 3e-2


def test_list_models_prints_a_zoos_names_by_pattern():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "harness", "--list-models", "timm", "deit_tiny*"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["deit_tiny_distilled_patch16_224", "deit_tiny_patch16_224"]


def test_a_run_is_resolved_once_into_a_typed_spec_the_child_receives(bench_cfg):
    import pickle

    from harness.spec import resolve_run
    from harness_plugins.pytorch.backend import PyTorchBackend
    spec = resolve_run(bench_cfg(model={"name": "timm", "arch": "resnet18", "image_size": 32},
                                 **{"backend.name": "pytorch", "device.type": "auto"}))
    assert spec.backend is PyTorchBackend and spec.device == "cpu" and spec.model.label == "timm:resnet18@32"
    again = pickle.loads(pickle.dumps(spec))  # what the measuring child receives
    assert again.backend is PyTorchBackend and again.cfg.backend.mode.value == "eager"
    assert again.config["model"] == {"name": "timm", "arch": "resnet18", "path": "", "target": "", "image_size": 32,
                                     "params": {}}  # the record's plain config, derived from the typed one
