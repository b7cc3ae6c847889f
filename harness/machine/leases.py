"""Device and CPU leases for jobs that run at once (the load-aware launcher, seed 003).

A job's work has two kinds of phases: CPU phases (model build, export, compilation, tuning
builds, the DP) that may overlap with other jobs, and *exclusive* phases (timing stages,
tuning measurements, the final latency measurement) that must have a device to themselves.
A backend marks its exclusive work with :func:`exclusive`; everything else is a CPU phase.

The :class:`Broker` lives in the launcher's process and is reached through a
``multiprocessing`` manager (address and key in :data:`ENV_ADDRESS`), so the jobs' worker
processes and the measuring children they spawn all ask the same broker. Each job is bound to
one device when it starts (the least loaded); a device that falls free goes to the job bound to
it that has waited longest, and CPU phases run within ``cpu_workers`` slots. Outside the
launcher :func:`exclusive` does nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any, cast

from . import cpus

ENV_ADDRESS = "HARNESS_LEASES"  # host:port:authkey (hex) of the broker
ENV_JOB = "HARNESS_LEASE_JOB"  # the job this process works for
ENV_GPU = "HARNESS_LEASE_GPU"  # the GPU this job's device is (JSON: id, index, uuid, name, slot)
SUMMARY_FILE = "launcher.json"  # in Hydra's sweep dir: makespan and device use, read by the sweep callback
ENV_THREADS = "HARNESS_CPU_THREADS"  # threads one CPU slot is worth ((cores - devices) // cpu_workers)
STOPPED = -1  # Broker.start's (and enter_exclusive's) answer once the sweep is stopping: the job must not go on


class SweepStopped(RuntimeError):
    """The sweep was interrupted while this job waited for its device: it must not measure."""


def cores() -> int:
    """How many cores this process may run on."""
    return max(1, len(cpus.available()))


def cpu_share() -> int | None:
    """The threads of this job's CPU slot under the load-aware launcher (None elsewhere)."""
    try:
        return max(1, int(os.environ[ENV_THREADS]))
    except (KeyError, ValueError):
        return None


def cpu_threads() -> int:
    """Threads a job's CPU phase should use: every core, or under the load-aware launcher its
    slot's share, so that jobs computing at once (each building on all its threads) do not
    oversubscribe the machine. Backends with thread pools (tuning builds) size them with this."""
    return cpu_share() or cores()


@dataclass
class JobLeases:
    """What one job waited for and held (seconds since the broker started)."""

    device: int
    started: float
    ended: float | None = None
    wait_s: float = 0.0  # waiting for a device or a CPU slot
    exclusive_s: float = 0.0
    cpu_s: float = 0.0
    spans: list[tuple[float, float]] = field(default_factory=list)  # exclusive phases (start, end)
    holds_device: bool = False
    holds_cpu: bool = False
    short: bool = False  # the CPU hold is a predicted-short phase, outside the slots
    last_cpu_s: float | None = None  # the job's previous CPU phase: the prediction of its next
    since: float = 0.0  # when the current hold began
    label: str = ""  # what the job is (its overrides), for the progress display
    pids: list[int] = field(default_factory=list)  # its worker process
    groups: list[int] = field(default_factory=list)  # its measuring children's process groups
    paused: bool = False  # stopped (SIGSTOP) while a device measures (Placement.pause)
    paused_since: float = 0.0
    paused_s: float = 0.0  # time stopped, also counted in wait_s: the launcher's, not the job's
    phase: str = ""  # what it reported doing last (model build, prepare, search 40%)
    done: float | None = None  # the phase's share done, where known
    eta_s: float | None = None  # the phase's time left, where known
    phase_since: float = 0.0
    status: str = ""  # how it ended (FINISHED, FAILED, KILLED, SKIPPED)
    beside: list[int] = field(default_factory=list)  # per exclusive span: most other jobs in a CPU phase meanwhile


