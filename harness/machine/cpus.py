"""Where a job's CPU work may run and with how many threads (the load-aware launcher, issue 55).

The launcher partitions the machine's cores: each device's measuring lane has cores of its own
(:attr:`Placement.lanes`), which no CPU phase runs on; the CPU slots share the rest
(:attr:`Placement.pool`), each sized to a share of it. A job's processes start on the pool with
every thread pool sized to the share (:func:`enter_job`); the process that measures moves itself,
every thread of it, onto its device's lane for the length of an exclusive phase (:func:`on_lane`)
and back afterwards. Outside the launcher nothing here changes anything."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ENV_PLACEMENT = "HARNESS_CPU_PLACEMENT"  # JSON of the sweep's Placement
#: thread pools read from the environment when a library starts (OpenMP, BLAS, Inductor's compile workers,
#: TVM's runtime): set before any import in the job's processes, inherited by what they start
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS", "TVM_NUM_THREADS")


@dataclass(frozen=True)
class Placement:
    """The sweep's partition of the cores: ``pool`` for CPU phases, one lane per device for its
    measurements, ``share`` threads for each CPU slot. ``pause`` stops the CPU-phase jobs
    (SIGSTOP) while a device is measured, for a measurement that shares nothing."""

    pool: tuple[int, ...]
    lanes: tuple[tuple[int, ...], ...]
    share: int
    pause: bool = False

    def lane(self, device: int) -> tuple[int, ...]:
        return self.lanes[device % len(self.lanes)]

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> Placement | None:
        text = os.environ.get(ENV_PLACEMENT)
        if not text:
            return None
        d = json.loads(text)
        return cls(tuple(d["pool"]), tuple(tuple(x) for x in d["lanes"]), int(d["share"]), bool(d["pause"]))

    def describe(self) -> str:
        lanes = "; ".join(f"device {i}: cores {_ranges(c)}" for i, c in enumerate(self.lanes))
        return (f"CPU phases on cores {_ranges(self.pool)}, measuring lanes {lanes}"
                + ("; CPU-phase jobs paused while a device measures" if self.pause else ""))


def _ranges(cores: tuple[int, ...]) -> str:
    """``0-5,8``: the cores as ranges."""
    runs: list[list[int]] = []
    for c in sorted(cores):
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def available() -> tuple[int, ...]:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def partition(cores: tuple[int, ...], devices: int, lane_cores: int, cpu_workers: int, pause: bool = False
              ) -> Placement:
    """Give each of ``devices`` lanes ``lane_cores`` cores of its own (the last ones: core 0 takes
    most interrupts), the rest to the CPU slots; at least one core stays with the slots, so on a
    small machine the lanes shrink, and with fewer than two cores per device plus one nothing is
    set apart (lanes and slots share every core). ``lane_cores`` 0: every lane is every core (a
    measurement that is the CPU's own work, kept apart by ``pause`` instead)."""
    cores = tuple(sorted(cores))
    lane_cores = min(lane_cores, (len(cores) - 1) // max(devices, 1))
    if lane_cores <= 0:
        lanes = tuple(cores for _ in range(devices))
        pool = cores
    else:
        reserved = cores[len(cores) - lane_cores * devices:]
        lanes = tuple(reserved[i * lane_cores:(i + 1) * lane_cores] for i in range(devices))
        pool = cores[:len(cores) - lane_cores * devices]
    return Placement(pool, lanes, max(1, len(pool) // max(cpu_workers, 1)), pause)


def size_threads(threads: int) -> None:
    """Every thread pool this process and its children start, sized to ``threads``: the environment
    (before a library reads it) and, where torch is loaded already, its intra-op pool (its inter-op
    pool where it has not started)."""
    for name in THREAD_ENV:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(threads)
        with contextlib.suppress(RuntimeError):  # once inter-op work ran, its size is fixed
            torch.set_num_interop_threads(max(1, min(threads, 4)))


def pin(cores: tuple[int, ...]) -> None:
    """Move every thread of this process (those running now, and so those it starts) onto ``cores``."""
    if not hasattr(os, "sched_setaffinity") or not cores:
        return
    tasks = Path("/proc/self/task")
    tids = [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [0]
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(tid, cores)
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, cores)


def enter_job() -> Placement | None:
    """In a job's process under the launcher (its worker, its measuring child): on the CPU pool,
    thread pools sized to the slot's share. Returns the placement (None elsewhere)."""
    placement = Placement.from_env()
    if placement is not None:
        pin(placement.pool)
        size_threads(placement.share)
    return placement


@contextlib.contextmanager
def on_lane(device: int | None) -> Iterator[None]:
    """This process on its device's measuring lane (every thread, the pools sized to the lane) for
    the block, back on the pool after it; nothing outside the launcher."""
    placement = Placement.from_env()
    if placement is None or device is None:
        yield
        return
    lane = placement.lane(device)
    pin(lane)
    size_threads(len(lane))
    try:
        yield
    finally:
        pin(placement.pool)
        size_threads(placement.share)


@contextlib.contextmanager
def alone_on_lane(device: str, lane_cores: int) -> Iterator[None]:
    """A GPU measured outside the launcher: this process on the last ``lane_cores`` cores for the block (every
    thread, the pools sized to them), where the launcher would have put its lane, so that a job measures
    under the same conditions alone and in a sweep. Nothing under the launcher (its lanes do it), for a CPU
    measurement (its work is the CPU's) or where the machine has too few cores to set any apart."""
    cores = available()
    lane = cores[len(cores) - lane_cores:] if 0 < lane_cores < len(cores) else ()
    if not lane or device == "cpu" or Placement.from_env() is not None:
        yield
        return
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None and hasattr(torch, "get_num_threads") else 0
    saved = {name: os.environ.get(name) for name in THREAD_ENV}
    pin(lane)
    size_threads(len(lane))
    try:
        yield
    finally:
        pin(cores)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if threads and torch is not None:
            torch.set_num_threads(threads)


def measuring_threads() -> int:
    """Threads a CPU measurement should run on: its lane's cores under the launcher, else 0 (the library
    decides, as it would alone). For pools fixed when they are made (an ONNX Runtime session), which are made
    in a CPU phase but run in the measurement."""
    placement = Placement.from_env()
    return len(placement.lanes[0]) if placement is not None else 0


def how_measured() -> dict[str, float]:
    """What a measurement could use and shared: its cores, its threads, the load average and the threads
    runnable now (the load average lags by a minute: a CPU phase just ended is still in it)."""
    out: dict[str, float] = {"measure_cores": float(len(available())),
                             "load_avg_1m": float(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0.0}
    with contextlib.suppress(OSError, ValueError, IndexError):  # threads runnable now, this one included
        out["runnable"] = float(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        out["measure_threads"] = float(torch.get_num_threads())
    return out
