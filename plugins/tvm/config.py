"""Typed configs of the TVM backends (``backend=autotvm backend.trials=64 ...``)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config import BackendConfig, ConfigError

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


@dataclass
class TvmCudnnConfig(TvmConfig):
    name: str = "tvm_cudnn"


@dataclass
class AutoTvmConfig(TvmConfig):
    name: str = "autotvm"
    trials: int = 1000  # measured candidates in all (MetaSchedule max_trials_global)
    trials_per_iter: int = 64
    tuner: str = "evolutionary-xgb"  # evolutionary-xgb, evolutionary-random, replay-trace, replay-func
    build_threads: int = 0  # candidates compiled at once on the CPU (0: every core)
    cuda_compiler: str = "auto"  # candidate builds on cuda: auto (nvcc if on PATH), nvcc, nvrtc
    runner: str = "inprocess"  # inprocess (this process), local (isolated worker), rpc (remote device)
    rpc_tracker: str = ""  # host:port of a TVM RPC tracker, for runner=rpc
    rpc_key: str = ""  # device key registered with the tracker
    number: int = 3  # evaluator: runs per timing
    repeat: int = 1  # evaluator: timings per candidate
    min_repeat_ms: int = 40
    database: str = ""  # tuning database folder; default results/tvm_tuning/<device>/<model>-<hash>-bs<b>-<prec>
    retune: bool = False  # tune again even where the database already holds `trials` records
    store: str = ""  # root of results/ (default: the repository's)
    seed: int = 0
    progress: bool = True


def check(cfg) -> None:
    if int(cfg["opt_level"]) not in range(4):
        raise ConfigError(f"backend.opt_level={cfg['opt_level']} must be 0..3")


def check_autotvm(cfg) -> None:
    check(cfg)
    if bool(cfg["cuda_graph"]):
        raise ConfigError("backend.cuda_graph is not supported by autotvm (MetaSchedule's compile sets its own "
                          "pass context); use backend=tvm for it")
    if str(cfg["tuner"]) not in TUNERS:
        raise ConfigError(f"backend.tuner={cfg['tuner']!r} is invalid; choose one of: {', '.join(TUNERS)}")
    if str(cfg["cuda_compiler"]) not in CUDA_COMPILERS:
        raise ConfigError(f"backend.cuda_compiler={cfg['cuda_compiler']!r} is invalid; choose one of: "
                          f"{', '.join(CUDA_COMPILERS)}")
    if str(cfg["runner"]) not in RUNNERS:
        raise ConfigError(f"backend.runner={cfg['runner']!r} is invalid; choose one of: {', '.join(RUNNERS)}")
    for key in ("trials", "trials_per_iter", "number", "repeat"):
        if int(cfg[key]) < 1:
            raise ConfigError(f"backend.{key}={cfg[key]} must be >= 1")
    if str(cfg["runner"]) == "rpc" and (":" not in str(cfg["rpc_tracker"]) or not cfg["rpc_key"]):
        raise ConfigError("backend.runner=rpc needs backend.rpc_tracker=host:port and backend.rpc_key=<device key>")