class Broker:
    """Grants devices (first come, first served per device) and CPU slots to jobs.

    A job whose previous CPU phase lasted under ``short_phase_s`` runs its next one at once,
    outside the slots: IOS does a moment's work between its stage timings, and waiting each time
    for a slot held through a tuning job's long search and build phase left it (and its device)
    idle for minutes (BENCHMARKS.md). Seed 003 names such a predictive scheduler as its next step."""

    def __init__(self, devices: int, cpu_workers: int, short_phase_s: float = 1.0, pause: bool = False,
                 pause_limit_s: float = 300.0):
        if devices < 1 or cpu_workers < 1:
            raise ValueError("a broker needs at least one device and one CPU worker")
        self.devices, self.cpu_workers, self.short_phase_s = devices, cpu_workers, short_phase_s
        self.pause = pause  # no CPU phase runs while a device measures: running ones are stopped, none starts
        # a pause longer than this is let go (the CPU phases run beside the measurement, which its record says): a
        # job stopped while holding a lock the measuring one waits for (a cache's file lock) must not hang both
        self.pause_limit_s = pause_limit_s
        self.pause_timer: threading.Timer | None = None  # lets the pause in force go at its limit
        self.pause_lapsed = False
        self.t0 = time.monotonic()
        self.cond = threading.Condition()
        self.jobs: dict[str, JobLeases] = {}
        self.device_queue: list[list[str]] = [[] for _ in range(devices)]
        self.device_holder: list[str | None] = [None] * devices
        self.cpu_queue: list[str] = []
        self.busy_s = [0.0] * devices
        self.stopped = False  # the sweep was interrupted: no job starts any more

    def _now(self) -> float:
        return time.monotonic() - self.t0

    # -- job lifetime ----------------------------------------------------------------------
    def start(self, job: str, label: str = "", pid: int = 0) -> int:
        """Bind ``job`` to the least loaded device and wait for a CPU slot; returns the device,
        or :data:`STOPPED` once the sweep is stopping (the job must not start). ``pid``, the job's
        worker, is what a pause stops."""
        with self.cond:
            if self.stopped:
                return STOPPED
            active = [j.device for j in self.jobs.values() if j.ended is None]
            device = min(range(self.devices), key=lambda d: (active.count(d), d))
            self.jobs[job] = JobLeases(device=device, started=self._now(), label=label, pids=[pid] if pid else [],
                                       phase="waiting for a CPU slot", phase_since=self._now())
        return device if self._take_cpu(job, starting=True) else STOPPED

    def attach(self, job: str, group: int) -> None:
        """A process group working for ``job`` (its measuring child's): paused with it."""
        with self.cond:
            j = self.jobs.get(job)
            if j is not None and group not in j.groups:
                j.groups.append(group)
                if j.paused:
                    _signal_job(j, signal.SIGSTOP)

    def detach(self, job: str, group: int) -> None:
        """A process group that no longer works for ``job`` (its measuring child ended): its number may be reused."""
        with self.cond:
            j = self.jobs.get(job)
            if j is not None and group in j.groups:
                j.groups.remove(group)

    def report(self, job: str, phase: str, done: float | None = None, eta_s: float | None = None) -> None:
        """What ``job`` is doing now, for the progress display."""
        with self.cond:
            j = self.jobs.get(job)
            if j is not None:
                if phase != j.phase:
                    j.phase_since = self._now()
                j.phase, j.done, j.eta_s = phase, done, eta_s

    def stop(self) -> None:
        """The sweep is interrupted: jobs that ask to start from now on, or still wait for their
        first CPU slot, are told not to. A worker that was between jobs when Ctrl-C came (it
        ignores the signal then) would otherwise start the next queued job after the interrupt
        and run it to its end."""
        with self.cond:
            self.stopped = True
            self._resume()  # a stopped process would not see the interrupt
            self.cond.notify_all()

    def finish(self, job: str, status: str = "") -> dict[str, Any]:
        """Release whatever ``job`` still holds (a crashed job included); returns its accounting."""
        with self.cond:
            j = self.jobs.get(job)
            if j is None:
                return {}
            if status or not j.status:
                j.status = status or "ENDED"
            if j.holds_device:  # its measuring child died holding it (a timeout, a crash)
                self._release_device(job, j)
            if j.holds_cpu:
                self._drop_cpu(j)
            for q in self.device_queue:
                if job in q:
                    q.remove(job)
            if job in self.cpu_queue:
                self.cpu_queue.remove(job)
            j.ended = self._now()
            self.cond.notify_all()
            return self.stats(job)

    # -- phases ----------------------------------------------------------------------------
    def enter_exclusive(self, job: str) -> int:
        """Leave the CPU slot and wait until the job's device is free and the job is first in line;
        returns the device, or :data:`STOPPED` if the sweep stops meanwhile. With ``pause`` the jobs
        in a CPU phase are stopped until no device measures."""
        with self.cond:
            j = self.jobs[job]
            if j.holds_cpu:
                self._drop_cpu(j)
                self.cond.notify_all()
            queue = self.device_queue[j.device]
            queue.append(job)
            asked = self._now()
            while not (queue[0] == job and self.device_holder[j.device] is None):
                if self.stopped:
                    queue.remove(job)
                    self.cond.notify_all()
                    return STOPPED
                self.cond.wait()
            queue.pop(0)
            self.device_holder[j.device] = job
            j.holds_device, j.since = True, self._now()
            j.wait_s += j.since - asked
            if self._pausing():
                for other in self.jobs.values():
                    if other.holds_cpu and not other.paused and other is not j:
                        other.paused, other.paused_since = True, self._now()
                        _signal_job(other, signal.SIGSTOP)
                if self.pause_timer is None:  # a pause begins (devices measuring one after another keep it)
                    self.pause_timer = threading.Timer(self.pause_limit_s, self._pause_expired)
                    self.pause_timer.daemon = True
                    self.pause_timer.start()
            j.beside.append(self._cpu_running())
            return j.device

    def _pausing(self) -> bool:
        """Whether CPU phases stand now: the pause is on, a device measures, and it has not lapsed."""
        return self.pause and not self.pause_lapsed and not self.stopped

    def _pause_expired(self) -> None:
        with self.cond:
            if self.pause_timer is None or not any(self.device_holder):
                return
            self.pause_lapsed = True  # until no device measures
            self._resume()
            for holder in filter(None, self.device_holder):
                self.jobs[holder].beside[-1] = max(self.jobs[holder].beside[-1], self._cpu_running())
            self.cond.notify_all()

    def leave_exclusive(self, job: str) -> None:
        with self.cond:
            j = self.jobs[job]
            if j.holds_device:
                self._release_device(job, j)
                self.cond.notify_all()
        self._take_cpu(job)

    def _release_device(self, job: str, j: JobLeases) -> None:
        """``job`` gives its device back; once no device measures, the paused jobs go on."""
        self._drop_device(job, j)
        if not any(self.device_holder):
            self._resume()
            self.pause_lapsed = False
            if self.pause_timer is not None:
                self.pause_timer.cancel()
                self.pause_timer = None

    # -- internals (called with the condition held, except _take_cpu) -----------------------
    def _take_cpu(self, job: str, starting: bool = False) -> bool:
        """Wait for a CPU slot; False if the sweep stopped while a ``starting`` job waited for its first."""
        with self.cond:
            j = self.jobs[job]
            if (j.last_cpu_s is not None and j.last_cpu_s < self.short_phase_s  # predicted short: no wait
                    and not (self._pausing() and any(self.device_holder))):
                self._took_cpu(j, short=True)
                return True
            self.cpu_queue.append(job)
            asked = self._now()
            while not (self.cpu_queue[0] == job and self._cpu_in_use() < self.cpu_workers
                       and not (self._pausing() and any(self.device_holder))):
                if (self.stopped or j.ended is not None) and job in self.cpu_queue:  # no slot is worth waiting for
                    self.cpu_queue.remove(job)
                    if starting and j.ended is None:  # not started yet: it never will
                        del self.jobs[job]  # it never ran: not in the makespan
                    self.cond.notify_all()
                    return False
                self.cond.wait()
            self.cpu_queue.pop(0)
            self._took_cpu(j)
            j.wait_s += j.since - asked
            self.cond.notify_all()  # the next in line may fit too
            return True

    def _took_cpu(self, j: JobLeases, short: bool = False) -> None:
        """``j`` holds a CPU slot from now: every exclusive span running now has one more job beside it."""
        j.holds_cpu, j.short, j.since = True, short, self._now()
        running = self._cpu_running()
        for holder in filter(None, self.device_holder):
            h = self.jobs[holder]
            h.beside[-1] = max(h.beside[-1], running)

    def _cpu_running(self) -> int:
        """Jobs in a CPU phase and not paused."""
        return sum(j.holds_cpu and not j.paused for j in self.jobs.values())

    def _resume(self) -> None:
        for j in self.jobs.values():
            if j.paused:
                self._unpause(j)

    def _unpause(self, j: JobLeases) -> None:
        """Let ``j`` go on; the time it stood counts as waiting (its optimization cost leaves waits out), not as
        CPU work (nor as the CPU phase that predicts its next)."""
        stood = self._now() - j.paused_since
        j.paused_s += stood
        j.wait_s += stood
        j.since += stood
        j.paused = False
        _signal_job(j, signal.SIGCONT)

    def _cpu_in_use(self) -> int:
        return sum(j.holds_cpu and not j.short for j in self.jobs.values())

    def _drop_cpu(self, j: JobLeases) -> None:
        j.last_cpu_s = self._now() - j.since
        j.cpu_s += j.last_cpu_s
        j.holds_cpu = j.short = False
        if j.paused:  # finished or failed while stopped (a crash): its processes go on, to end
            self._unpause(j)

    def _drop_device(self, job: str, j: JobLeases) -> None:
        now = self._now()
        j.exclusive_s += now - j.since
        j.spans.append((j.since, now))
        self.busy_s[j.device] += now - j.since
        j.holds_device = False
        if self.device_holder[j.device] == job:
            self.device_holder[j.device] = None

    # -- accounting ------------------------------------------------------------------------
    def stats(self, job: str) -> dict[str, Any]:
        with self.cond:
            j = self.jobs.get(job)
            if j is None:
                return {}
            return {"device": j.device, "wait_s": j.wait_s, "exclusive_s": j.exclusive_s, "cpu_s": j.cpu_s,
                    "started_s": j.started, "ended_s": j.ended, "spans": list(j.spans),
                    "cpu_jobs_beside": list(j.beside), "pause": self.pause, "paused_s": j.paused_s}

    def clock(self, job: str) -> tuple[float, float]:
        """Now and the job's waits so far, read together (a pause in force counted up to now): a span's own
        time is the difference of two readings, and a pause just outside the span stays out of it."""
        with self.cond:
            now, j = self._now(), self.jobs.get(job)
            if j is None:
                return now, 0.0
            return now, j.wait_s + (now - j.paused_since if j.paused else 0.0)

    def snapshot(self) -> dict[str, Any]:
        """Every job's state now, for the progress display."""
        with self.cond:
            now = self._now()
            jobs = {}
            for name, j in self.jobs.items():
                state = ("ended" if j.ended is not None else "measuring" if j.holds_device
                         else "paused" if j.paused else "cpu" if j.holds_cpu
                         else "waiting for its device" if any(name in q for q in self.device_queue) else "queued")
                jobs[name] = {"label": j.label, "device": j.device, "state": state, "status": j.status,
                              "phase": j.phase, "done": j.done, "eta_s": j.eta_s,
                              "phase_s": now - j.phase_since, "elapsed_s": now - j.started}
            return {"now": now, "jobs": jobs, "stopped": self.stopped}

    def summary(self) -> dict[str, Any]:
        """The sweep's makespan and each device's share of it spent in exclusive phases."""
        with self.cond:
            ends = [j.ended for j in self.jobs.values() if j.ended is not None]
            starts = [j.started for j in self.jobs.values()]
            makespan = (max(ends) - min(starts)) if ends and starts else 0.0
            # each job's time less its waits: the sweep one job after another on one device
            work = sum(j.ended - j.started - j.wait_s for j in self.jobs.values() if j.ended is not None)
            return {"makespan_s": makespan, "jobs": len(self.jobs), "devices": self.devices,
                    "cpu_workers": self.cpu_workers, "device_busy_s": list(self.busy_s),
                    "device_utilization": [b / makespan if makespan > 0 else 0.0 for b in self.busy_s],
                    "wait_s": sum(j.wait_s for j in self.jobs.values()), "work_s": work}


