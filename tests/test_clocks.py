"""Clock lock/reset pairing on every exit path, against a fake NVML."""

import os
import signal
import time
import types

import pytest

from harness.machine.clocks import ClockError, ClockLock, ClockSampler


class FakeNVML(types.SimpleNamespace):
    NVML_CLOCK_SM = 1
    NVML_CLOCK_GRAPHICS = 0
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, permitted=True):
        super().__init__(calls=[], permitted=permitted, clock=1980)

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"gpu{i}"

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetDefaultApplicationsClock(self, h, kind):
        return 1590

    def nvmlDeviceSetGpuLockedClocks(self, h, lo, hi):
        if not self.permitted:
            raise PermissionError("NVML_ERROR_NO_PERMISSION")
        self.calls.append(("lock", h, lo, hi))

    def nvmlDeviceResetGpuLockedClocks(self, h):
        self.calls.append(("reset", h))

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self.clock

    def nvmlDeviceGetTemperature(self, h, kind):
        return 40

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 4


def test_lock_and_reset_on_normal_exit():
    nvml = FakeNVML()
    with ClockLock(nvml, 0, "base") as lock:
        assert lock.locked_mhz == 1590
    assert nvml.calls == [("lock", "gpu0", 1590, 1590), ("reset", "gpu0")]


def test_max_and_explicit_mhz():
    nvml = FakeNVML()
    with ClockLock(nvml, 1, "max"):
        pass
    with ClockLock(nvml, 1, "1200"):
        pass
    assert nvml.calls[0] == ("lock", "gpu1", 1980, 1980) and nvml.calls[2] == ("lock", "gpu1", 1200, 1200)


def test_reset_on_exception():
    nvml = FakeNVML()
    with pytest.raises(RuntimeError):
        with ClockLock(nvml):
            raise RuntimeError("backend failed")
    assert [c[0] for c in nvml.calls] == ["lock", "reset"]


def test_reset_on_ctrl_c():
    nvml = FakeNVML()
    with pytest.raises(KeyboardInterrupt):
        with ClockLock(nvml):
            os.kill(os.getpid(), signal.SIGINT)
    assert [c[0] for c in nvml.calls] == ["lock", "reset"]


def test_sigterm_with_handler_installed_resets_and_exits():
    nvml = FakeNVML()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with pytest.raises(SystemExit) as info:
        with ClockLock(nvml):
            os.kill(os.getpid(), signal.SIGTERM)
    assert info.value.code == 128 + signal.SIGTERM
    assert [c[0] for c in nvml.calls] == ["lock", "reset"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handlers restored


def test_refused_lock_warns_or_fails(tmp_path):
    with pytest.warns(UserWarning, match="was refused"):
        lock = ClockLock(FakeNVML(permitted=False), smi=str(tmp_path / "no-smi"))
        assert lock.lock() is False
    with pytest.raises(ClockError, match="device.lock_clocks=required"):
        ClockLock(FakeNVML(permitted=False), required=True, smi=str(tmp_path / "no-smi")).lock()
    with pytest.raises(ClockError, match="no NVML"):
        ClockLock(None, required=True).lock()


def test_nvidia_smi_fallback(tmp_path):
    smi = tmp_path / "nvidia-smi"
    log = tmp_path / "log"
    smi.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    smi.chmod(0o755)
    with ClockLock(FakeNVML(permitted=False), 0, "max", smi=str(smi)) as lock:
        assert lock.method == "nvidia-smi"
    assert log.read_text().splitlines() == ["-i 0 --lock-gpu-clocks=1980,1980", "-i 0 --reset-gpu-clocks"]


def test_sampler_and_throttle_mask():
    nvml = FakeNVML()
    s = ClockSampler(nvml, 0, 0.001)
    s.samples = [(0.0, 1900, 50, 0), (1.0, 1000, 80, 4), (2.0, 1900, 60, 0)]
    assert s.throttled_mask([0.5, 1.5, 2.5], 1900) == [False, True, False]
    summary = s.summary()
    assert summary["sm_clock_min_mhz"] == 1000 and summary["temperature_max_c"] == 80
    assert summary["throttle_reasons_mask"] == 4
    live = ClockSampler(nvml, 0, 0.001).start()
    import time
    time.sleep(0.05)
    live.stop()
    assert len(live.samples) >= 2 and live.samples[0][1:] == (1980, 40, 4)


def test_run_with_lock_on_resets(bench_cfg, monkeypatch):
    import harness
    import harness.job as runner

    nvml = FakeNVML()
    monkeypatch.setattr(runner, "load_nvml", lambda: nvml)
    rec = harness.run(bench_cfg(**{"device.lock_clocks": "on", "backend.name": "test_raise"}), quiet=True)
    assert rec.status == "FAILED"
    assert [c[0] for c in nvml.calls] == ["lock", "reset"]
    assert rec.tags["clock_locked_mhz"] == "1590"


class EnergyNVML(FakeNVML):
    """NVML's energy counter (mJ since the driver loaded) and memory info, as a GPU reports them."""

    def __init__(self, readings):
        super().__init__()
        self.readings = list(readings)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return self.readings.pop(0)

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=3 * 2 ** 30, total=80 * 2 ** 30, free=77 * 2 ** 30)


