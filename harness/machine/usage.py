"""What a run used besides time: peak memory, and on NVIDIA GPUs the energy of the timed calls.

Memory: the peak of PyTorch's CUDA allocator over the timed loop where the backend allocated through it
(every torch-based backend, IOS included: what running the model takes, its weights and buffers included),
and apart the peak of its preparation before (``memory_prepare_peak_mb``: IOS's search timed stages with
6 GB at batch 128 where the model runs in less) and what the prepared model held when the loop began
(``memory_held_mb``: weights, captured graphs' pools, whatever the preparation left allocated); else the
GPU's used memory as NVML reports it after the timed loop (a backend with its own allocator: ONNX Runtime,
TensorRT, TVM), or where the backend reads its own allocator (JAX: ``Prepared.memory_stats``) that allocator's
peak since the process began, the peak when the loop began (the preparation's) and what it held then (NVML's
figure counts the 75% of the GPU JAX reserves when it starts). JAX cannot reset that peak, and XLA's compile
sets it (autotuning scratch many times the model's size: BENCHMARKS.md), so where the loop
did not raise it the headline is the compiled call's own buffer plan (``memory_peak_call_mb``: XLA's peak,
arguments included). On the CPU the child's peak resident set.
Energy: NVML's total-energy counter (mJ since the driver loaded; Volta and newer) read before and after the
timed loop, divided by the calls made, and the mean power over the loop. The counter is the whole GPU's: another
process on the same GPU adds its energy (the load-aware launcher gives the device to one measurement)."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..backend import AllocatorStats

MB = 2 ** 20
#: where a GPU run's headline memory is read from, first found first, and what each figure is: a backend that reads
#: its own allocator says what it used even where torch's CUDA is initialized beside it; NVML's is the whole GPU's
MEMORY_SOURCES = {"memory_peak_call_mb": "the compiled call's own buffer plan (XLA), arguments included",
                  "memory_peak_allocator_mb": "the backend's allocator peak, since it started",
                  "memory_peak_torch_mb": "PyTorch allocator peak",
                  "memory_used_nvml_mb": "GPU used (NVML), reserved pools included"}


@dataclass
class UsageMeter:
    """``start()`` before the timed loop, ``stop(calls)`` after it; ``metrics()`` what could be read."""

    device: str
    nvml: Any = None
    index: int = 0
    allocator: Callable[[], AllocatorStats | None] | None = None  # the backend's own (``Prepared.memory_stats``)
    _energy0: float | None = field(default=None, init=False)
    _t0: float = field(default=0.0, init=False)
    _out: dict[str, float] = field(default_factory=dict, init=False)
    _prepare_peak: float = field(default=0.0, init=False)  # the backend's allocator's peak when the loop began

    def _handle(self) -> Any:
        return self.nvml.nvmlDeviceGetHandleByIndex(self.index)

    def _energy_mj(self) -> float | None:
        if self.nvml is None:
            return None
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle()))
        except Exception:  # an older GPU or driver without the counter
            return None

    def _power_ceiling_w(self) -> float:
        """The most power a reading may imply: 1.5x the GPU's enforced limit, or 2 kW where NVML has none."""
        try:
            return 1.5 * float(self.nvml.nvmlDeviceGetEnforcedPowerLimit(self._handle())) / 1e3
        except Exception:  # an older driver, a fake
            return 2000.0

    def start(self) -> UsageMeter:
        if self.device == "cuda":
            self._out.update(_prepare_peak())
            held = self._allocator_stats()
            if held is not None:  # its peak so far is the preparation's (JAX cannot reset it for the loop)
                self._out.update(memory_held_mb=held.in_use / MB, memory_prepare_peak_mb=held.peak / MB)
                self._prepare_peak = held.peak
        self._energy0 = self._energy_mj()
        self._t0 = time.perf_counter()
        return self

    def stop(self, calls: int) -> None:
        elapsed = time.perf_counter() - self._t0
        end = self._energy_mj()
        if self._energy0 is not None and end is not None and calls > 0 and elapsed > 0 and end >= self._energy0:
            used = end - self._energy0
            power = used / 1e3 / elapsed
            if power <= self._power_ceiling_w():
                self._out.update(energy_per_inference_mj=used / calls, power_mean_w=power)
            else:  # the counter jumped (seen on a fresh machine's first run): no energy rather than a wrong one
                self._out["energy_counter_implausible_w"] = power
        if self.device == "cuda":
            self._out.update(self._device_memory())
        self._out["memory_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB

    def _device_memory(self) -> dict[str, float]:
        out: dict[str, float] = {}
        try:
            import torch

            peak = float(torch.cuda.max_memory_allocated()) if torch.cuda.is_initialized() else 0.0
        except Exception:
            peak = 0.0
        if peak > 0:
            out["memory_peak_torch_mb"] = peak / MB
        own = self._allocator_stats()
        if own is not None:
            out["memory_peak_allocator_mb"] = own.peak / MB
            if own.call_peak and own.peak <= self._prepare_peak:  # the peak is still the compile's (XLA's scratch)
                out["memory_peak_call_mb"] = own.call_peak / MB
        if self.nvml is not None:
            try:
                out["memory_used_nvml_mb"] = float(self.nvml.nvmlDeviceGetMemoryInfo(self._handle()).used) / MB
            except Exception:
                pass
        headline = next((out[k] for k in MEMORY_SOURCES if k in out), None)
        if headline is not None:
            out["memory_peak_mb"] = headline
        return out

    def _allocator_stats(self) -> AllocatorStats | None:
        """The backend's own allocator's counters, where it has one and they can be read."""
        if self.allocator is None:
            return None
        try:
            return self.allocator()
        except Exception:  # noqa: BLE001 - a runtime without the counters: NVML's figure stands
            return None

    def metrics(self) -> dict[str, float]:
        return dict(self._out)


def _prepare_peak() -> dict[str, float]:
    """The allocator's peak so far (the preparation) and what is allocated now (the prepared model), then reset:
    the peak after the timed loop is the run's."""
    try:
        import torch

        if not torch.cuda.is_initialized():
            return {}
        peak, held = float(torch.cuda.max_memory_allocated()), float(torch.cuda.memory_allocated())
        torch.cuda.reset_peak_memory_stats()
    except Exception:  # noqa: BLE001 - no usable CUDA allocator: nothing to say
        return {}
    return {"memory_prepare_peak_mb": peak / MB, "memory_held_mb": held / MB} if peak > 0 else {}


def peak_memory_mb(metrics: dict[str, float]) -> float | None:
    """A record's peak memory: the device's on a GPU run, else the measuring process's resident peak."""
    return metrics.get("memory_peak_mb", metrics.get("memory_peak_rss_mb"))


def usage_heading(metrics: dict[str, float]) -> str:
    """What :func:`usage_text` of a record shows: device memory and energy on a GPU; the process's resident peak
    on the CPU, which has no energy reading."""
    memory = "Memory" if "memory_peak_mb" in metrics else "Memory (RSS)"
    return f"{memory}, energy" if "energy_per_inference_mj" in metrics else memory


def usage_text(memory_mb: float | None, energy_mj: float | None) -> str:
    """Peak memory (device memory on a GPU, resident memory on the CPU) and energy per inference."""
    parts = ([f"{memory_mb:.0f} MB"] if memory_mb is not None else []) + \
        ([f"{energy_mj:.3g} mJ"] if energy_mj is not None else [])
    return ", ".join(parts) or "-"
