"""The TensorRT backend as far as a CPU reaches (no machine here has TensorRT): the ONNX it feeds
TensorRT against the float64 reference for every zoo model, the precision/config -> builder
mapping, that mapping applied to a recording fake of TensorRT's builder, the engine cache, and
the one-line refusals without TensorRT or without a GPU."""

import enum
import sys
import types

import numpy as np
import onnx
import pytest

import harness_plugins.tensorrt as trt_plugin
from harness.backend import BackendError, MissingDependency
from harness.config import ConfigError
from harness.job import run
from harness.measure.protocol import TOLERANCE
from harness.models import Model
from harness_plugins.tensorrt.backend import TensorRTBackend, load_tensorrt
from harness_plugins.tensorrt.builder import build_engine, cached_or_built, engine_path, onnx_for_tensorrt
from harness_plugins.tensorrt.config import TensorRTConfig
from harness_plugins.tensorrt.plan import apply, describe, network_flags
from harness_plugins.tensorrt.runtime import AfterTiming, Execution, layer_table
from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.models import MODELS, build_model

from .helpers import SMALL, rel_err

ZOO = [m for m in MODELS if m in SMALL]
TRT10, TRT11, TRT86 = "10.8.0.43", "11.1.0.106", "8.6.1"
SHAPE = (3, 32, 32)


def plan_for(precision="fp32", version=TRT10, batch=8, **cfg):
    return describe(precision, TensorRTConfig(**cfg), batch, SHAPE, version)


# -- the ONNX TensorRT is given ------------------------------------------------------------------

def ort_forward(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0]


@pytest.mark.parametrize("model", ZOO)
def test_the_onnx_fed_to_tensorrt_matches_the_reference(model):
    g = build_model(model, **SMALL[model])
    x = seeded_input(g, 2, 0)
    ref = reference_forward(g, x)
    plan = describe("fp32", TensorRTConfig(), 2, g.input_shape, TRT10)
    assert rel_err(ort_forward(onnx_for_tensorrt(Model.from_graph(g), plan), x), ref) < TOLERANCE["fp32"]
    # TensorRT 11 has no FP16 flag: fp16 is a float16 graph between float32 input and output
    half = onnx_for_tensorrt(Model.from_graph(g), describe("fp16", TensorRTConfig(), 2, g.input_shape, TRT11))
    assert 0 < rel_err(ort_forward(half, x), ref) < TOLERANCE["fp16"]


def test_the_float16_export_keeps_float32_io():
    g = build_model("sample", **SMALL["sample"])
    flagged = onnx_for_tensorrt(Model.from_graph(g), describe("fp16", TensorRTConfig(), 1, g.input_shape, TRT10))
    typed = onnx_for_tensorrt(Model.from_graph(g), describe("fp16", TensorRTConfig(), 1, g.input_shape, TRT11))
    f32, f16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    assert {t.data_type for t in flagged.graph.initializer} >= {f32}  # TensorRT 10: the flag, float32 weights
    assert f32 not in {t.data_type for t in typed.graph.initializer}
    assert f16 in {t.data_type for t in typed.graph.initializer}
    assert [v.type.tensor_type.elem_type for v in (*typed.graph.input, *typed.graph.output)] == [f32, f32]
    assert [n.op_type for n in typed.graph.node][::len(typed.graph.node) - 1] == ["Cast", "Cast"]


# -- precision and config -> builder plan ---------------------------------------------------------

@pytest.mark.parametrize("precision,version,set_flags,clear_flags,dtype", [
    ("fp32", TRT10, (), ("TF32",), "float32"),  # TF32 is on by default: strict fp32 clears it
    ("tf32", TRT10, ("TF32",), (), "float32"),
    ("fp16", TRT10, ("FP16", "TF32"), (), "float32"),
    ("bf16", TRT10, ("BF16", "TF32"), (), "float32"),
    ("fp16", TRT86, ("FP16", "TF32"), (), "float32"),
    ("fp32", TRT11, (), ("TF32",), "float32"),
    ("fp16", TRT11, ("TF32",), (), "float16"),  # strongly typed: the graph carries float16
])
def test_precision_flags(precision, version, set_flags, clear_flags, dtype):
    plan = plan_for(precision, version)
    assert (plan.set_flags, plan.clear_flags, plan.onnx_dtype) == (set_flags, clear_flags, dtype)
    assert plan.network_flags == (("EXPLICIT_BATCH",) if version == TRT86 else ())


