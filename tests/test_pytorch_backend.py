"""The pytorch backend's layout choice (channels_last=auto/true/false), its compile modes and the
compile deadline, on the CPU. The CUDA timing of both layouts cannot run here: the choice it
feeds (faster_layout) is tested as a pure function."""

import logging
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import harness
from harness.backend import BackendError
from harness.config import ConfigError
from harness.job import compose
from harness.models import Model
from harness_plugins.pytorch import inductor
from harness_plugins.pytorch.backend import PyTorchBackend, PyTorchConfig, faster_layout
from harness_plugins.pytorch.deadline import Deadline
from ios_core.models import build_model


@pytest.mark.parametrize("value", ["auto", "true", "false", "True", "False", True, False])
def test_channels_last_accepts_auto_true_false(value):
    PyTorchConfig(channels_last=value)  # type: ignore[arg-type]


def test_channels_last_refuses_other_values_naming_the_choices():
    with pytest.raises(ConfigError, match=r"^backend.channels_last='sideways' is invalid; choose one of: "
                                          r"auto, true, false$"):
        PyTorchConfig(channels_last="sideways")


def test_compile_options_are_checked_and_labelled():
    b = PyTorchBackend({"name": "pytorch", "mode": "compile", "compile_mode": "max-autotune-no-cudagraphs"})
    assert b.label() == "TorchCompile-MA-NoCG"
    with pytest.raises(ConfigError, match="max-autotune-no-cudagraphs"):
        PyTorchConfig(compile_mode="max-autotune-cudagraphs")
    # max-autotune on cuDNN and cuBLAS alone is labelled apart (a fraction of the build time); one of the two is not
    vendor = {"name": "pytorch", "mode": "compile", "compile_mode": "max-autotune", "autotune_conv_backends": "aten",
              "autotune_gemm_backends": " ATEN "}
    assert PyTorchBackend(vendor).label() == "TorchCompile-MA-Vendor"
    assert PyTorchBackend({**vendor, "autotune_gemm_backends": "ATEN,TRITON"}).label() == "TorchCompile-MA"
    assert PyTorchBackend({**vendor, "compile_mode": "reduce-overhead"}).label() == "TorchCompile-RO"
    with pytest.raises(ConfigError, match=r"^backend.compile_timeout_s=0.0 must be > 0"):
        PyTorchConfig(compile_timeout_s=0.0)


def test_hydra_composes_the_presets_and_hands_true_as_a_string():
    cfg = compose(["device=cpu", "backend=pytorch_max_autotune", "backend.channels_last=true"])
    assert cfg.backend.compile_mode == "max-autotune" and cfg.backend.channels_last == "True"
    assert PyTorchConfig.from_mapping(cfg.backend).compile_timeout_s == 1800.0


@pytest.mark.parametrize("channels_last,layout,chosen_by", [
    ("auto", "nchw", "default"), ("true", "nhwc", "forced"), (False, "nchw", "forced")])
def test_cpu_layout_choice_is_in_the_params(channels_last, layout, chosen_by):
    graph = build_model("sample", channels=8, size=7)
    backend = PyTorchBackend({"name": "pytorch", "channels_last": channels_last})
    prep = backend.prepare(Model.from_graph(graph), 1, "cpu", "fp32")
    assert prep.params["layout"] == layout and prep.params["layout_chosen_by"] == chosen_by
    assert not any(k.startswith("layout_") for k in prep.metrics)  # nothing was timed
    x = prep.load_input(np.ones((1, *graph.input_shape), np.float32))
    assert x.is_contiguous(memory_format=torch.channels_last) == (layout == "nhwc")
    assert prep.to_numpy(prep.infer(x)).shape[0] == 1


