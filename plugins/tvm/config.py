"""Typed configs of the TVM backends (``backend=autotvm backend.trials=64 ...``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, ConfigError, at_least, choose

# backend.tuner: MetaSchedule search strategy, and the cost model that ranks candidates
TUNERS = {
    "evolutionary-xgb": ("evolutionary", "xgb"),
    "evolutionary-random": ("evolutionary", "random"),
    "replay-trace": ("replay-trace", "random"),
    "replay-func": ("replay-func", "random"),
}
RUNNERS = ("inprocess", "local", "rpc")
CUDA_COMPILERS = ("auto", "nvcc", "nvrtc")


@dataclass
class TvmConfig(BackendConfig):
    name: str = "tvm"
    cuda_graph: bool = False  # Relax's CUDA-graph rewrite (relax.backend.use_cuda_graph)
    opt_level: int = 3

    def check(self) -> None:
        if self.opt_level not in range(4):
            raise ConfigError(f"backend.opt_level={self.opt_level} must be 0..3")


CUDNN_ALGOS = ("find", "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling", "winograd",
               "winograd_nonfused")


@dataclass
class TvmCudnnConfig(TvmConfig):
    name: str = "tvm_cudnn"
    # on by default: each cuDNN call through TVM's contrib sets its descriptors and queries its workspace on the
    # host, so without a graph the host is the bottleneck (about 2.5x slower at batch 1: BENCHMARKS.md)
    cuda_graph: bool = True
    algo: str = "find"  # cuDNN's convolution algorithm: find (cuDNN's timed search, per convolution) or one by name

    def check(self) -> None:
        super().check()
        choose("backend.algo", self.algo, CUDNN_ALGOS)


@dataclass
class AutoTvmConfig(TvmConfig):
    name: str = "autotvm"
    trials: int = 1000  # measured candidates in all (MetaSchedule max_trials_global)
    trials_per_iter: int = 64
    tuner: str = "evolutionary-xgb"  # evolutionary-xgb, evolutionary-random, replay-trace, replay-func
    build_threads: int = 0  # candidates compiled at once on the CPU (0: every core, or the launcher's share)
    cuda_compiler: str = "auto"  # candidate builds on cuda: auto (nvcc if on PATH), nvcc, nvrtc
    runner: str = "inprocess"  # inprocess (this process), local (isolated worker), rpc (remote device)
    rpc_tracker: str = ""  # host:port of a TVM RPC tracker, for runner=rpc
    rpc_key: str = ""  # device key registered with the tracker
    number: int = 3  # evaluator: runs per timing
    repeat: int = 1  # evaluator: timings per candidate
    min_repeat_ms: int = 40
    database: str = ""  # tuning database folder; default results/tvm_tuning/<device>/<model>-<hash>-bs<b>-<prec>
    retune: bool = False  # tune again even where the database already holds `trials` records
    seed: int = 0
    progress: bool = True

    def check(self) -> None:
        super().check()
        if self.cuda_graph:
            raise ConfigError("backend.cuda_graph is not supported by autotvm (MetaSchedule's compile sets its own "
                              "pass context); use backend=tvm for it")
        choose("backend.tuner", self.tuner, TUNERS)
        choose("backend.cuda_compiler", self.cuda_compiler, CUDA_COMPILERS)
        choose("backend.runner", self.runner, RUNNERS)
        at_least("backend.", self, 1, "trials", "trials_per_iter", "number", "repeat")
        if self.runner == "rpc" and (":" not in self.rpc_tracker or not self.rpc_key):
            raise ConfigError("backend.runner=rpc needs backend.rpc_tracker=host:port and backend.rpc_key=<device key>")
