"""The three TVM backends. They share the import, the target and the Relax VM; they
differ only in how the module is lowered (``lower``)."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.backend import Backend, BackendError, Model, Prepared, store_dir
from harness.machine.environment import cpu_model
from harness.machine.leases import cpu_share
from ios_core.workload import slug

from . import cudnn, tuning
from .build_cudnn import load
from .config import TUNERS, AutoTvmConfig, TvmConfig, TvmCudnnConfig
from .frontend import Work, device_of, make_target, target_info, to_relax


class TvmBackend(Backend[TvmConfig]):
    name = "tvm"
    runs = "TVM Relax with its default schedules"
    display_name = "TVM"
    config_class = TvmConfig
    requires = ("tvm",)
    extra = "tvm"
    gpu_run = "H100 80GB HBM3, 2026-11-25"
    forms = ("onnx",)

    def pass_context(self):
        import tvm
        return tvm.transform.PassContext(opt_level=self.cfg.opt_level,
                                         config={"relax.backend.use_cuda_graph": self.cfg.cuda_graph})

    def lower(self, mod, target, work: Work, metrics: dict[str, float], params: dict[str, Any]):
        """The compiled VM executable; TVM's default pipeline (dlight GPU schedules on cuda).

        On cuda, dlight tensorizes an fp16 matmul with every extent over 64 (the classifier at
        batch 128) and imports TVM's tensor intrinsics for it: 66 s of that build on a 2-core CPU
        without the tuning's inspect fix, 12 s with it (bench/tvm_intrinsics_import.py --build)."""
        import tvm
        tuning.cache_sourceless_frames()
        with self.pass_context():
            return tvm.compile(mod, target=target)

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        share = cpu_share()
        if share is not None:  # under the load-aware launcher: TVM's thread pool takes the job's CPU slot
            os.environ.setdefault("TVM_NUM_THREADS", str(share))
        import tvm
        from tvm import relax

        target = make_target(device)
        dev = device_of(target)
        device_name = tvm.cuda(0).device_name if device == "cuda" else cpu_model()
        metrics: dict[str, float] = {}
        params: dict[str, Any] = {**target_info(target), "tvm_math": "float16" if precision == "fp16" else "float32"}
        t = time.perf_counter()
        mod = to_relax(model, batch, precision)
        metrics["tvm_import_s"] = time.perf_counter() - t
        t = time.perf_counter()
        work = Work(model.name, model.digest(), batch, precision, device_name)
        executable = self.lower(mod, target, work, metrics, params)
        metrics.setdefault("tvm_compile_s", time.perf_counter() - t)
        t = time.perf_counter()
        vm = relax.VirtualMachine(executable, dev)
        main = vm["main"]
        metrics["tvm_load_s"] = time.perf_counter() - t

        def load(x: np.ndarray):
            return tvm.runtime.tensor(np.ascontiguousarray(x, dtype=np.float32), dev)

        main(load(np.zeros((batch, *model.input_shape), np.float32)))
        dev.sync()
        return Prepared(infer=main, load_input=load, synchronize=dev.sync,
                        to_numpy=lambda y: np.asarray(y.numpy(), dtype=np.float32),
                        display_name=self.label(), device_name=f"{device_name} ({target.kind.name})",
                        params=params, metrics=metrics)


class TvmCudnnBackend(TvmBackend):
    name = "tvm_cudnn"
    times_in_prepare = True  # algo=find: cuDNN times every algorithm while the module builds
    runs = "TVM Relax with convolutions (and their bias and ReLU) as cuDNN calls"
    display_name = "TVM-cuDNN"
    config_class = TvmCudnnConfig
    devices = ("cuda",)
    install = ("pip install -e '.[tvm]', then python -m harness_plugins.tvm.build_cudnn (needs the CUDA build of "
               "torch, or a CUDA with cuDNN)")
    cfg: TvmCudnnConfig

    @classmethod
    def not_ready(cls) -> str | None:
        try:
            load()
        except BackendError as exc:
            return str(exc)
        return None

    def lower(self, mod, target, work, metrics, params):
        params["tvm_cudnn_library"] = str(load())
        if work.precision == "fp32":  # strict float32: cuDNN's tensor-op math would take TF32 otherwise
            os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # (read when cuDNN's handle is made, in this child only)
        part, regions, total = cudnn.partition(mod)
        chooser = cudnn.find_algo if self.cfg.algo == "find" else cudnn.fixed_algo(self.cfg.algo)
        t = time.perf_counter()
        mod, counts = cudnn.offload(part, chooser)
        metrics.update(tvm_cudnn_convs=float(counts["convs"]), tvm_cudnn_fused=float(counts["fused"]),
                       tvm_cudnn_kept=float(counts["kept"]), tvm_convs=float(total),
                       tvm_cudnn_algo_s=time.perf_counter() - t)
        params["tvm_cudnn_algo"] = self.cfg.algo
        return super().lower(mod, target, work, metrics, params)


