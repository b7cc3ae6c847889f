"""JAX and ONNX Runtime backends: exact conversions on every zoo model (reduced sizes),
a full-size end-to-end run each, and clear errors."""

import numpy as np
import pytest

from harness.config import ConfigError
from harness.job import run
from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.models import MODELS, build_model

from .helpers import SMALL, rel_err

ZOO = [m for m in MODELS if m in SMALL]


@pytest.mark.parametrize("model", ZOO)
def test_jax_conversion_is_exact(model):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from ios_core.interpreters.jax import jax_params, to_jax
    g = build_model(model, **SMALL[model])
    x = seeded_input(g, 2, 0)
    params = jax_params(g, lambda a: jnp.asarray(a, dtype=jnp.float32))
    y = jax.jit(to_jax(g, jax.lax.Precision.HIGHEST))(params, jnp.asarray(x))
    assert rel_err(np.asarray(y), reference_forward(g, x)) < 1e-4


def test_jax_reads_its_allocator_where_it_keeps_counters():
    """On the CPU JAX keeps no allocator counters: no figure, so the meter falls back (on a GPU they are the
    model's memory, where NVML's counts the pool JAX reserves)."""
    jax = pytest.importorskip("jax")
    from harness.backend import AllocatorStats
    from plugins.jax.backend import allocator_stats, call_peak_bytes

    assert allocator_stats(jax.devices("cpu")[0]) is None

    class Gpu:
        def memory_stats(self):
            return {"bytes_in_use": 2048, "peak_bytes_in_use": 4096, "bytes_limit": 60 << 30}
    assert allocator_stats(Gpu()) == AllocatorStats(2048.0, 4096.0)
    assert allocator_stats(Gpu(), 1024.0) == AllocatorStats(2048.0, 4096.0, 1024.0)
    # XLA's buffer plan for one call: at least its arguments (two 64x64 float32 matrices) and output
    compiled = jax.jit(lambda a, b: (a @ b).sum(0)).lower(jax.numpy.ones((64, 64)), jax.numpy.ones((64, 64))).compile()
    assert call_peak_bytes(compiled) >= 2 * 64 * 64 * 4 + 64 * 4
    assert call_peak_bytes(object()) == 0.0


def test_jax_pool_edge_cases():
    """ceil_mode and count_include_pad=False, as ONNX imports produce them."""
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from ios_core.interpreters.jax import JaxOps
    from ios_core.ir import GraphBuilder
    for ceil in (False, True):
        for include in (False, True):
            b = GraphBuilder("p", (3, 10, 10))
            b.block()
            b.pool([[b.x]], "avg", kernel=3, stride=2, padding=1, ceil_mode=ceil, count_include_pad=include)
            g = b.build(0)
            x = seeded_input(g, 1, 0)
            y = JaxOps(g, {}).run(jnp.asarray(x))
            assert rel_err(np.asarray(y), reference_forward(g, x)) < 1e-5