@pytest.mark.parametrize("precision,version,message", [
    ("bf16", TRT11, r"precision=bf16 needs TensorRT's BF16 builder flag, which TensorRT 11.1.0.106 does not have"),
    ("bf16", TRT86, r"TensorRT 8.6.1 does not have"),
    ("int8", TRT10, r"no precision 'int8'"),
    ("fp32", "8.5.3", r"needs TensorRT 8.6 or newer .*this is 8.5.3"),
])
def test_unsupported_precisions_and_versions_are_refused(precision, version, message):
    with pytest.raises(BackendError, match=message):
        plan_for(precision, version)


def test_builder_settings_and_profiles():
    plan = plan_for(batch=16)
    assert (plan.workspace_bytes, plan.optimization_level, plan.max_aux_streams) == (4096 << 20, 3, None)
    assert plan.shape_min == plan.shape_opt == plan.shape_max == (16, *SHAPE)  # exact shapes
    plan = plan_for(batch=16, aux_streams=0, optimization_level=5, workspace_mb=512, batch_range="1-128")
    assert (plan.workspace_bytes, plan.optimization_level, plan.max_aux_streams) == (512 << 20, 5, 0)
    assert (plan.shape_min, plan.shape_opt, plan.shape_max) == ((1, *SHAPE), (16, *SHAPE), (128, *SHAPE))
    assert plan_for(aux_streams=4).max_aux_streams == 4
    with pytest.raises(BackendError, match=r"batch=256 is outside backend.batch_range=1-128"):
        plan_for(batch=256, batch_range="1-128")


def test_the_plan_key_changes_with_what_changes_the_engine():
    base = plan_for()
    assert base.key() == plan_for(cuda_graph=True, layer_profile=True, cache=False, store="/x").key()
    others = [plan_for("tf32"), plan_for(batch=4), plan_for(aux_streams=0), plan_for(optimization_level=2),
              plan_for(workspace_mb=1024), plan_for(batch_range="1-64"), plan_for(version=TRT86)]
    keys = {base.key(), *(p.key() for p in others)}
    assert len(keys) == len(others) + 1
    assert base.key("weights-a") != base.key("weights-b")


@pytest.mark.parametrize("key,value,message", [
    ("aux_streams", -2, r"^backend.aux_streams=-2 is invalid: use -1 \(TensorRT decides\)"),
    ("optimization_level", 6, r"^backend.optimization_level=6 is invalid: .*0..5"),
    ("workspace_mb", 0, r"^backend.workspace_mb=0 is invalid: "),
    ("batch_range", "abc", r"^backend.batch_range='abc' is invalid: use lo-hi"),
    ("batch_range", "0-8", r"^backend.batch_range='0-8' is invalid"),
    ("batch_range", "16-8", r"^backend.batch_range='16-8' is invalid"),
])
def test_bad_config_values_are_refused(key, value, message):
    with pytest.raises(ConfigError, match=message):
        TensorRTConfig(**{key: value})
    with pytest.raises(ConfigError, match=message):
        TensorRTBackend({"name": "tensorrt", key: value})


# -- the plan applied to a recording fake of TensorRT's builder -----------------------------------

