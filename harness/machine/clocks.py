"""GPU clocks: optional locking through NVML (nvidia-smi as fallback) with a reset
guaranteed on every exit path, and a sampler of clocks, temperature and throttle
reasons during measurement.

A lock outlives the process that set it, so the reset runs in ``finally``, in SIGINT
and SIGTERM handlers and at exit, in the parent process that outlives the measuring
child. The NVML module is injectable so every path is tested against a fake.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

from ios_core.errors import UserError


class ClockError(UserError, RuntimeError):
    """Clocks could not be locked as required (permissions, a GPU without the feature)."""


def load_nvml() -> Any | None:
    """The pynvml module, initialised, or None where there is no NVIDIA driver."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:  # no library, no driver, no GPU: clocks are simply not available
        return None


def nvml_text(value: str | bytes) -> str:
    """An NVML string (older pynvml returns bytes)."""
    return value if isinstance(value, str) else value.decode()


def visible_gpus() -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (indexes or UUIDs), or None when it is not set."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def nvml_index(nvml: Any, cuda_index: int) -> int:
    """NVML's index of the GPU that CUDA calls ``cuda_index`` in this process. NVML sees every GPU
    whatever ``CUDA_VISIBLE_DEVICES`` says, so under the load-aware launcher (which gives each job
    one GPU by UUID) CUDA's device 0 may be NVML's device 1: clocks and names must follow CUDA's."""
    visible = visible_gpus()
    if nvml is None or visible is None or cuda_index >= len(visible):
        return cuda_index
    entry = visible[cuda_index]
    try:
        if entry.isdigit():
            return int(entry)
        return int(nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByUUID(entry)))
    except Exception:  # a partial UUID or a MIG instance: NVML's own order is the best guess
        return cuda_index


class ClockLock:
    """Context manager that locks the SM clock of one GPU and always resets it."""

    def __init__(self, nvml: Any, index: int = 0, clock: str = "base", required: bool = False,
                 smi: str = "nvidia-smi"):
        self.nvml, self.index, self.clock, self.required, self.smi = nvml, index, clock, required, smi
        self.locked_mhz: int | None = None
        self.method = ""
        self._prev_handlers: dict[int, Any] = {}

    # -- target -------------------------------------------------------------------
    def target_mhz(self, handle) -> int:
        n = self.nvml
        if self.clock == "max":
            return int(n.nvmlDeviceGetMaxClockInfo(handle, n.NVML_CLOCK_SM))
        if self.clock == "base":
            try:  # the default applications clock is the TDP (base) clock
                return int(n.nvmlDeviceGetDefaultApplicationsClock(handle, n.NVML_CLOCK_GRAPHICS))
            except Exception:
                return int(n.nvmlDeviceGetMaxClockInfo(handle, n.NVML_CLOCK_SM) * 0.8)
        return int(self.clock)

    # -- lock / reset --------------------------------------------------------------
    def lock(self) -> bool:
        if self.nvml is None:
            return self._fail("no NVML (no NVIDIA driver): clocks cannot be locked")
        handle = self.nvml.nvmlDeviceGetHandleByIndex(self.index)
        mhz = self.target_mhz(handle)
        try:
            self.nvml.nvmlDeviceSetGpuLockedClocks(handle, mhz, mhz)
            self.method = "nvml"
        except Exception as exc:
            try:
                subprocess.run([self.smi, "-i", str(self.index), f"--lock-gpu-clocks={mhz},{mhz}"], check=True,
                               capture_output=True, timeout=30)
                self.method = "nvidia-smi"
            except Exception as exc2:
                return self._fail(f"locking GPU {self.index} at {mhz} MHz was refused (NVML: {exc}; "
                                  f"nvidia-smi: {exc2})")
        self.locked_mhz = mhz
        self._install_handlers()
        return True

    def reset(self) -> None:
        if self.locked_mhz is None:
            return
        try:
            if self.method == "nvml":
                handle = self.nvml.nvmlDeviceGetHandleByIndex(self.index)
                self.nvml.nvmlDeviceResetGpuLockedClocks(handle)
            else:
                subprocess.run([self.smi, "-i", str(self.index), "--reset-gpu-clocks"], check=True,
                               capture_output=True, timeout=30)
        finally:
            self.locked_mhz = None
            self._restore_handlers()

    def _fail(self, msg: str) -> bool:
        if self.required:
            raise ClockError(msg + " (device.lock_clocks=required)")
        warnings.warn(msg + "; measuring with unlocked clocks", stacklevel=3)
        return False

    # -- exit paths --------------------------------------------------------------------
    def _install_handlers(self) -> None:
        atexit.register(self.reset)
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._prev_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, self._on_signal)

    def _restore_handlers(self) -> None:
        atexit.unregister(self.reset)
        for sig, handler in self._prev_handlers.items():
            signal.signal(sig, handler)
        self._prev_handlers.clear()

    def _on_signal(self, signum, frame) -> None:
        prev = self._prev_handlers.get(signum)
        self.reset()
        if callable(prev):
            prev(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise SystemExit(128 + signum)

    def __enter__(self) -> ClockLock:
        self.lock()
        return self

    def __exit__(self, *exc) -> None:
        self.reset()


@dataclass
class ClockSampler:
    """Background thread sampling SM clock, temperature and throttle reasons."""

    nvml: Any
    index: int = 0
    interval_s: float = 0.05
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)  # (t, mhz, temp, reasons)

    def _read(self, handle) -> tuple[float, int, int, int]:
        n = self.nvml
        reasons_fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            n.nvmlDeviceGetCurrentClocksThrottleReasons
        return (time.perf_counter(), int(n.nvmlDeviceGetClockInfo(handle, n.NVML_CLOCK_SM)),
                int(n.nvmlDeviceGetTemperature(handle, n.NVML_TEMPERATURE_GPU)), int(reasons_fn(handle)))

    def start(self) -> ClockSampler:
        if self.nvml is None:
            return self
        self._stop = threading.Event()
        handle = self.nvml.nvmlDeviceGetHandleByIndex(self.index)

        def loop():
            while not self._stop.is_set():
                try:
                    self.samples.append(self._read(handle))
                except Exception:  # a transient NVML error loses one sample, not the run
                    pass
                self._stop.wait(self.interval_s)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self.nvml is not None and hasattr(self, "_thread"):
            self._stop.set()
            self._thread.join(timeout=2)

    def throttled_mask(self, stamps: list[float], target_mhz: float) -> list[bool]:
        """Per timestamp: was the nearest earlier clock sample below 75% of the target?"""
        if not self.samples or target_mhz <= 0:
            return [False] * len(stamps)
        times = [s[0] for s in self.samples]
        out, j = [], 0
        for t in stamps:
            while j + 1 < len(times) and times[j + 1] <= t:
                j += 1
            out.append(self.samples[j][1] < 0.75 * target_mhz)
        return out

    def summary(self) -> dict[str, float]:
        if not self.samples:
            return {}
        mhz = [s[1] for s in self.samples]
        temp = [s[2] for s in self.samples]
        reasons = 0
        for s in self.samples:
            reasons |= s[3]
        return {"sm_clock_mean_mhz": sum(mhz) / len(mhz), "sm_clock_min_mhz": float(min(mhz)),
                "temperature_max_c": float(max(temp)), "throttle_reasons_mask": float(reasons),
                "clock_samples": float(len(mhz))}
