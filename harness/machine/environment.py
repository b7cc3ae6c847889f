"""Environment capture: what a number was measured on (recorded as run tags)."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from importlib import metadata
from typing import Any

from ..config import PACKAGE_DIR, ConfigError
from .clocks import load_nvml, nvml_index, nvml_text, visible_gpus


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_state() -> dict[str, str]:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PACKAGE_DIR, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PACKAGE_DIR,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return {"git_commit": commit or "unknown", "git_dirty": str(bool(dirty)).lower()}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": "unknown", "git_dirty": "unknown"}


def gpu_info(nvml, index: int = 0) -> dict[str, str]:
    """The GPU that CUDA calls ``index`` here, as NVML sees it: name, UUID, NVML's index (which
    differs from CUDA's under ``CUDA_VISIBLE_DEVICES``, as each load-aware job runs), clocks."""
    if nvml is None:
        return {}
    try:
        nvml_idx = nvml_index(nvml, index)
        h = nvml.nvmlDeviceGetHandleByIndex(nvml_idx)
        name = nvml.nvmlDeviceGetName(h)
        driver = nvml.nvmlSystemGetDriverVersion()
        info = {"gpu_index": str(nvml_idx)}
        try:
            info["gpu_uuid"] = nvml_text(nvml.nvmlDeviceGetUUID(h))
        except Exception:  # an older NVML or a fake without it
            pass
        return {**info, "gpu_name": nvml_text(name),
                "gpu_driver": nvml_text(driver),
                "gpu_sm_clock_mhz": str(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
                "gpu_max_sm_clock_mhz": str(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
                "gpu_temperature_c": str(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))}
    except Exception as exc:  # partial NVML support: record what failed
        return {"gpu_info_error": str(exc)}


def capture(device: str, nvml=None, index: int = 0) -> dict[str, str]:
    import torch

    env = {"python": platform.python_version(), "platform": platform.platform(), "cpu_model": cpu_model(),
           "hostname": platform.node(), "torch": str(torch.__version__), "numpy": _version("numpy"),
           "onnx": _version("onnx"), "ios_harness": _version("ios-harness"), "device": device}
    if device == "cuda" and torch.cuda.is_available():
        env.update(cuda=str(torch.version.cuda), cudnn=str(torch.backends.cudnn.version()),
                   torch_device_name=torch.cuda.get_device_name(index))
    env.update(gpu_info(nvml, index))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        env["cuda_visible_devices"] = visible
    env.update(slurm_job())
    env.update(git_state())
    return env


def slurm_job() -> dict[str, str]:
    """The SLURM job that measured (``sacct -j`` and the job's log find it) and its node; nothing outside SLURM."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return {}
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return {"slurm_job_id": f"{array}_{task}" if array and task else job,
            "slurm_node": os.environ.get("SLURMD_NODENAME", "")}


def available_devices() -> list[str]:
    """The devices a run could use here. Without an NVIDIA GPU (NVML finds none, or ``CUDA_VISIBLE_DEVICES``
    hides them all) that is the CPU, said without importing torch, so ``--list-backends`` answers at once;
    with one, torch (the CUDA build, a driver it accepts) has the last word."""
    nvml = load_nvml()
    if nvml is None or int(nvml.nvmlDeviceGetCount()) == 0 or visible_gpus() == []:
        return ["cpu"]
    try:
        import torch

        return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]
    except Exception:
        return ["cpu"]


def resolve_device(requested: str) -> str:
    """``cpu``, or ``cuda`` where asked for (``auto``: where there is one); torch is asked only where NVML sees
    a GPU, so a CPU run's parent never imports it (a second of every run's overhead)."""
    if requested == "cpu":
        return requested
    has_gpu = "cuda" in available_devices()
    if requested == "auto":
        return "cuda" if has_gpu else "cpu"
    if requested == "cuda" and not has_gpu:
        raise ConfigError("device=cuda was asked for but no CUDA GPU is available "
                          "(NVML sees none, or torch cannot use it); use device=cpu or device=auto")
    return requested


def start_cuda() -> float:
    """Make this process's CUDA context now and return its seconds: the measuring process does it before the
    optimization clock starts, as every backend pays it once per process (seconds on a lent GPU host, most of
    a warm IOS rerun's model build: BENCHMARKS.md) and it is no optimization. JAX and TensorFlow use the same
    primary context. Nothing (0 s) where torch has no CUDA: the backend's own preparation then says what it
    lacks (TensorFlow's or ONNX Runtime's GPU build)."""
    import torch

    if not torch.cuda.is_available():
        return 0.0
    t = time.perf_counter()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    return time.perf_counter() - t


def device_of_record(record: Any) -> str:
    """A record's device (its tags), as sweeps compare jobs across attempts: ``cuda:<GPU name>``."""
    tags = record.tags
    if tags.get("device") == "cuda":
        return "cuda:" + tags.get("torch_device_name", tags.get("gpu_name", "unknown"))
    return "cpu:" + tags.get("cpu_model", "unknown")


def sweep_device(config: Any) -> str:
    """The device a sweep's base config names (``device`` swept per job leaves it at its default);
    the requested name where it cannot be resolved (the job then says why)."""
    kind = str(getattr(config.device.type, "value", config.device.type))
    try:
        return current_device({"device": {"type": kind, "index": int(config.device.index)}})
    except Exception:
        return kind


def current_device(plain: dict[str, Any]) -> str:
    """The device this job would run on, named as :func:`device_of_record` names it."""
    kind = resolve_device(plain["device"]["type"])
    if kind == "cuda":  # NVML first: no CUDA context in the sweep's own process
        nvml = load_nvml()
        if nvml is not None:
            index = nvml_index(nvml, int(plain["device"]["index"]))
            return "cuda:" + nvml_text(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(index)))
        import torch

        return "cuda:" + torch.cuda.get_device_name(int(plain["device"]["index"]))
    return "cpu:" + cpu_model()