def fake_trt(version: str, log: list, parse_ok: bool = True):
    """The parts of the ``tensorrt`` module the builder touches, recording every call."""
    major = int(version.split(".")[0])
    flags = ["TF32", "DEBUG"] + (["FP16"] if major <= 10 else []) + (["BF16"] if 9 <= major <= 10 else [])
    creation = (["EXPLICIT_BATCH"] if major <= 10 else []) + ["STRONGLY_TYPED"]

    class Recorded:
        def __setattr__(self, key, value):
            log.append(("set", key, value))

    class Config(Recorded):
        def set_flag(self, flag):
            log.append(("set_flag", flag.name))

        def clear_flag(self, flag):
            log.append(("clear_flag", flag.name))

        def set_memory_pool_limit(self, pool, size):
            log.append(("set_memory_pool_limit", pool.name, size))

        def add_optimization_profile(self, profile):
            log.append(("add_optimization_profile",))

    class Profile:
        def set_shape(self, name, lo, opt, hi):
            log.append(("set_shape", name, lo, opt, hi))

    class Network:
        def get_input(self, i):
            return types.SimpleNamespace(name="input")

    class Parser:
        num_errors = 0 if parse_ok else 2

        def __init__(self, network, logger):
            pass

        def parse(self, model):
            log.append(("parse", len(model)))
            return parse_ok

        def get_error(self, i):
            return f"error {i}"

    class Builder:
        def __init__(self, logger):
            pass

        def create_network(self, bits):
            log.append(("create_network", bits))
            return Network()

        def create_builder_config(self):
            return Config()

        def create_optimization_profile(self):
            return Profile()

        def build_serialized_network(self, network, config):
            log.append(("build",))
            return bytearray(b"engine")

    return types.SimpleNamespace(
        __version__=version, Builder=Builder, OnnxParser=Parser,
        BuilderFlag=enum.IntEnum("BuilderFlag", flags, start=0),
        NetworkDefinitionCreationFlag=enum.IntEnum("NetworkDefinitionCreationFlag", creation, start=0),
        MemoryPoolType=enum.IntEnum("MemoryPoolType", ["WORKSPACE", "TACTIC_DRAM"], start=0))


@pytest.mark.parametrize("precision,version,flag_calls", [
    ("fp32", TRT10, [("clear_flag", "TF32")]),
    ("fp16", TRT10, [("set_flag", "FP16"), ("set_flag", "TF32")]),
    ("bf16", TRT10, [("set_flag", "BF16"), ("set_flag", "TF32")]),
    ("fp16", TRT11, [("set_flag", "TF32")]),
])
def test_apply_sets_the_plan_on_a_builder_config(precision, version, flag_calls):
    log: list = []
    trt = fake_trt(version, log)
    builder = trt.Builder(None)
    plan = plan_for(precision, version, batch=8, aux_streams=2, optimization_level=4, workspace_mb=256,
                    batch_range="1-32")
    apply(trt, builder, builder.create_builder_config(), plan, "input")
    assert log == [*flag_calls, ("set_memory_pool_limit", "WORKSPACE", 256 << 20),
                   ("set", "builder_optimization_level", 4), ("set", "max_aux_streams", 2),
                   ("set_shape", "input", (1, *SHAPE), (8, *SHAPE), (32, *SHAPE)), ("add_optimization_profile",)]


def test_apply_leaves_aux_streams_to_tensorrt_by_default():
    log: list = []
    trt = fake_trt(TRT10, log)
    apply(trt, trt.Builder(None), trt.Builder(None).create_builder_config(), plan_for(), "input")
    assert not [c for c in log if c[:2] == ("set", "max_aux_streams")]


def test_a_flag_this_tensorrt_lacks_is_named():
    log: list = []
    trt = fake_trt(TRT11, log)  # a plan made for TensorRT 10 asks for FP16, which 11 removed
    with pytest.raises(BackendError, match=r"this TensorRT \(11.1.0.106\) has no BuilderFlag.FP16"):
        apply(trt, trt.Builder(None), trt.Builder(None).create_builder_config(), plan_for("fp16", TRT10), "input")


@pytest.mark.parametrize("version,bits", [(TRT86, 1), (TRT10, 0), (TRT11, 0)])
def test_build_engine_through_the_fake(version, bits):
    log: list = []
    trt = fake_trt(version, log)
    plan = plan_for("fp32", version)
    assert network_flags(trt, plan) == bits
    assert build_engine(trt, b"onnx", plan, None) == b"engine"
    assert log[:2] == [("create_network", bits), ("parse", 4)] and log[-1] == ("build",)
    assert ("clear_flag", "TF32") in log