def _signal_job(j: JobLeases, signum: int) -> None:
    """``signum`` to a job's worker and its measuring children's groups (those that still exist)."""
    for pid in j.pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)
    for group in j.groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signum)


def summary_line(summary: dict[str, Any]) -> str:
    """The launcher's result in one line: makespan, each device's busy share, and the makespan
    against the jobs' own work one after another (what one device, one job at a time, would take,
    less the start-up of each job's process)."""
    busy = ", ".join(f"device {d} {u:.0%}" for d, u in enumerate(summary.get("device_utilization", [])))
    line = f"load-aware launcher: makespan {summary['makespan_s']:.1f} s; busy measuring: {busy}"
    work, span = summary.get("work_s"), summary["makespan_s"]
    if work:
        line += f"; the jobs' own work {work:.1f} s one after another ({span / work:.2f}x of it)"
    return line


class _Server(BaseManager):
    pass


class _Client(BaseManager):
    pass


def _serve(server: Any) -> None:
    try:
        server.serve_forever()  # until server.stop_event is set
    except SystemExit:  # how it ends, made for a process of its own; here a thread
        pass


def serve(devices: int, cpu_workers: int, short_phase_s: float = 1.0, pause: bool = False,
          pause_limit_s: float = 300.0) -> tuple[Broker, Any, str]:
    """Start a broker on loopback; returns (broker, manager to shut down, address for ENV_ADDRESS)."""
    broker = Broker(devices, cpu_workers, short_phase_s, pause, pause_limit_s)
    key = os.urandom(16)
    _Server.register("broker", callable=lambda: broker)
    manager = _Server(address=("127.0.0.1", 0), authkey=key)
    server = manager.get_server()
    threading.Thread(target=_serve, args=(server,), daemon=True, name="lease-broker").start()
    host, port = cast(tuple[str, int], server.address)
    return broker, server, f"{host}:{port}:{key.hex()}"


