"""MetaSchedule tuning in two phases that can run apart: candidates are *built* on the
CPU (``InProcessBuilder``) and *measured* on the device (``InProcessRunner`` here, the
stock isolated ``LocalRunner``, or an ``RPCRunner`` on another machine). Each phase's
time is accounted separately in :class:`PhaseTimes`.

The stock ``LocalBuilder`` restarts its worker pool on every batch of candidates, and each
fresh worker spends about 30 s importing TVM's tensor intrinsics. Building in this process
pays that import once (:func:`import_tensor_intrinsics`, made fast there), inside ``tune_s``.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.machine import leases
from harness.machine.leases import exclusive

from .config import TUNERS


@dataclass
class PhaseTimes:
    """Where tuning time went (seconds) and how many candidates each phase saw."""

    build_s: float = 0.0
    measure_s: float = 0.0
    built: int = 0
    build_errors: int = 0
    measured: int = 0
    measure_errors: int = 0

    def as_metrics(self) -> dict[str, float]:
        return {f"tune_{k}": float(v) for k, v in self.__dict__.items()}


def _build_candidate(mod, target, workdir: str) -> tuple[str | None, str | None]:
    """(artifact path, None) or (None, error) for one candidate."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    try:
        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
        # own folder: MetaSchedule's RemoveBuildArtifact deletes the artifact's folder
        path = str(Path(tempfile.mkdtemp(dir=workdir)) / f"candidate.{tar.output_format}")
        with target:
            tvm.compile(mod, target=target).export_library(path, fcompile=tar)
        return path, None
    except Exception as err:  # a bad candidate is the tuner's business, not ours
        return None, f"{type(err).__name__}: {err}"


def _builder_class():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder

    @derived_object
    class InProcessBuilder(PyBuilder):
        """Builds and exports candidates on threads of this process (phase 1, CPU)."""

        def __init__(self, workdir: str, phases: PhaseTimes, threads: int = 0, progress=None):
            super().__init__()
            self.workdir, self.phases, self.progress = workdir, phases, progress
            self.threads = threads or leases.cpu_threads()

        def build(self, build_inputs):
            t = time.perf_counter()
            # TVM's compiler releases the GIL (and nvcc is a subprocess): threads build in parallel
            with ThreadPoolExecutor(max(1, min(self.threads, len(build_inputs)))) as pool:
                outcomes = list(pool.map(lambda item: _build_candidate(item.mod, item.target, self.workdir),
                                         build_inputs))
            results = [BuilderResult(path, None) if path else BuilderResult(None, f"{type(self).__name__}: {error}")
                       for path, error in outcomes]
            self.phases.build_errors += sum(r.artifact_path is None for r in results)
            self.phases.built += len(build_inputs)
            self.phases.build_s += time.perf_counter() - t
            if self.progress is not None:
                self.progress.update(len(build_inputs))
            return results

    return InProcessBuilder


def _runner_class():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.runner import LocalRunnerFuture, PyRunner
    from tvm.s_tir.meta_schedule.runner.local_runner import default_alloc_argument, default_run_evaluator

    @derived_object
    class InProcessRunner(PyRunner):
        """Times each built candidate on the device from this process (phase 2)."""

        def __init__(self, evaluator_config, phases: PhaseTimes):
            super().__init__()
            self.evaluator_config, self.phases = evaluator_config, phases

        def run(self, runner_inputs):
            import tvm

            t = time.perf_counter()
            futures = []
            with exclusive():  # under the load-aware launcher: no other job measures on the device meanwhile
                for item in runner_inputs:
                    try:
                        mod = tvm.runtime.load_module(str(item.artifact_path))
                        dev = tvm.runtime.device(str(item.device_type), 0)
                        args = default_alloc_argument(dev, [a.as_json() for a in item.args_info], 1)
                        costs = default_run_evaluator(mod, dev, self.evaluator_config, args)
                        futures.append(LocalRunnerFuture(res=[float(c) for c in costs]))
                    except Exception as err:
                        self.phases.measure_errors += 1
                        futures.append(LocalRunnerFuture(
                            error_message=f"InProcessRunner: {type(err).__name__}: {err}"))
            self.phases.measured += len(runner_inputs)
            self.phases.measure_s += time.perf_counter() - t
            return futures

    return InProcessRunner