def test_parser_errors_are_reported():
    trt = fake_trt(TRT10, [], parse_ok=False)
    with pytest.raises(BackendError, match=r"ONNX parser refused the export: error 0; error 1"):
        build_engine(trt, b"onnx", plan_for(), None)


# -- the engine cache -------------------------------------------------------------------------------

def test_engine_path_names_what_the_engine_was_built_for(tmp_path):
    g = build_model("sample", **SMALL["sample"])
    model = onnx_for_tensorrt(Model.from_graph(g), plan_for()).SerializeToString()
    gpu = "NVIDIA H100 80GB HBM3"
    source = Model.from_graph(g)
    path = engine_path(tmp_path, source, gpu, TRT10, describe("fp16", TensorRTConfig(), 8, g.input_shape, TRT10), model)
    assert path.parent == tmp_path / "tensorrt" / f"sample-{g.hash()}"
    assert path.name.startswith("nvidia-h100-80gb-hbm3-trt10.8.0.43-bs8-fp16-") and path.suffix == ".engine"
    ranged = describe("fp32", TensorRTConfig(batch_range="1-128"), 8, g.input_shape, TRT10)
    assert "-bs1-128-fp32-" in engine_path(tmp_path, source, gpu, TRT10, ranged, model).name
    other = Model.from_graph(build_model("sample", **SMALL["sample"], seed=1))
    other_weights = onnx_for_tensorrt(other, plan_for()).SerializeToString()
    assert engine_path(tmp_path, source, gpu, TRT10, ranged, other_weights) != engine_path(tmp_path, source, gpu, TRT10,
                                                                                      ranged, model)


def test_an_engine_is_built_once_then_reused(tmp_path):
    builds = []

    def build():
        builds.append(1)
        return b"engine"
    path = tmp_path / "a" / "e.engine"
    assert cached_or_built(path, True, build) == (b"engine", False) and path.read_bytes() == b"engine"
    assert cached_or_built(path, True, build) == (b"engine", True) and len(builds) == 1
    assert cached_or_built(tmp_path / "b.engine", False, build) == (b"engine", False)
    assert not (tmp_path / "b.engine").exists() and len(builds) == 2


def test_a_stale_cached_engine_is_rebuilt(tmp_path):
    """An engine another TensorRT wrote does not deserialize: built again and replaced."""
    path = tmp_path / "e.engine"
    path.write_bytes(b"stale")
    runtime = types.SimpleNamespace(deserialize_cuda_engine=lambda blob: None if blob == b"stale" else "ENGINE")
    trt = types.SimpleNamespace(Runtime=lambda logger: runtime)
    metrics: dict = {}
    backend = TensorRTBackend({"name": "tensorrt"})
    assert backend._engine(trt, None, path, lambda: b"fresh", metrics) == ("ENGINE", False)
    assert path.read_bytes() == b"fresh" and metrics["trt_build_s"] >= 0 and "trt_deserialize_s" in metrics
    assert backend._engine(trt, None, path, lambda: b"never", metrics) == ("ENGINE", True)
    assert metrics["trt_build_s"] == 0.0


# -- running an engine (a fake engine; torch tensors on the CPU stand in for CUDA buffers) ----------