_local: dict[str, Any] = {}  # this process's connection to the broker (per pid: not shared across fork)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back for the block and delivered after it. A call to the broker is a
    request and its reply on one connection: an interrupt between the two left the reply unread, and
    every later call read the one before's (``finish`` got -1, the next ``start`` ``{}``, which is not
    STOPPED, and a queued job started after the interrupt). Python runs handlers in the main thread only,
    so only there is anything to hold back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


class _Calls:
    """The broker's proxy with every call made whole (:func:`signals_deferred`)."""

    def __init__(self, proxy: Any):
        self._proxy = proxy

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._proxy, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with signals_deferred():
                return method(*args, **kwargs)
        return call


def _client() -> Any | None:
    address = os.environ.get(ENV_ADDRESS)
    if not address or not os.environ.get(ENV_JOB):
        return None
    if _local.get("pid") != os.getpid() or _local.get("address") != address:
        host, port, key = address.rsplit(":", 2)
        _Client.register("broker")
        manager = _Client(address=(host, int(port)), authkey=bytes.fromhex(key))
        with signals_deferred():
            manager.connect()
            proxy = manager.broker()  # type: ignore[attr-defined]
        _local.update(pid=os.getpid(), address=address, broker=_Calls(proxy), depth=0, reported=0.0)
    return _local["broker"]