def _counting_runner_class():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture

    @derived_object
    class CountedFuture(PyRunnerFuture):
        def __init__(self, future, count):
            super().__init__()
            self.future, self.count = future, count

        def done(self) -> bool:
            return self.future.done()

        def result(self):
            result = self.future.result()
            if self.count is not None:
                self.count(result)
                self.count = None
            return result

    @derived_object
    class CountingRunner(PyRunner):
        """A stock runner (``local``, ``rpc``) whose results are counted in :class:`PhaseTimes`
        as the tuner collects them. RPC stays asynchronous (the next task is searched and built
        while a batch is measured remotely), so its ``measure_s`` runs from sending a batch to
        collecting its last result and may overlap ``build_s``."""

        def __init__(self, runner, phases: PhaseTimes, local: bool = False):
            super().__init__()
            self.runner, self.phases, self.local = runner, phases, local

        def run(self, runner_inputs):
            t, pending = time.perf_counter(), [len(runner_inputs)]

            def count(result) -> None:
                self.phases.measured += 1
                self.phases.measure_errors += result.error_msg is not None
                pending[0] -= 1
                if not pending[0]:
                    self.phases.measure_s += time.perf_counter() - t

            # LocalRunner measures on this machine's device before it returns: a launcher's lease
            # covers it; RPC measures elsewhere and takes none
            with exclusive() if self.local else contextlib.nullcontext():
                futures = self.runner.run(runner_inputs)
            return [CountedFuture(future, count) for future in futures]

    return CountingRunner


def make_builder(workdir: str, phases: PhaseTimes, threads: int = 0, progress=None):
    """The building phase (CPU): ``threads`` compile candidates at once (0: every core)."""
    return _builder_class()(workdir, phases, threads, progress)


def cuda_compiler(choice: str) -> str:
    """TVM's CUDA compiler for candidate builds. ``auto`` takes nvcc where it is on PATH:
    nvcc builds candidates in parallel, about 13x faster than NVRTC (TVM's default), whose calls
    do not run in parallel (BENCHMARKS.md)."""
    if choice == "auto":
        return "nvcc" if shutil.which("nvcc") else "nvrtc"
    return choice


@contextmanager
def cuda_compile_mode(mode: str):
    """Sets TVM_CUDA_COMPILE_MODE (read by TVM at each CUDA compile) for the duration."""
    old = os.environ.get("TVM_CUDA_COMPILE_MODE")
    os.environ["TVM_CUDA_COMPILE_MODE"] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TVM_CUDA_COMPILE_MODE", None)
        else:
            os.environ["TVM_CUDA_COMPILE_MODE"] = old


def make_runner(kind: str, phases: PhaseTimes, *, number: int = 3, repeat: int = 1, min_repeat_ms: int = 40,
                rpc_tracker: str = "", rpc_key: str = ""):
    """The measuring phase: ``inprocess``, ``local`` (TVM's isolated worker) or ``rpc``."""
    from tvm.s_tir import meta_schedule as ms

    evaluator = ms.runner.EvaluatorConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                          enable_cpu_cache_flush=False)
    if kind == "inprocess":
        return _runner_class()(evaluator, phases)
    if kind == "local":
        return ms.runner.LocalRunner(evaluator_config=evaluator)
    if kind == "rpc":
        host, port = rpc_tracker.rsplit(":", 1)
        return ms.runner.RPCRunner(ms.runner.RPCConfig(tracker_host=host, tracker_port=int(port),
                                                       tracker_key=rpc_key), evaluator_config=evaluator)
    raise ValueError(f"unknown runner {kind!r}")