def fake_engine(log: list, outputs=("output",), dtype="FLOAT", accept_shape=True, run_ok=True):
    class Context:
        profiler = None

        def set_input_shape(self, name, shape):
            log.append(("set_input_shape", name, tuple(shape)))
            return accept_shape

        def get_tensor_shape(self, name):
            return (2, 4, 5, 5)

        def set_tensor_address(self, name, ptr):
            log.append(("set_tensor_address", name, ptr))

        def execute_async_v3(self, stream_handle):
            log.append(("execute_async_v3", stream_handle, self.profiler is not None))
            if self.profiler is not None:
                self.profiler.report_layer_time("conv1", 0.25)
            return run_ok

    class Engine:
        names = ("input", *outputs)
        num_io_tensors = len(names)

        def get_tensor_name(self, i):
            return self.names[i]

        def get_tensor_mode(self, name):
            return trt.TensorIOMode.INPUT if name == "input" else trt.TensorIOMode.OUTPUT

        def get_tensor_dtype(self, name):
            return types.SimpleNamespace(name=dtype)

        def create_execution_context(self):
            log.append(("create_execution_context",))
            return Context()

    class IProfiler:
        def __init__(self):
            pass

    trt = types.SimpleNamespace(TensorIOMode=enum.Enum("TensorIOMode", ["INPUT", "OUTPUT"]), IProfiler=IProfiler)
    return trt, Engine()


STREAM = types.SimpleNamespace(cuda_stream=1234, synchronize=lambda: None)


def test_execution_binds_static_buffers_and_enqueues_on_its_stream():
    import torch

    log: list = []
    trt, engine = fake_engine(log)
    exe = Execution(trt, engine, (2, 3, 5, 5), STREAM, device="cpu")
    assert exe.x.shape == (2, 3, 5, 5) and exe.y.shape == (2, 4, 5, 5) and exe.x.dtype == torch.float32
    assert log == [("create_execution_context",), ("set_input_shape", "input", (2, 3, 5, 5)),
                   ("set_tensor_address", "input", exe.x.data_ptr()),
                   ("set_tensor_address", "output", exe.y.data_ptr())]
    x = np.arange(150, dtype=np.float32).reshape(2, 3, 5, 5)
    handle = exe.load(x)
    assert handle is exe.x and np.array_equal(exe.x.numpy(), x)
    log.clear()
    assert exe.infer_fn()(handle) is exe.y
    assert log == [("execute_async_v3", 1234, False)]  # one enqueue, nothing rebound, no profiler
    assert exe.fetch(exe.y).shape == (2, 4, 5, 5)
    log.clear()
    times = exe.layer_times(3)  # a second context, the same buffers, a profiler attached
    assert times == {"conv1": [0.25, 0.25, 0.25]}
    assert log[:4] == [("create_execution_context",), ("set_input_shape", "input", (2, 3, 5, 5)),
                       ("set_tensor_address", "input", exe.x.data_ptr()),
                       ("set_tensor_address", "output", exe.y.data_ptr())]
    assert log[4:] == [("execute_async_v3", 1234, True)] * 3
    log.clear()
    exe.infer_fn()(handle)
    assert log == [("execute_async_v3", 1234, False)]  # the timed context never had the profiler


@pytest.mark.parametrize("kwargs,message", [
    ({"outputs": ("a", "b")}, r"inputs \['input'\] and outputs \['a', 'b'\]; one of each"),
    ({"dtype": "INT8"}, r"'input' is INT8"),
    ({"accept_shape": False}, r"refused input shape \(2, 3, 5, 5\)"),
])
def test_execution_refuses_what_it_cannot_run(kwargs, message):
    trt, engine = fake_engine([], **kwargs)
    with pytest.raises(BackendError, match=message):
        Execution(trt, engine, (2, 3, 5, 5), STREAM, device="cpu")


def test_a_failed_enqueue_is_an_error():
    trt, engine = fake_engine([], run_ok=False)
    exe = Execution(trt, engine, (2, 3, 5, 5), STREAM, device="cpu")
    with pytest.raises(BackendError, match="execute_async_v3 failed"):
        exe.infer_fn()(exe.x)


# -- the per-layer profile ----------------------------------------------------------------------------

def test_layer_profile_tables():
    files = layer_table({"conv1": [1.0, 3.0, 2.0], "relu": [0.5, 0.5]}, "profile")
    assert files["trt_layer_profile.csv"].splitlines() == [
        "layer,median_ms,share_pct,calls", '"conv1",2.000000,80.00,3', '"relu",0.500000,20.00,2']
    assert "| `conv1` | 2.0000 | 80.0% |" in files["trt_layer_profile.md"]