@contextlib.contextmanager
def exclusive(lane: bool = True) -> Iterator[int | None]:
    """Work that needs the device to itself (timing). Under the load-aware launcher it waits
    for the job's device and holds it until the block ends, this process on the device's
    measuring lane (:func:`cpus.on_lane`; ``lane=False``: on the CPU pool, for a hold whose work is
    mostly CPU, an engine build or autotuning compile); elsewhere it does nothing. Nested blocks
    hold the one lease; yields the device index (None outside the launcher)."""
    broker = _client()
    if broker is None:
        yield None
        return
    job = os.environ[ENV_JOB]
    if _local["depth"]:
        _local["depth"] += 1
        try:
            yield _local["device"]
        finally:
            _local["depth"] -= 1
        return
    try:
        device = broker.enter_exclusive(job)
        if device == STOPPED:
            raise SweepStopped("the sweep was interrupted while this job waited for its device")
        _local["device"] = device
        _local["depth"] = 1
        with cpus.on_lane(device) if lane else contextlib.nullcontext():
            yield device
    finally:
        _local["depth"] = 0
        broker.leave_exclusive(job)  # also where an interrupt came between the grant and the block


def attach_group() -> None:
    """This process leads a process group that works for the job (a measuring child): paused with it."""
    broker = _client()
    if broker is not None:
        broker.attach(os.environ[ENV_JOB], os.getpgid(0))


