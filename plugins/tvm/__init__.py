"""TVM backends (Relax, apache-tvm from PyPI): ``tvm`` with TVM's default schedules,
``tvm_cudnn`` with convolutions offloaded to cuDNN, and ``autotvm`` tuned with
MetaSchedule (AutoTVM's successor)."""

from harness.hookspecs import hookimpl

from .backend import AutoTvmBackend, TvmBackend, TvmCudnnBackend
from .config import AutoTvmConfig, TvmConfig, TvmCudnnConfig


@hookimpl
def harness_backends():
    return [TvmBackend, TvmCudnnBackend, AutoTvmBackend]


__all__ = ["AutoTvmBackend", "AutoTvmConfig", "TvmBackend", "TvmConfig", "TvmCudnnBackend", "TvmCudnnConfig"]