def test_the_layer_profile_runs_only_when_the_runner_copies_the_artifacts():
    made = []
    artifacts = AfterTiming(lambda: made.append(1) or {"trt_layer_profile.md": "x"})
    assert made == []
    assert dict(artifacts) == {"trt_layer_profile.md": "x"} and made == [1]
    assert dict(artifacts) == {"trt_layer_profile.md": "x"} and made == [1]  # once
    with pytest.warns(UserWarning, match="layer profile failed"):
        failed = dict(AfterTiming(lambda: {}["missing"]))
    assert "failed: KeyError" in failed["trt_layer_profile.md"]


# -- refusals: no TensorRT, no GPU -------------------------------------------------------------------

@pytest.fixture
def registered(monkeypatch):
    """The backend registered as the entry point will register it (tests import ``harness_plugins.tensorrt``)."""
    from harness import plugins as hp

    pm = hp.plugin_manager.__wrapped__()
    provided = [cls.name for impl in pm.hook.harness_backends.get_hookimpls() for cls in impl.function() or []]
    if "tensorrt" not in provided:
        pm.register(trt_plugin, name="tensorrt_under_test")
    monkeypatch.setattr(hp, "plugin_manager", lambda: pm)
    hp.backends.cache_clear()
    yield hp.get_backend("tensorrt")
    hp.backends.cache_clear()


def test_without_tensorrt_one_line_names_the_extra_and_nvidias_index(monkeypatch, registered, bench_cfg):
    monkeypatch.setattr(registered, "missing", classmethod(lambda cls: ["tensorrt"]))
    with pytest.raises(MissingDependency) as err:
        registered.check_installed()
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith("backend 'tensorrt' needs tensorrt, which is not installed: pip install -e '.[tensorrt]'")
    assert "--extra-index-url https://pypi.nvidia.com" in line
    rec = run(bench_cfg(**{"backend.name": "tensorrt"}), quiet=True)  # the missing library is named first
    assert rec.status == "FAILED" and line in rec.error


def test_a_tensorrt_that_does_not_import_gives_the_same_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # as the bindings wheel without NVIDIA's libraries
    with pytest.raises(MissingDependency, match=r"cannot import tensorrt .*pip install tensorrt --extra-index-url "
                                                r"https://pypi.nvidia.com"):
        load_tensorrt()
    assert "https://pypi.nvidia.com" in TensorRTBackend.not_ready()


def test_device_cpu_is_refused(monkeypatch, registered, bench_cfg):
    from harness import plugins as hp

    monkeypatch.setattr(registered, "missing", classmethod(lambda cls: []))  # as if TensorRT were installed
    rec = run(bench_cfg(**{"backend.name": "tensorrt"}), quiet=True)
    assert rec.status == "FAILED" and "backend 'tensorrt' does not run on cpu (it supports: cuda)" in rec.error
    monkeypatch.setattr(hp, "available_devices", lambda: ["cpu"])
    row = {r[0]: r for r in hp.backend_table()}["tensorrt"]
    assert row[1:3] == ("cuda", "no device: runs on cuda; this machine has cpu")
    assert row[3].startswith("pip install -e '.[tensorrt]' --extra-index-url https://pypi.nvidia.com")
    assert row[4] == "fakes only"  # never run on a real GPU here
    assert "unverified in this repository's CI" in row[5]
    g = build_model("sample", **SMALL["sample"])
    with pytest.raises(BackendError, match=r"does not run on cpu"):  # before TensorRT is imported
        TensorRTBackend({"name": "tensorrt"}).prepare(Model.from_graph(g), 1, "cpu", "fp32")


def test_no_execution_context_is_one_clear_line():
    log: list = []
    trt, engine = fake_engine(log)
    engine.create_execution_context = lambda: None  # what TensorRT returns when it cannot make one
    with pytest.raises(BackendError, match=r"create_execution_context\(\) returned None") as err:
        Execution(trt, engine, (2, 3, 5, 5), STREAM, device="cpu")
    assert "\n" not in str(err.value) and "results/tensorrt/" in str(err.value)