@pytest.mark.parametrize("backend", ["jax", "onnxruntime"])
def test_full_size_end_to_end(bench_cfg, backend):
    pytest.importorskip({"jax": "jax", "onnxruntime": "onnxruntime"}[backend])
    rec = run(bench_cfg(**{"model.name": "inception_v3", "model.params": {}, "backend.name": backend}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4
    assert rec.tags["lib_" + {"jax": "jax", "onnxruntime": "onnxruntime"}[backend]] not in ("missing", "unknown")


@pytest.mark.parametrize("model", ZOO)
def test_onnxruntime_backend_on_the_zoo(bench_cfg, model):
    pytest.importorskip("onnxruntime")
    rec = run(bench_cfg(**{"model.name": model, "model.params": SMALL[model], "backend.name": "onnxruntime",
                           "backend.graph_optimization": "basic"}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4
    assert rec.params["ort_cuda_graph"] == rec.params["ort_prefer_nhwc"] == "off"  # a graph only on CUDA


@pytest.mark.parametrize("option", ["cuda_graph", "prefer_nhwc"])
@pytest.mark.parametrize("value,kept", [("auto", "auto"), ("True", "true"), (False, "false")])
def test_onnxruntime_cuda_graph_and_nhwc_take_auto_true_false(option, value, kept):
    from harness_plugins.onnxruntime.config import OnnxRuntimeConfig

    assert getattr(OnnxRuntimeConfig(**{option: value}), option) == kept
    with pytest.raises(ConfigError, match=f"backend.{option}"):
        OnnxRuntimeConfig(**{option: "sometimes"})


def test_onnxruntime_nhwc_kernels_by_default_in_fp16_on_cuda_only():
    from harness_plugins.onnxruntime.config import OnnxRuntimeConfig

    auto = OnnxRuntimeConfig()
    assert auto.nhwc("cuda", "fp16") and not auto.nhwc("cuda", "fp32") and not auto.nhwc("cpu", "fp32")
    assert OnnxRuntimeConfig(prefer_nhwc="true").nhwc("cuda", "fp32")
    assert not OnnxRuntimeConfig(prefer_nhwc="false").nhwc("cuda", "fp16")


@pytest.mark.parametrize("asked,hint", [("TensorrtExecutionProvider", "install TensorRT 10"),
                                        ("CUDAExecutionProvider", "CUDA 13 and cuDNN 9 libraries")])
def test_an_onnxruntime_session_that_fell_back_to_another_provider_is_refused(monkeypatch, asked, hint):
    """ONNX Runtime runs on the CPU (or CUDA, for TensorRT) where the asked provider's libraries fail to load,
    with only a log line: a run named after the asked one would measure another."""
    ort = pytest.importorskip("onnxruntime")
    from harness.backend import BackendError
    from harness.onnx_session import session

    class FellBack:
        def __init__(self, model, options, providers):
            assert providers[0][0] == asked

        def get_providers(self):
            return ["CPUExecutionProvider"]

    monkeypatch.setattr(ort, "InferenceSession", FellBack)
    model = type("Model", (), {"SerializeToString": lambda self: b""})()
    with pytest.raises(BackendError, match=f"could not start {asked} and fell back to CPUExecutionProvider.*{hint}"):
        session(model, asked, "fp32")


def test_onnxruntime_cuda_options():
    from harness.onnx_session import cuda_options

    assert cuda_options("fp16", True, True) == {"use_tf32": "0", "cudnn_conv_algo_search": "EXHAUSTIVE",
                                                "enable_cuda_graph": "1", "prefer_nhwc": "1"}
    assert cuda_options("tf32", False, False) == {"use_tf32": "1", "cudnn_conv_algo_search": "EXHAUSTIVE",
                                                  "enable_cuda_graph": "0", "prefer_nhwc": "0"}


@pytest.mark.parametrize("over,message", [
    ({"backend.name": "onnxruntime", "precision": "fp16"}, "precision=fp16 with ONNX Runtime needs device=cuda"),
    ({"backend.name": "onnxruntime", "backend.provider": "cuda"}, "needs device=cuda"),
    ({"backend.name": "onnxruntime", "backend.cuda_graph": "true"},
     "backend.cuda_graph=true needs the CUDA provider (device=cuda, backend.provider=cuda); this run uses "
     "CPUExecutionProvider"),
    ({"backend.name": "onnxruntime", "backend.prefer_nhwc": "true"},
     "backend.prefer_nhwc=true needs the CUDA provider (device=cuda, backend.provider=cuda); this run uses "
     "CPUExecutionProvider"),
])
def test_framework_backend_errors(bench_cfg, over, message):
    pytest.importorskip("onnxruntime")
    rec = run(bench_cfg(**over), quiet=True)
    assert rec.status == "FAILED" and message in rec.error


@pytest.mark.parametrize("model", ZOO)
@pytest.mark.parametrize("jit", [False, True])
def test_tensorflow_conversion_is_exact(model, jit):
    tf = pytest.importorskip("tensorflow")

    from ios_core.interpreters.tensorflow import tf_params, to_tensorflow
    g = build_model(model, **SMALL[model])
    x = seeded_input(g, 2, 0)
    fn = to_tensorflow(g, tf_params(g, lambda a: tf.constant(a, tf.float32)), jit_compile=jit)
    assert rel_err(fn(tf.constant(x)).numpy(), reference_forward(g, x)) < 1e-4


@pytest.mark.parametrize("backend", ["tensorflow", "xla"])
def test_tensorflow_backends_end_to_end(bench_cfg, backend):
    pytest.importorskip("tensorflow")
    rec = run(bench_cfg(**{"model.name": "inception_v3", "model.params": {}, "backend.name": backend}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4 and "CPU" in rec.tags["backend_device"]


def test_tensorflow_without_gpu_says_what_to_install(bench_cfg, monkeypatch):
    pytest.importorskip("tensorflow")
    import harness.spec as spec
    monkeypatch.setattr(spec, "resolve_device", lambda d: "cuda")  # pretend a GPU so the backend is asked
    rec = run(bench_cfg(**{"backend.name": "tensorflow"}), quiet=True)
    assert rec.status == "FAILED" and "tensorflow[and-cuda]" in rec.error


@pytest.fixture(scope="module")
def googlenet_onnx(tmp_path_factory):
    """torchvision's GoogLeNet as an ONNX file: batch norms to fold, ceil-mode pools, 1000 classes."""
    import torch

    from .helpers import import_torchvision_models
    torch.manual_seed(0)
    net = import_torchvision_models().googlenet(aux_logits=False, init_weights=True).eval()
    path = tmp_path_factory.mktemp("onnx") / "googlenet.onnx"
    torch.onnx.export(net, (torch.zeros(1, 3, 64, 64),), str(path), dynamo=True, verbose=False)
    return str(path)


@pytest.mark.parametrize("backend,module", [("jax", "jax"), ("onnxruntime", "onnxruntime"),
                                            ("tensorflow", "tensorflow"), ("xla", "tensorflow"), ("tvm", "tvm")])
def test_onnx_imported_model_on_framework_backends(bench_cfg, googlenet_onnx, backend, module):
    pytest.importorskip(module)
    rec = run(bench_cfg(**{"model.name": "onnx", "model.params": {"path": googlenet_onnx}, "backend.name": backend}),
              quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4


def test_onnxruntime_cpu_build_on_cuda_says_how_to_get_the_gpu_build(bench_cfg, monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this is onnxruntime-gpu")
    import harness.spec as spec
    monkeypatch.setattr(spec, "resolve_device", lambda d: "cuda")  # pretend a GPU so the backend is asked
    rec = run(bench_cfg(**{"backend.name": "onnxruntime"}), quiet=True)
    assert rec.status == "FAILED" and "\n" not in rec.error
    assert "has no CUDAExecutionProvider" in rec.error
    assert "pip uninstall -y onnxruntime && pip install -e '.[onnxruntime-gpu]'" in rec.error


def test_onnxruntime_output_comes_back_from_an_ortvalue():
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    from harness.onnx_session import output_to_numpy
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(output_to_numpy(ort.OrtValue.ortvalue_from_numpy(x)), x)  # the I/O-bound output
    assert np.array_equal(output_to_numpy(x), x)