def import_tensor_intrinsics() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (MetaSchedule does on its first task) in seconds, not a minute.

    TVMScript's parser calls ``inspect.stack()`` for each of the ~500 intrinsics it parses. For a
    frame of a frozen module (importlib's, in every import's stack) or of code compiled as
    ``"<ast>"`` (the parser's own evaluator), ``inspect.getmodule`` finds no file in its cache and
    scans all of ``sys.modules`` (about 2000 with torch loaded), each time: the import took 66 s on a
    2-core CPU. Neither kind of frame has source lines to find, with or without the scan; with their
    names in inspect's own cache, inspect says so at once (7.6 s on the same machine)."""
    cache_sourceless_frames()
    import tvm.s_tir.tensor_intrin  # noqa: F401


def cache_sourceless_frames() -> None:
    """Put the frozen modules' frame names and ``"<ast>"`` in ``inspect.modulesbyfile``, so that
    ``inspect.getmodule`` answers for their frames from its cache instead of a scan of every module."""
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.origin == "frozen":
            inspect.modulesbyfile.setdefault(f"<frozen {name}>", name)
    inspect.modulesbyfile.setdefault("<ast>", "<ast>")  # no module has this name: getmodule says None


def prepare_for_tuning(mod, target):
    """Legalize and fuse exactly as ``compile_relax`` does, so that the tasks extracted
    here are the functions the database is later applied to."""
    import tvm
    from tvm import relax
    from tvm.relax import pipeline

    passes = [*pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
              relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(), relax.transform.FuseOps(),
              relax.transform.FuseTIR()]
    with target:
        return tvm.transform.Sequential(passes)(mod)


def open_database(path: Path):
    from tvm.s_tir import meta_schedule as ms
    path.mkdir(parents=True, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=str(path))


def _drop_unnamed_handlers() -> None:
    """MetaSchedule rebuilds its logging with dictConfig from its logger's handler *names*;
    an unnamed handler left there (pytest's capture handler, for one) makes that fail."""
    log = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in log.handlers if h.get_name() is None]:
        log.removeHandler(handler)


def _quiet_console() -> None:
    """MetaSchedule prints every round's task table on stdout; its files under logs/ keep it."""
    for handler in logging.getLogger("tvm.s_tir.meta_schedule").handlers:
        if handler.get_name() == "tvm.s_tir.meta_schedule.console":
            handler.setLevel(logging.WARNING)


def tune(mod, target, database, trials: int, *, tuner: str = "evolutionary-xgb", trials_per_iter: int = 64,
         runner=None, phases: PhaseTimes | None = None, work_dir: Path, seed: int = 0, build_threads: int = 0,
         cuda_compiler: str = "nvrtc", progress=None):
    """Tune the fused module's tasks for ``trials`` measured candidates into ``database``.

    ``runner`` defaults to measuring in this process; pass ``make_runner("rpc", ...)`` to
    build here and measure elsewhere. Returns the number of tasks tuned.
    """
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.tune import tune_tasks

    phases = phases or PhaseTimes()
    import_tensor_intrinsics()
    strategy, cost_model = TUNERS[tuner]
    tasks = ms.relax_integration.extract_tasks(mod, target)
    if not tasks:
        return 0
    _drop_unnamed_handlers()
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        tasks, work_dir=str(work_dir), strategy=strategy, seed=seed,
        num_threads=leases.cpu_share() or "physical")
    scratch = tempfile.mkdtemp(prefix="tvm-tune-")
    builder = make_builder(scratch, phases, build_threads, progress)
    try:
        runner = runner or make_runner("inprocess", phases)
        if isinstance(runner, ms.runner.LocalRunner | ms.runner.RPCRunner):  # their work counted too
            runner = _counting_runner_class()(runner, phases, isinstance(runner, ms.runner.LocalRunner))
        _quiet_console()
        with cuda_compile_mode(cuda_compiler):
            tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(work_dir), max_trials_global=trials,
                       num_trials_per_iter=min(trials_per_iter, trials), builder=builder, runner=runner,
                       database=database, cost_model=cost_model)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return len(tasks)


def compile_tuned(database, mod, target):
    from tvm.s_tir import meta_schedule as ms
    return ms.relax_integration.compile_relax(database, mod, target, None)