def test_a_compile_past_its_deadline_fails_the_run_in_one_line(bench_cfg):
    torch._dynamo.reset()  # a graph compiled by an earlier test in this process would come back at once
    rec = harness.run(bench_cfg(**{"backend.mode": "compile", "backend.compile_timeout_s": 0.05}), quiet=True)
    torch._dynamo.reset()  # the interrupted compile leaves nothing behind for later tests
    assert rec.status == "FAILED"
    assert rec.error == ("BackendError: torch.compile (default) on sample did not finish in 0.05 s "
                         "(backend.compile_timeout_s): raise it, choose a lighter backend.compile_mode, or time no "
                         "Triton convolution templates: backend.autotune_conv_backends=ATEN")


def test_inductors_options_are_checked_naming_what_it_accepts():
    assert PyTorchConfig(autotune_conv_backends="aten", autotune_gemm_backends="ATEN,TRITON").compile_threads == 0
    with pytest.raises(ConfigError, match=r"^backend.autotune_conv_backends='ATEN,CUTLASS': CUTLASS unknown; give a "
                                          r"comma-separated list of ATEN, TRITON \(empty: Inductor's default\)$"):
        PyTorchConfig(autotune_conv_backends="ATEN,CUTLASS")
    with pytest.raises(ConfigError, match=r"^backend.compile_threads=-1 must be >= 0"):
        PyTorchConfig(compile_threads=-1)


def test_cudnn_search_is_checked_and_its_first_call_holds_the_device(monkeypatch):
    with pytest.raises(ConfigError, match=r"^backend.cudnn_search='fastest' is invalid; choose one of: "
                                          r"benchmark, heuristic$"):
        PyTorchConfig(cudnn_search="fastest")
    # where cuDNN times its plans (a CUDA build's first eager call), the device is held: the calls seen inside it
    import contextlib

    from harness_plugins.pytorch import backend as pytorch_backend
    seen: list[str] = []

    @contextlib.contextmanager
    def held():
        seen.append("enter")
        yield 0
        seen.append("exit")

    class Target:
        def synchronize(self):
            seen.append("sync")

    monkeypatch.setattr(pytorch_backend, "exclusive", held)
    PyTorchBackend._plan_convolutions(Target(), lambda x: seen.append(f"call {x}"), 7)
    assert seen == ["enter", "call 7", "sync", "exit"]


def test_a_second_compile_in_a_new_process_reuses_inductors_cache_in_the_store(bench_cfg):
    # each run in a fresh measuring process: only the cache on disk is shared
    cfg = bench_cfg(**{"backend.mode": "compile", "backend.autotune_conv_backends": "ATEN",
                       "backend.compile_threads": 1, "runner.isolate": True})
    first, second = (harness.run(cfg, quiet=True) for _ in range(2))
    assert first.status == second.status == "FINISHED", first.error or second.error
    folder = str(Path(cfg["tracking"]["results_dir"]) / "inductor")
    assert first.params["inductor_cache_dir"] == folder and Path(folder, "fxgraph").is_dir()
    assert (first.params["inductor_conv_backends"], first.params["inductor_compile_threads"]) == ("ATEN", 1)
    assert first.metrics["inductor_fxgraph_cache_miss"] >= 1 and first.metrics["inductor_fxgraph_cache_hit"] == 0
    assert second.metrics["inductor_fxgraph_cache_hit"] >= 1 and second.metrics["inductor_fxgraph_cache_miss"] == 0
    # where the compile went, by Inductor's own timers: a cold compile lowers and generates code; nothing is
    # autotuned in the default mode, and a CPU graph is never a CUDA graph (no skip counted, no note)
    assert first.metrics["inductor_lowering_s"] > 0 and first.metrics["inductor_codegen_s"] > 0
    assert first.metrics["inductor_autotune_s"] == first.metrics["inductor_select_algorithm_autotune"] == 0
    assert first.metrics["inductor_cudagraph_skips"] == 0 and not any("Inductor:" in n for n in first.notes)
    assert second.metrics["inductor_lowering_s"] == 0  # the graph came from the cache