def detach_group(group: int) -> None:
    """The measuring child that led ``group`` has ended (called by its parent)."""
    broker = _client()
    if broker is not None:
        with contextlib.suppress(Exception):
            broker.detach(os.environ[ENV_JOB], group)


def report(phase: str, done: float | None = None, eta_s: float | None = None, every_s: float = 1.0) -> None:
    """What this job is doing, for the launcher's progress display (at most one call a second, but a
    change of phase); nothing outside the launcher."""
    broker = _client()
    if broker is None:
        return
    now = time.monotonic()
    if phase == _local.get("phase") and now - _local.get("reported", 0.0) < every_s:
        return
    _local.update(phase=phase, reported=now)
    with contextlib.suppress(Exception):  # the display is not worth failing a job for
        broker.report(os.environ[ENV_JOB], phase, done, eta_s)


def job_stats() -> dict[str, Any]:
    """This job's lease accounting so far ({} outside the launcher), with its GPU where the
    launcher gave it one."""
    broker = _client()
    if broker is None:
        return {}
    stats = dict(broker.stats(os.environ[ENV_JOB]))
    with contextlib.suppress(KeyError, ValueError):
        stats["gpu"] = json.loads(os.environ[ENV_GPU])
    return stats


class OwnTime:
    """A span of the job's own work: its wall time less the load-aware launcher's waits within it (queued for
    a device or a CPU slot, stopped by a pause), so a cost means the same alone and in a sweep. Both ends are
    read by the broker at once: a pause that began just before the span, or just after it, is not counted in
    it (CI saw an optimization cost 1 s short of its work when the snapshots were taken apart). Outside the
    launcher it is plain wall time."""

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float]:
        broker = _client()
        if broker is None:
            return time.perf_counter(), 0.0
        return tuple(broker.clock(os.environ[ENV_JOB]))  # type: ignore[return-value]

    def stop(self) -> tuple[float, float]:
        """(own seconds, seconds waited) since the span began."""
        end = self._read()
        waited = end[1] - self._start[1]
        return end[0] - self._start[0] - waited, waited


def read_summary(hydra_sweep_dir: str | Path) -> dict[str, Any] | None:
    """The load-aware launcher's summary of a sweep (None for other launchers)."""
    try:
        return json.loads((Path(hydra_sweep_dir) / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return None