class AutoTvmBackend(TvmBackend):
    """MetaSchedule-tuned TVM. The database outlives the run: a later run with no more
    trials than it holds compiles straight from it."""

    name = "autotvm"
    runs = "TVM tuned with MetaSchedule (the paper's AutoTVM, which TVM has replaced)"
    display_name = "TVM-AutoTune"
    gpu_run = "H100 80GB HBM3, 2026-11-22"
    shows_progress = True  # a tuning bar
    config_class = AutoTvmConfig
    cfg: AutoTvmConfig

    def check_tuning_deps(self) -> None:
        """MetaSchedule imports psutil, and XGBoost for the xgb cost model, only once tuning starts."""
        need = ["psutil"] + (["xgboost"] if TUNERS[self.cfg.tuner][1] == "xgb" else [])
        missing = [m for m in need if importlib.util.find_spec(m) is None]
        if missing:
            raise BackendError(f"autotvm tuning needs {', '.join(missing)}, which is not installed: "
                               f"pip install -e '.[tvm]'")

    def database_dir(self, work: Work) -> Path:
        if self.cfg.database:
            return Path(self.cfg.database)
        return (store_dir(self.cfg.store) / "tvm_tuning" / slug(work.device_name) /
                f"{slug(work.name)}-{work.digest}-bs{work.batch}-{work.precision}")

    def lower(self, mod, target, work, metrics, params):
        from tqdm.auto import tqdm

        cfg = self.cfg
        mod = tuning.prepare_for_tuning(mod, target)
        path = self.database_dir(work)
        database = tuning.open_database(path)
        have, want = len(database), cfg.trials
        todo = want if cfg.retune else max(0, want - have)
        phases = tuning.PhaseTimes()
        t = time.perf_counter()
        tasks = 0
        if todo:
            self.check_tuning_deps()
            compiler = tuning.cuda_compiler(cfg.cuda_compiler) if target.kind.name == "cuda" else "nvrtc"
            params["tvm_cuda_compiler"] = compiler
            bar = tqdm(total=todo, desc=f"autotvm {work.name}", unit="trial", disable=not cfg.progress or None,
                       leave=False)
            runner = tuning.make_runner(cfg.runner, phases, number=cfg.number,
                                        repeat=cfg.repeat, min_repeat_ms=cfg.min_repeat_ms,
                                        rpc_tracker=cfg.rpc_tracker, rpc_key=cfg.rpc_key)
            try:
                tasks = tuning.tune(mod, target, database, todo, tuner=cfg.tuner,
                                    trials_per_iter=cfg.trials_per_iter, runner=runner, phases=phases,
                                    work_dir=path, seed=cfg.seed, build_threads=cfg.build_threads,
                                    cuda_compiler=compiler, progress=bar)
            except Exception as err:
                raise BackendError(f"autotvm tuning failed after {phases.measured} measured candidates "
                                   f"({type(err).__name__}: {err}); the database at {path} keeps what was "
                                   f"measured") from err
            finally:
                bar.close()
        metrics.update(tune_s=time.perf_counter() - t, tune_tasks=float(tasks), tune_trials_run=float(todo),
                       tune_records_before=float(have), tune_records=float(len(database)),
                       tune_reused=float(todo == 0), **phases.as_metrics())
        params.update(tvm_tuner=cfg.tuner, tvm_runner=cfg.runner, tvm_database=str(path))
        t = time.perf_counter()
        executable = tuning.compile_tuned(database, mod, target)
        metrics["tvm_compile_s"] = time.perf_counter() - t
        return executable