def test_inductor_phase_times_count_only_what_came_after_the_marks():
    timers = {"GraphLowering.run": [5.0, 1.5], "mm_template_autotuning": [2.0, 3.0],
              "convolution_template_autotuning": [4.0], "bytecode_tracing": [9.0]}
    spent = inductor._phase_times(timers, {"GraphLowering.run": 1, "mm_template_autotuning": 1, "bytecode_tracing": 1})
    assert spent["inductor_lowering_s"] == 1.5 and spent["inductor_autotune_s"] == 7.0
    assert spent["inductor_dynamo_s"] == spent["inductor_kernel_compile_wait_s"] == 0.0


def test_inductor_says_why_a_graph_is_not_a_cuda_graph(tmp_path):
    with inductor.settings(PyTorchConfig(compile_threads=3), tmp_path) as facts:
        logging.getLogger(inductor.CUDAGRAPH_LOG).warning("skipping cudagraphs due to mutated inputs (1 instances)")
        from torch._inductor.select_algorithm import get_num_workers
        assert get_num_workers() == 3  # max-autotune's precompile pool: the job's share, not every core
    assert facts.notes == ["Inductor: skipping cudagraphs due to mutated inputs (1 instances)"]
    assert not logging.getLogger(inductor.CUDAGRAPH_LOG).handlers  # let go after the block
    assert "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ


def test_faster_layout_keeps_the_faster_and_nchw_on_a_tie():
    assert faster_layout({"nchw": 1.30, "nhwc": 1.10}) == "nhwc"
    assert faster_layout({"nchw": 0.90, "nhwc": 1.10}) == "nchw"
    assert faster_layout({"nhwc": 1.0, "nchw": 1.0}) == "nchw"


def _sentinel(signum, frame):
    pass


def test_deadline_fires_with_the_key_and_restores_the_handler():
    previous = signal.signal(signal.SIGALRM, _sentinel)
    try:
        t = time.perf_counter()
        with pytest.raises(BackendError, match=r"^torch.compile \(max-autotune\) on sample did not finish in 0.2 s "
                                               r"\(backend.compile_timeout_s\): raise it$"):
            with Deadline(0.2, "torch.compile (max-autotune) on sample", "backend.compile_timeout_s", "raise it"):
                time.sleep(5)
        assert time.perf_counter() - t < 2
        assert signal.getsignal(signal.SIGALRM) is _sentinel
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_deadline_fires_through_except_exception():
    """A library that catches Exception around the interrupted call (Dynamo, Inductor's
    autotuning) neither hides the deadline nor turns it into its own error."""
    def swallowing():
        try:
            time.sleep(5)
        except Exception:
            return "swallowed"
    with pytest.raises(BackendError, match=r"did not finish in 0.1 s \(key.s\): raise key.s$"):
        with Deadline(0.1, "step", "key.s"):
            swallowing()


def test_deadline_comes_again_when_the_first_interrupt_is_swallowed():
    """CI showed a JAX garbage-collector callback swallow the first interrupt (pytest reported it
    as unraisable): the deadline repeats until the block ends, so the block still ends near it."""
    swallowed = []

    def swallowing_once():
        try:
            time.sleep(5)
        except BaseException as exc:  # what an "unraisable" callback does with it
            swallowed.append(type(exc).__name__)
        time.sleep(5)
    t = time.perf_counter()
    with pytest.raises(BackendError, match=r"did not finish in 0.1 s \(key.s\)"):
        with Deadline(0.1, "step", "key.s"):
            swallowing_once()
    assert swallowed == ["_Expired"] and time.perf_counter() - t < 2
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_deadline_in_time_does_not_fire_and_keeps_an_outer_timer():
    previous = signal.signal(signal.SIGALRM, _sentinel)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with Deadline(0.5, "step", "key.s") as d:
            time.sleep(0.05)
        assert not d.fired and signal.getsignal(signal.SIGALRM) is _sentinel
        assert 29.0 < signal.getitimer(signal.ITIMER_REAL)[0] < 30.0
        time.sleep(0.6)  # past the inner deadline: nothing fires
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_deadline_outside_the_main_thread_runs_without_one():
    seen = []

    def work():
        with Deadline(0.05, "step", "key.s") as d:
            time.sleep(0.15)
        seen.append((d.active, d.fired))
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [(False, False)]