def test_energy_per_inference_and_memory_from_nvml():
    from harness.machine.usage import UsageMeter, usage_text

    meter = UsageMeter("cuda", EnergyNVML([1_000_000.0, 1_000_500.0]), 0).start()
    time.sleep(0.05)
    meter.stop(calls=50)
    m = meter.metrics()
    assert m["energy_per_inference_mj"] == 10.0  # 500 mJ over 50 calls
    assert 0 < m["power_mean_w"] <= 0.5 / 0.05  # 0.5 J over at least 50 ms
    assert m["memory_used_nvml_mb"] == 3072.0 and m["memory_peak_mb"] == 3072.0  # no torch allocation here
    assert m["memory_peak_rss_mb"] > 10
    assert usage_text(m["memory_peak_mb"], m["energy_per_inference_mj"]) == "3072 MB, 10 mJ"
    jumped = EnergyNVML([1_000_000.0, 1_000_000.0 + 77e6])  # 77 kJ in a moment: a counter that jumped
    jumped.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000  # mW
    meter = UsageMeter("cuda", jumped, 0).start()
    meter.stop(calls=5000)
    assert "energy_per_inference_mj" not in meter.metrics() and meter.metrics()["energy_counter_implausible_w"] > 1050
    old = UsageMeter("cuda", FakeNVML(), 0).start()  # a GPU without the counter: no energy, no failure
    old.stop(calls=5)
    assert "energy_per_inference_mj" not in old.metrics()


def test_a_backends_own_allocator_is_read_before_nvmls_whole_gpu():
    """JAX reserves 75% of the GPU when it starts: NVML's used memory (61.9 GB on an H100) is not the model's,
    its allocator's peak is; what it held when the loop began is read at the start, the peak at the end."""
    from harness.backend import AllocatorStats
    from harness.machine.usage import MB, UsageMeter

    readings = [AllocatorStats(80 * MB, 300 * MB), AllocatorStats(90 * MB, 310 * MB)]
    meter = UsageMeter("cuda", EnergyNVML([0.0, 0.0]), 0, allocator=lambda: readings.pop(0)).start()
    meter.stop(calls=5)
    m = meter.metrics()
    assert m["memory_held_mb"] == 80.0 and m["memory_prepare_peak_mb"] == 300.0
    assert m["memory_peak_allocator_mb"] == 310.0
    assert m["memory_peak_mb"] == 310.0 and m["memory_used_nvml_mb"] == 3072.0
    assert not readings
    plain = UsageMeter("cuda", EnergyNVML([0.0, 0.0]), 0, allocator=lambda: None).start()  # no counters (CPU)
    plain.stop(calls=5)
    assert plain.metrics()["memory_peak_mb"] == 3072.0 and "memory_peak_allocator_mb" not in plain.metrics()
    # XLA's compile set the peak (9.5 GB on the H100 for a model holding 305 MB): where the loop did not raise
    # it, the headline is the compiled call's own buffer plan; where it did, the allocator's measured peak
    for after, headline in ((AllocatorStats(90 * MB, 300 * MB, 120 * MB), 120.0),
                            (AllocatorStats(90 * MB, 350 * MB, 120 * MB), 350.0)):
        readings = [AllocatorStats(80 * MB, 300 * MB, 120 * MB), after]
        meter = UsageMeter("cuda", EnergyNVML([0.0, 0.0]), 0, allocator=lambda r=readings: r.pop(0)).start()
        meter.stop(calls=5)
        m = meter.metrics()
        assert m["memory_peak_mb"] == headline and m["memory_peak_allocator_mb"] == after.peak / MB
        assert ("memory_peak_call_mb" in m) == (headline == 120.0)


def test_the_memory_peak_is_the_timed_loops_and_preparation_is_apart(monkeypatch):
    """A search that timed stages with 600 MB is not what the model takes to run (60 MB): the allocator's peak
    is read and reset when the timed loop starts."""
    import torch

    from harness.machine.usage import MB, UsageMeter

    peaks, resets = [600 * MB, 60 * MB], []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: peaks.pop(0))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: resets.append(1))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 45 * MB)  # the prepared model, when the loop began
    meter = UsageMeter("cuda", None, 0).start()
    meter.stop(calls=5)
    m = meter.metrics()
    assert resets == [1] and m["memory_prepare_peak_mb"] == 600.0 and m["memory_held_mb"] == 45.0
    assert m["memory_peak_torch_mb"] == 60.0 and m["memory_peak_mb"] == 60.0


def test_a_cpu_record_has_its_peak_resident_memory(bench_cfg):
    import harness

    rec = harness.run(bench_cfg(), quiet=True)
    assert rec.status == "FINISHED" and 10 < rec.metrics["memory_peak_rss_mb"] < 24 * 1024
    assert "energy_per_inference_mj" not in rec.metrics and "memory_peak_mb" not in rec.metrics
