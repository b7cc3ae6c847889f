"""TVM backends on the CPU: exact import of every zoo model (llvm), fp16, a full-size run,
the cuDNN partitioning (as far as it goes without cuDNN) and MetaSchedule tuning with a
database that the next run reuses."""

import re

import numpy as np
import pytest

from harness.backend import BackendError
from harness.config import ConfigError
from harness.job import run
from harness.models import Model
from harness_plugins.tvm.frontend import Work
from ios_core.models import MODELS, build_model

from .helpers import SMALL

tvm = pytest.importorskip("tvm")

ZOO = [m for m in MODELS if m in SMALL]


def small(bench_cfg, model="sample", **over):
    return bench_cfg(**{"model.name": model, "model.params": SMALL[model], **over})


@pytest.mark.parametrize("model", ZOO)
def test_tvm_is_exact_on_the_zoo(bench_cfg, model):
    rec = run(small(bench_cfg, model, **{"backend.name": "tvm"}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4
    assert rec.params["tvm_target_kind"] == "llvm"
    assert rec.params["tvm_math"] == "float32"
    assert rec.tags["lib_tvm"] == tvm.__version__
    assert rec.metrics["tvm_compile_s"] > 0


def test_tvm_fp16(bench_cfg):
    rec = run(small(bench_cfg, **{"backend.name": "tvm", "precision": "fp16"}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.params["tvm_math"] == "float16"
    assert 0 < rec.metrics["max_rel_error"] < 1e-2  # fp16 math really happened, within tolerance


@pytest.mark.slow
def test_tvm_full_size_end_to_end(bench_cfg):
    rec = run(bench_cfg(**{"model.name": "inception_v3", "model.params": {}, "backend.name": "tvm"}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4


@pytest.mark.parametrize("model", ZOO)
def test_cudnn_partitioning_offloads_every_conv(model):
    from harness_plugins.tvm.cudnn import partition
    from harness_plugins.tvm.frontend import to_relax
    from ios_core.onnx import export_onnx
    g = build_model(model, **SMALL[model])
    _, offloaded, total = partition(to_relax(Model.from_graph(g), 1, "fp32"))
    assert total == sum(1 for n in export_onnx(g).graph.node if n.op_type == "Conv") > 0
    assert offloaded == total


def test_tvm_cudnn_without_its_library_names_the_build_command(monkeypatch, tmp_path):
    """PyPI's TVM has no cuDNN functions until the project builds them: one line with the command."""
    from harness_plugins.tvm import TvmCudnnBackend
    from harness_plugins.tvm.frontend import make_target, to_relax

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    g = build_model("sample", **SMALL["sample"])
    backend = TvmCudnnBackend({"name": "tvm_cudnn", "cuda_graph": False, "opt_level": 3, "algo": "find"})
    with pytest.raises(BackendError, match=r"not built for this TVM .*python -m harness_plugins.tvm.build_cudnn") \
            as err:
        work = Work(g.name, g.hash(), 1, "fp32", "cpu")
        backend.lower(to_relax(Model.from_graph(g), 1, "fp32"), make_target("cpu"), work, {}, {})
    assert "\n" not in str(err.value)
    assert TvmCudnnBackend.not_ready() == str(err.value)


@pytest.fixture
def fake_cudnn():
    """TVM's two cuDNN convolution functions, computed by torch on the CPU: the lowering's calls
    (argument order, padding, strides, groups, bias, ReLU) run for real without a GPU."""
    import torch
    import tvm_ffi

    seen: list[tuple] = []

    def conv(x, w, pad, stride, dil, groups):
        return torch.nn.functional.conv2d(torch.from_numpy(x.numpy()), torch.from_numpy(w.numpy()), None, stride,
                                          pad, dil, groups).numpy()

    def forward(mode, fmt, algo, ph, pw, sh, sw, dh, dw, x, w, y, compute, groups):
        seen.append(("conv", mode, fmt, algo, compute))
        y.copyfrom(conv(x, w, (ph, pw), (sh, sw), (dh, dw), groups))

    def forward_bias(mode, fmt, algo, ph, pw, sh, sw, dh, dw, act, coef, x, w, b, y, compute, groups):
        seen.append(("conv+bias", mode, fmt, algo, compute, act))
        out = conv(x, w, (ph, pw), (sh, sw), (dh, dw), groups) + b.numpy()
        y.copyfrom(np.maximum(out, 0) if act == 1 else out)

    names = ("tvm.contrib.cudnn.conv2d.forward", "tvm.contrib.cudnn.conv2d+bias+act.forward")
    for name, fn in zip(names, (forward, forward_bias), strict=True):
        tvm_ffi.register_global_func(name, fn, override=True)
    yield seen
    for name in names:
        tvm_ffi.remove_global_func(name)


@pytest.mark.parametrize("model", ["sample", "inception_v3", "squeezenet"])
def test_tvm_cudnn_lowering_computes_the_model(model, fake_cudnn):
    from tvm import relax

    from harness_plugins.tvm import cudnn
    from harness_plugins.tvm.frontend import to_relax

    g = build_model(model, **SMALL[model])
    mod = to_relax(Model.from_graph(g, 2), 2, "fp32")
    part, regions, total = cudnn.partition(mod)
    lowered, counts = cudnn.offload(part, cudnn.fixed_algo("implicit_precomp_gemm"))
    assert regions == total == counts["convs"] + counts["kept"] and counts["convs"] > 0
    names = {gv.name_hint for gv in lowered.functions.keys()}
    assert not any(n.endswith("_cudnn") for n in names)  # no region is left for a codegen TVM lacks
    x = np.random.default_rng(0).standard_normal((2, *g.input_shape)).astype("float32")

    def run_module(m):
        vm = relax.VirtualMachine(tvm.compile(m, target="llvm"), tvm.cpu())
        return vm["main"](tvm.runtime.tensor(x)).numpy()
    got, want = run_module(lowered), run_module(mod)
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-5
    calls = len(fake_cudnn)
    assert calls == counts["convs"]  # every offloaded convolution ran as one cuDNN call
    fused = [c for c in fake_cudnn if c[0] == "conv+bias"]
    assert len(fused) == counts["fused"] and all(c[1:5] == (1, 0, 1, "float32") for c in fake_cudnn)
    assert any(c[5] == 1 for c in fused)  # ReLU fused into the call (cuDNN's activation 1)


def test_tvm_cudnn_build_names_what_is_missing(monkeypatch, tmp_path):
    from harness_plugins.tvm import build_cudnn

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build_cudnn, "_nvidia_dirs", lambda: [tmp_path / "none"])
    with pytest.raises(BackendError, match=r"needs cuDNN's headers and library \(cudnn.h, libcudnn.so\)"):
        build_cudnn.build()
    assert build_cudnn.main([]) == 2  # the command: one line, exit 2
    cuda = tmp_path / "cuda"  # a CUDA with cuDNN: the command links what it finds, with rpaths
    for sub, name in (("include", "cudnn.h"), ("include", "cuda_runtime_api.h"), ("lib", "libcudnn.so.9"),
                      ("lib", "libcudart.so.13")):
        (cuda / sub).mkdir(parents=True, exist_ok=True)
        (cuda / sub / name).write_text("")
    monkeypatch.setattr(build_cudnn, "_nvidia_dirs", lambda: [cuda])
    with pytest.raises(BackendError, match=r"crt headers \(crt/host_defines.h"):  # the runtime wheel lacks them
        build_cudnn.inputs()
    toolkit = tmp_path / "toolkit"  # where they are: another CUDA install (nvcc's toolkit, nvidia-cuda-crt)
    (toolkit / "include" / "crt").mkdir(parents=True)
    (toolkit / "include" / "crt" / "host_defines.h").write_text("")
    monkeypatch.setattr(build_cudnn, "_nvidia_dirs", lambda: [cuda, toolkit])
    cmd = build_cudnn.compile_command(build_cudnn.inputs(), tmp_path / "lib.so")
    assert cmd.index(f"-I{cuda / 'include'}") < cmd.index(f"-I{toolkit / 'include'}")
    assert "-l:libcudnn.so.9" in cmd and "-l:libcudart.so.13" in cmd and f"-I{cuda / 'include'}" in cmd
    assert f"-Wl,-rpath,{cuda / 'lib'}" in cmd and "-std=c++17" in cmd
    assert sum(a.endswith(".cc") for a in cmd) == len(build_cudnn.SOURCES)


def test_tvm_cudnn_is_gpu_only(bench_cfg):
    rec = run(small(bench_cfg, **{"backend.name": "tvm_cudnn"}), quiet=True)
    assert rec.status == "FAILED" and "does not run on cpu" in rec.error


PROBE = """
import inspect

def frames():
    return [(f.filename, f.lineno, f.code_context) for f in inspect.stack()]

AT_IMPORT = frames()  # importlib's frozen frames are on the stack here
IN_AST = {"frames": frames}
exec(compile("STACK = frames()", "<ast>", "exec"), IN_AST)  # as TVMScript's evaluator runs code
"""


def test_cached_sourceless_frames_change_no_answer_of_inspect(tmp_path, monkeypatch):
    """The tuning's fast import of TVM's tensor intrinsics puts frozen modules' frame names and
    "<ast>" in inspect's cache: inspect.stack() must say exactly what it says without them."""
    import importlib
    import inspect
    import sys

    from harness_plugins.tvm.tuning import cache_sourceless_frames

    monkeypatch.setattr(inspect, "modulesbyfile", {k: v for k, v in inspect.modulesbyfile.items()
                                                   if not k.startswith("<")})
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    for name in ("probe_before", "probe_after"):
        (tmp_path / f"{name}.py").write_text(PROBE)
        if name == "probe_after":
            cache_sourceless_frames()
            assert inspect.modulesbyfile["<frozen importlib._bootstrap>"] == "importlib._bootstrap"
        mod = importlib.import_module(name)
        sys.modules.pop(name)
        here = str(tmp_path / f"{name}.py")
        seen.append([[("probe" if f[0] == here else f[0], *f[1:]) for f in stack]
                     for stack in (mod.AT_IMPORT, mod.IN_AST["STACK"])])
    before, after = seen
    assert any(f[0].startswith("<frozen ") and f[2] is None for f in before[0])
    assert ("<ast>", 1, None) in before[1]
    assert before == after


def test_every_tvm_build_caches_the_sourceless_frames_first(monkeypatch):
    """dlight imports TVM's tensor intrinsics while it builds an fp16 matmul over 64 on cuda (the
    classifier at batch 128): 66-91 s of the build on a 2-core CPU without the cache, 6-12 s with it
    (bench/tvm_intrinsics_import.py --build). The backends' shared ``lower`` fills it first."""
    import inspect

    from tvm import relax
    from tvm.script import relax as R

    from harness_plugins.tvm.backend import TvmBackend

    monkeypatch.setattr(inspect, "modulesbyfile", {k: v for k, v in inspect.modulesbyfile.items()
                                                   if not k.startswith("<")})
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((2, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.add(x, x)))
        bb.emit_func_output(out)
    TvmBackend({"name": "tvm"}).lower(bb.get(), tvm.target.Target("llvm"), None, {}, {})
    assert inspect.modulesbyfile["<ast>"] == "<ast>"
    assert inspect.modulesbyfile["<frozen importlib._bootstrap>"] == "importlib._bootstrap"


def test_autotvm_tunes_then_reuses_its_database(bench_cfg, tmp_path):
    over = {"backend.name": "autotvm", "backend.trials": 6, "backend.tuner": "replay-trace",
            "backend.store": str(tmp_path / "store"), "backend.progress": False}
    first = run(small(bench_cfg, **over), quiet=True)
    assert first.status == "FINISHED", first.error
    m = first.metrics
    assert m["max_rel_error"] < 1e-4
    assert m["tune_trials_run"] == 6 and m["tune_reused"] == 0 and m["tune_tasks"] >= 2
    assert m["tune_built"] >= 6 and m["tune_measured"] >= 1 and m["tune_build_s"] > 0 and m["tune_measure_s"] > 0
    assert m["tune_records"] >= 1
    db = tmp_path / "store" / "tvm_tuning"
    assert len(list(db.rglob("database_tuning_record.json"))) == 1
    assert first.params["tvm_database"].startswith(str(db))

    second = run(small(bench_cfg, **{**over, "backend.trials": int(m["tune_records"])}), quiet=True)
    assert second.status == "FINISHED", second.error
    m2 = second.metrics
    assert m2["tune_reused"] == 1 and m2["tune_trials_run"] == 0 and m2["tune_measured"] == 0
    assert m2["tune_records_before"] == m["tune_records"]
    assert m2["max_rel_error"] < 1e-4


def test_autotvm_default_tuner_evolutionary_xgboost(bench_cfg, tmp_path):
    over = {"backend.name": "autotvm", "backend.trials": 4, "backend.trials_per_iter": 4,
            "backend.database": str(tmp_path / "db"), "backend.progress": False}
    rec = run(small(bench_cfg, **over), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.params["tvm_tuner"] == "evolutionary-xgb", rec.error
    assert rec.metrics["tune_measured"] >= 1 and rec.metrics["max_rel_error"] < 1e-4
    assert (tmp_path / "db" / "database_workload.json").exists()


@pytest.mark.parametrize("over,message", [
    ({"backend.tuner": "genetic"}, "backend.tuner='genetic' is invalid"),
    ({"backend.runner": "rpc"}, "needs backend.rpc_tracker=host:port"),
    ({"backend.cuda_graph": True}, "not supported by autotvm"),
    ({"backend.trials": 0}, "backend.trials=0 must be >= 1"),
    ({"backend.cuda_compiler": "clang"}, "backend.cuda_compiler='clang' is invalid"),
])
def test_autotvm_config_errors(bench_cfg, over, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        run(small(bench_cfg, **{"backend.name": "autotvm", **over}), quiet=True)


def test_tvm_refuses_bf16(bench_cfg):
    rec = run(small(bench_cfg, **{"backend.name": "tvm", "precision": "bf16"}), quiet=True)
    assert rec.status == "FAILED" and "precision=bf16 is not supported" in rec.error


def test_tuning_phases_are_separate_objects():
    """The build phase and the measuring phase are built apart, so they can run apart."""
    from tvm.s_tir import meta_schedule as ms

    from harness_plugins.tvm.tuning import PhaseTimes, make_builder, make_runner
    phases = PhaseTimes()
    assert isinstance(make_builder("/tmp", phases), ms.builder.Builder)
    assert isinstance(make_runner("inprocess", phases), ms.runner.Runner)
    rpc = make_runner("rpc", phases, rpc_tracker="gpu-host:9190", rpc_key="h100")
    assert isinstance(rpc, ms.runner.RPCRunner)
    assert set(phases.as_metrics()) == {"tune_build_s", "tune_measure_s", "tune_built", "tune_build_errors",
                                        "tune_measured", "tune_measure_errors"}
    assert np.isclose(sum(phases.as_metrics().values()), 0)


def test_autotvm_names_a_missing_cost_model_library(monkeypatch):
    import importlib.util

    from harness_plugins.tvm import AutoTvmBackend
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "xgboost" else real(name, *a))
    backend = AutoTvmBackend({"tuner": "evolutionary-xgb"})
    with pytest.raises(BackendError, match=r"needs xgboost, which is not installed: pip install -e '\.\[tvm\]'"):
        backend.check_tuning_deps()
    AutoTvmBackend({"tuner": "replay-trace"}).check_tuning_deps()  # no cost model, no xgboost needed


@pytest.mark.slow
def test_autotvm_full_size_end_to_end(bench_cfg, tmp_path):
    """Full-size inception_v3: a couple of tuned candidates, the rest from TVM's default
    pipeline, compiled from the database and checked against the reference."""
    rec = run(bench_cfg(**{"model.name": "inception_v3", "model.params": {}, "backend.name": "autotvm",
                           "backend.trials": 2, "backend.tuner": "replay-trace", "backend.progress": False,
                           "backend.database": str(tmp_path / "db")}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4
    assert rec.metrics["tune_tasks"] >= 30 and rec.metrics["tune_measured"] >= 1


def test_cuda_compiler_choice(monkeypatch):
    """auto takes nvcc where it is on PATH (its builds run in parallel on threads; NVRTC's did
    not on the H100), and the mode is set only while tuning."""
    import os
    import shutil

    from harness_plugins.tvm import tuning
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/local/cuda/bin/nvcc" if name == "nvcc" else None)
    assert tuning.cuda_compiler("auto") == "nvcc"
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert tuning.cuda_compiler("auto") == "nvrtc" and tuning.cuda_compiler("nvcc") == "nvcc"
    monkeypatch.delenv("TVM_CUDA_COMPILE_MODE", raising=False)
    with tuning.cuda_compile_mode("nvcc"):
        assert os.environ["TVM_CUDA_COMPILE_MODE"] == "nvcc"
    assert "TVM_CUDA_COMPILE_MODE" not in os.environ
