"""The load-aware launcher: the lease broker with simulated devices (threads as jobs), and
sweeps of jobs with known phase lengths (``backend=overhead backend.cpu_s backend.exclusive_s``)
under ``hydra/launcher=loadaware`` against the basic launcher."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.machine import leases
from harness.machine.leases import Broker

REPO = Path(__file__).resolve().parent.parent


def _overlaps(spans):
    spans = sorted(spans)
    return [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1] - 1e-6]


def _job(broker, name, cpu_s, excl_s, log, delay=0.0):
    time.sleep(delay)
    broker.start(name)
    time.sleep(cpu_s)
    log.append(("ask", name, time.monotonic()))
    broker.enter_exclusive(name)
    log.append(("got", name, time.monotonic()))
    time.sleep(excl_s)
    broker.leave_exclusive(name)
    broker.finish(name)


def _run(broker, specs):
    log = []
    threads = [threading.Thread(target=_job, args=(broker, n, c, e, log, d)) for n, c, e, d in specs]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    return log, time.monotonic() - t


def test_one_device_measures_one_job_at_a_time_first_come_first_served():
    b = Broker(devices=1, cpu_workers=4)
    specs = [(f"j{i}", 0.05 * i, 0.15, 0.0) for i in range(4)]  # they ask for the device in order j0..j3
    log, wall = _run(b, specs)
    spans = [s for j in ("j0", "j1", "j2", "j3") for s in b.stats(j)["spans"]]
    assert len(spans) == 4 and not _overlaps(spans)
    assert [n for kind, n, _ in sorted(log, key=lambda e: e[2]) if kind == "got"] == ["j0", "j1", "j2", "j3"]
    assert wall < 4 * (0.15 + 0.15)  # CPU phases overlapped: faster than one job at a time (1.2 s)
    s = b.summary()
    assert s["jobs"] == 4 and s["device_busy_s"][0] == pytest.approx(0.6, abs=0.1)
    assert 0.5 < s["device_utilization"][0] <= 1.0
    assert b.stats("j3")["wait_s"] > 0.1  # it queued behind the others


def test_n_devices_measure_n_jobs_at_once_never_two_on_one():
    b = Broker(devices=2, cpu_workers=4)
    _run(b, [(f"j{i}", 0.0, 0.3, 0.01 * i) for i in range(4)])
    by_device: dict[int, list] = {0: [], 1: []}
    for j in ("j0", "j1", "j2", "j3"):
        st = b.stats(j)
        by_device[st["device"]] += st["spans"]
    assert len(by_device[0]) == 2 and len(by_device[1]) == 2  # bound to the least loaded device
    assert not _overlaps(by_device[0]) and not _overlaps(by_device[1])
    assert _overlaps(by_device[0] + by_device[1])  # the two devices worked at the same time


def test_a_crashed_job_releases_its_device_and_cpu_slot():
    b = Broker(devices=1, cpu_workers=1)
    b.start("crash")
    b.enter_exclusive("crash")  # then the job dies without leaving
    done = threading.Event()

    def other():
        b.start("next")  # the CPU slot was given up when "crash" entered its exclusive phase
        b.enter_exclusive("next")
        b.leave_exclusive("next")
        b.finish("next")
        done.set()

    threading.Thread(target=other, daemon=True).start()
    assert not done.wait(0.3)  # blocked behind the holder
    b.finish("crash")  # what the launcher does for a job that ended without a result
    assert done.wait(5)
    assert b.stats("crash")["ended_s"] is not None


def test_cpu_phases_stay_within_the_worker_budget():
    b = Broker(devices=1, cpu_workers=2)
    inside, peak, lock = [0], [0], threading.Lock()

    def job(name):
        b.start(name)
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        time.sleep(0.1)
        with lock:
            inside[0] -= 1
        b.finish(name)

    threads = [threading.Thread(target=job, args=(f"j{i}",)) for i in range(5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    assert peak[0] == 2


def test_a_job_whose_last_cpu_phase_was_short_does_not_wait_for_a_slot():
    """One slot, held by a long CPU phase (a tuning job's search and build): a job coming off the
    device after a short CPU phase goes straight on (IOS between stage timings); after a long one
    it waits for the slot like any job."""
    b = Broker(devices=1, cpu_workers=1, short_phase_s=0.3)
    b.start("ios")  # its first CPU phase (the slot): a moment
    b.enter_exclusive("ios")
    tuner = threading.Thread(target=b.start, args=("tvm",))
    tuner.start()
    tuner.join(5)
    assert b.jobs["tvm"].holds_cpu  # the slot is the tuning job's now
    t = time.monotonic()
    b.leave_exclusive("ios")  # predicted short: no wait
    assert time.monotonic() - t < 0.2 and b.jobs["ios"].holds_cpu and b.jobs["ios"].short
    assert b._cpu_in_use() == 1  # outside the slots
    time.sleep(0.4)  # this CPU phase turns out long
    b.enter_exclusive("ios")
    came_back = threading.Event()

    def off_device():
        b.leave_exclusive("ios")
        came_back.set()
    th = threading.Thread(target=off_device)
    th.start()
    assert not came_back.wait(0.5)  # predicted long: it queues for the slot
    b.finish("tvm")
    assert came_back.wait(5) and not b.jobs["ios"].short
    th.join(5)
    b.finish("ios")
    assert Broker(devices=1, cpu_workers=1, short_phase_s=0).short_phase_s == 0  # 0: never


def test_a_stopped_broker_starts_no_job_and_releases_one_waiting_to_start():
    """After Ctrl-C no queued job starts: a new one is refused at once, one waiting for its first
    CPU slot is released with the same answer, one already running keeps its slot."""
    b = Broker(devices=1, cpu_workers=1)
    assert b.start("running") == 0
    answer: list[int] = []
    waiting = threading.Thread(target=lambda: answer.append(b.start("queued")))
    waiting.start()
    time.sleep(0.2)
    assert not answer  # no free slot: it waits
    b.stop()
    waiting.join(5)
    assert answer == [leases.STOPPED] and "queued" not in b.jobs and b.cpu_queue == []
    assert b.start("late") == leases.STOPPED and "late" not in b.jobs
    assert b.jobs["running"].holds_cpu  # interrupted by its own signal, not by the broker
    b.finish("running")
    assert b.summary()["makespan_s"] >= 0


def test_exclusive_is_a_no_op_outside_the_launcher(monkeypatch):
    monkeypatch.delenv(leases.ENV_ADDRESS, raising=False)
    with leases.exclusive() as device:
        assert device is None
    assert leases.job_stats() == {}


def test_exclusive_through_the_broker_process_interface(monkeypatch):
    """The path jobs use: a manager connection from another process's view (here: this one)."""
    broker, server, address = leases.serve(devices=1, cpu_workers=1)
    try:
        monkeypatch.setenv(leases.ENV_ADDRESS, address)
        monkeypatch.setenv(leases.ENV_JOB, "solo")
        broker.start("solo")
        with leases.exclusive() as device, leases.exclusive() as inner:  # nested: one lease
            assert device == inner == 0
            time.sleep(0.05)
        st = leases.job_stats()
        assert len(st["spans"]) == 1 and st["exclusive_s"] >= 0.05
    finally:
        server.stop_event.set()


def test_a_span_counts_only_the_part_of_a_pause_inside_it(monkeypatch):
    """A job stopped by a pause just before its optimization began (here: 0.3 s before) has only the pause's
    part inside the span left out of its cost; two separate readings of its waits took the whole pause out,
    and CI saw a cost 1 s short of its work."""
    broker, server, address = leases.serve(devices=1, cpu_workers=2, pause=True)
    try:
        monkeypatch.setenv(leases.ENV_ADDRESS, address)
        monkeypatch.setenv(leases.ENV_JOB, "a")
        broker.start("a")
        broker.start("b")
        broker.enter_exclusive("b")  # "b" measures: "a", in its CPU phase, is paused
        time.sleep(0.3)
        span = leases.OwnTime()
        time.sleep(0.2)
        broker.leave_exclusive("b")  # the pause ends 0.2 s into the span
        time.sleep(0.2)
        own, waited = span.stop()
        assert waited == pytest.approx(0.2, abs=0.08) and own == pytest.approx(0.2, abs=0.08)
        assert broker.stats("a")["paused_s"] >= 0.5  # the whole pause is still the launcher's
    finally:
        server.stop_event.set()
    monkeypatch.delenv(leases.ENV_ADDRESS)
    span = leases.OwnTime()  # outside the launcher: wall time, no waits
    time.sleep(0.05)
    own, waited = span.stop()
    assert waited == 0.0 and own >= 0.05


@pytest.mark.parametrize("times_in_prepare", [True, False])
def test_a_backend_that_times_while_preparing_holds_its_device_for_it(monkeypatch, bench_cfg, times_in_prepare):
    """Engine builds and autotuners time kernels in prepare (and cuDNN in the first call): such a
    backend's prepare runs under the job's device lease, so no other job measures meanwhile; the
    others' CPU work in prepare (searches, compiles) stays outside it."""
    import harness
    from harness_plugins.pytorch.backend import PyTorchBackend

    broker, server, address = leases.serve(devices=1, cpu_workers=1)
    seen = []
    prepare = PyTorchBackend.prepare

    def watched(self, *args):
        seen.append(broker.device_holder[0])
        return prepare(self, *args)

    monkeypatch.setattr(PyTorchBackend, "prepare", watched)
    monkeypatch.setattr(PyTorchBackend, "times_in_prepare", times_in_prepare)
    try:
        monkeypatch.setenv(leases.ENV_ADDRESS, address)
        monkeypatch.setenv(leases.ENV_JOB, "tuner")
        broker.start("tuner")
        harness.run(bench_cfg(), quiet=True)
        spans = broker.stats("tuner")["spans"]
    finally:
        server.stop_event.set()
    assert seen == (["tuner"] if times_in_prepare else [None])
    assert len(spans) == (2 if times_in_prepare else 1)  # prepare + first call, then the timed loop
    assert not _overlaps(spans)


def test_defaults_give_each_cpu_slot_a_share_of_the_cores(monkeypatch):
    """CPU phases are multi-threaded (tuning builds, compilers): by default one slot per device
    plus one, and a job's thread pools take its slot's share (every core outside the launcher)."""
    from harness.multirun.launcher import resolve
    from harness_plugins.tvm.tuning import make_builder

    assert resolve(2, 0, 0) == (2, min(3, leases.cores()), min(3, leases.cores()) + 2)
    assert resolve(1, 4, 0) == (1, 4, 5) and resolve(1, 4, 2) == (1, 4, 2)
    monkeypatch.delenv(leases.ENV_THREADS, raising=False)
    assert leases.cpu_threads() == leases.cores()
    monkeypatch.setenv(leases.ENV_THREADS, "3")
    assert leases.cpu_threads() == 3
    pytest.importorskip("tvm")
    assert make_builder("/tmp", None).threads == 3


def _sweep(tmp, launcher: str, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    cmd = [sys.executable, "-m", "harness", "-m", f"hydra/launcher={launcher}", "model=sample", "backend=overhead",
           "backend.cpu_s=10", "backend.exclusive_s=1", "batch=1,2,3,4", "runner=quick", "device=cpu",
           f"tracking.results_dir={tmp}", "tracking=off", *extra]
    t = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    return res, time.monotonic() - t


def _records(tmp):
    return [json.loads(p.read_text()) for p in sorted((Path(tmp) / "records").glob("*.json"))]


def test_loadaware_sweep_overlaps_cpu_phases_and_never_two_measurements(tmp_path):
    """Four jobs of 10 s CPU work and 1 s exclusive work each: the load-aware sweep finishes well
    before the basic launcher's, no two exclusive phases overlap, each record says what it
    waited and held, and the outcomes equal the basic launcher's."""
    la, basic = tmp_path / "la", tmp_path / "basic"
    la.mkdir()
    basic.mkdir()
    res, la_wall = _sweep(la, "loadaware", "hydra.launcher.cpu_workers=4")
    assert res.returncode == 0, res.stderr[-3000:]
    threads = max(1, leases.cores() // 4)  # a CPU sweep measures on every core: the slots share them all
    assert f"Launching 4 jobs load-aware: 5 at once, 4 CPU worker(s) of {threads} thread(s), 1 device(s)" \
        in res.stderr + res.stdout
    assert "ended without a result" not in res.stderr + res.stdout  # every job's return came back
    records = _records(la)
    assert sorted(r["status"] for r in records) == ["FINISHED"] * 4
    spans = [tuple(s) for r in records for s in json.loads(r["artifacts"]["leases.json"])["spans"]]
    assert len(spans) >= 8 and not _overlaps(spans)  # prepare's exclusive phase + the timing, per job
    for r in records:
        assert r["metrics"]["launcher_exclusive_s"] >= 1.0 and r["params"]["launcher_device"] == 0
        m = r["metrics"]
        # how it ran: its CPU phase on the slot's share, its timing on every core (a CPU sweep) with the other
        # jobs' CPU phases paused, the load around the timed loop
        assert m["prepare_threads"] == threads and m["measure_threads"] == m["measure_cores"] == leases.cores()
        assert m["launcher_cpu_jobs_beside"] == 0 and r["params"]["launcher_pause"] is True
        assert m["load_avg_start"] >= 0 and m["load_avg_end"] >= 0
        assert "launcher_wait_s" in r["metrics"]
        waited = r["metrics"]["launcher_wait_s"] >= 1.0  # then the line says so
        assert waited == any(n.startswith("waited ") and "load-aware launcher" in n for n in r["notes"] or [])
        # the optimization cost leaves the waits out (recorded apart): 10 s of CPU work and 1 s on the device,
        # as the basic launcher's below
        assert r["metrics"]["optimization_cost_s"] == pytest.approx(11.0, abs=0.8), r["metrics"]
    assert any(r["metrics"].get("launcher_prepare_wait_s", 0) >= 0.5 for r in records)  # one device: some waited
    summary = json.loads(next(la.rglob("launcher.json")).read_text())
    assert summary["jobs"] == 4 and summary["device_busy_s"][0] >= 4.0
    state = json.loads(next((la / "records" / "sweeps").glob("*/sweep.json")).read_text())
    assert state["launcher"]["makespan_s"] == pytest.approx(summary["makespan_s"])

    res, basic_wall = _sweep(basic, "basic")
    assert res.returncode == 0, res.stderr[-3000:]
    base = _records(basic)
    assert sorted((r["config"]["batch"], r["status"]) for r in base) == \
        sorted((r["config"]["batch"], r["status"]) for r in records)
    assert all("launcher_wait_s" not in r["metrics"] for r in base)
    assert all(r["metrics"]["optimization_cost_s"] == pytest.approx(11.0, abs=0.8) for r in base)
    assert basic_wall > 44  # 4 x (10 + 1) s one after another
    assert la_wall < basic_wall - 15, (la_wall, basic_wall)  # ~35 s against ~55 s here (2 cores)


def test_ctrl_c_ends_a_loadaware_sweep_with_one_line_and_keeps_the_records(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while jobs run: each
    running job records itself KILLED, a worker whose job finished leaves quietly and starts no
    queued job (it ignored the Ctrl-C between jobs: CI saw it start a 120 s job and the sweep
    outlive the test), the sweep ends KILLED, exit 130, no traceback."""
    cmd = [sys.executable, "-m", "harness", "-m", "hydra/launcher=loadaware", "hydra.launcher.cpu_workers=2",
           "model=sample", "backend=overhead", "backend.cpu_s=1,120", "batch=1,2", "runner=quick", "device=cpu",
           f"tracking.results_dir={tmp_path}", "tracking=off", "hydra.launcher.progress_s=1"]
    proc, log = _start_sweep(cmd, tmp_path)
    try:
        # a 1 s job finished and a 120 s job is 10 s into its CPU phase (its heartbeat): on a slow
        # machine a fixed sleep came before the first and after the second job's start
        _wait_for(proc, log, lambda: (1.0, "FINISHED") in _statuses(tmp_path) and _heartbeats(log) >= 1)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    err = log.read_text()
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted: the load-aware sweep stopped" in err and "Traceback" not in err
    state = json.loads(next((tmp_path / "records" / "sweeps").glob("*/sweep.json")).read_text())
    assert state["status"] == "KILLED"
    statuses = _statuses(tmp_path)
    assert (120.0, "KILLED") in statuses and (120.0, "FINISHED") not in statuses and (1.0, "FINISHED") in statuses


def _start_sweep(cmd: list[str], tmp: Path) -> tuple[subprocess.Popen, Path]:
    """A sweep in a session of its own (SIGINT's default disposition, whatever this suite
    inherited), its stderr in a file the test can read while it runs."""
    log = tmp / "stderr.txt"
    with log.open("w") as err_file:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err_file, text=True,
                                start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, log


def _heartbeats(log: Path, seconds: float = 10.0, phase: str = "prepare Overhead") -> int:
    """Jobs ``seconds`` into a phase, as the launcher's progress lines (hydra.launcher.progress_s=1) show them."""
    found = set()
    for m in re.finditer(r"^  #(\d+) .*\] " + re.escape(phase) + r"[^,\n]*, (\d+) s", log.read_text(), re.M):
        if float(m.group(2)) >= seconds:
            found.add(m.group(1))
    return len(found)


def _wait_for(proc: subprocess.Popen, log: Path, ready, limit_s: float = 150.0) -> None:
    deadline = time.monotonic() + limit_s
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)


def _statuses(tmp: Path) -> set[tuple[float, str]]:
    """(cpu_s, status) of the records saved so far."""
    found = set()
    for path in (tmp / "records").glob("*.json"):
        with contextlib.suppress(OSError, ValueError):  # one being written
            r = json.loads(path.read_text())
            found.add((r["config"]["backend"]["cpu_s"], r["status"]))
    return found


def _session_processes(sid: int) -> list[int]:
    """Live processes of a session (the launcher's, started with start_new_session)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                state, _, _, session = (d / "stat").read_text().rsplit(")", 1)[1].split()[:4]
                if int(session) == sid and state != "Z":
                    found.append(int(d.name))
    return found


def test_sigterm_to_the_launcher_stops_its_workers_jobs_too(tmp_path):
    """SIGTERM to the launcher alone (a scheduler's time limit): the running jobs are interrupted
    and recorded KILLED, no worker is left running, exit 143, one line."""
    cmd = [sys.executable, "-m", "harness", "-m", "hydra/launcher=loadaware", "hydra.launcher.cpu_workers=2",
           "model=sample", "backend=overhead", "backend.cpu_s=120", "batch=1,2", "runner=quick", "device=cpu",
           f"tracking.results_dir={tmp_path}", "tracking=off", "hydra.launcher.progress_s=1"]
    proc, log = _start_sweep(cmd, tmp_path)
    try:
        _wait_for(proc, log, lambda: _heartbeats(log) >= 2)  # both jobs in their CPU phase
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
        time.sleep(2)
        left = _session_processes(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group
    err = log.read_text()
    assert left == [], left  # no orphaned worker still running a job
    assert proc.returncode == 143, err[-3000:]
    assert "interrupted: the load-aware sweep stopped" in err and "Traceback" not in err
    assert sorted(r["status"] for r in _records(tmp_path)) == ["KILLED", "KILLED"]


class TwoGpuNVML:
    """NVML of a host with two GPUs (NVML sees both whatever CUDA_VISIBLE_DEVICES says)."""

    NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 1, 0
    UUIDS = ["GPU-aaaa-0000", "GPU-bbbb-1111"]

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < 2:
            raise RuntimeError("Invalid Argument")
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.UUIDS:
            raise RuntimeError("Not Found")
        return self.UUIDS.index(uuid)

    def nvmlDeviceGetIndex(self, h):
        return h

    def nvmlDeviceGetUUID(self, h):
        return self.UUIDS[h].encode()  # older pynvml returns bytes

    def nvmlDeviceGetName(self, h):
        return f"NVIDIA H100 #{h}"

    def nvmlSystemGetDriverVersion(self):
        return "580.0"

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetTemperature(self, h, kind):
        return 40 + h


def test_gpus_are_found_by_index_or_uuid_and_a_missing_one_is_one_line(monkeypatch):
    from harness.config import ConfigError
    from harness.multirun.launcher import find_gpus, resolve

    nvml = TwoGpuNVML()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    both = find_gpus("all", "cuda", nvml=nvml)
    assert [(g["id"], g["index"], g["name"]) for g in both] == [
        ("GPU-aaaa-0000", 0, "NVIDIA H100 #0"), ("GPU-bbbb-1111", 1, "NVIDIA H100 #1")]
    assert resolve(0, 0, 0, both)[0] == 2
    assert [g["index"] for g in find_gpus([1], "auto", nvml=nvml)] == [1]  # hydra.launcher.gpus=[1]
    assert [g["index"] for g in find_gpus("GPU-bbbb-1111,0", "cuda", nvml=nvml)] == [1, 0]
    assert [g["index"] for g in find_gpus("all", "cuda", limit=1, nvml=nvml)] == [0]  # hydra.launcher.devices=1
    assert find_gpus("all", "cpu", nvml=nvml) == []  # a CPU sweep measures on the one CPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # "all" means what this process may see
    assert [g["id"] for g in find_gpus("all", "cuda", nvml=nvml)] == ["GPU-bbbb-1111"]
    with pytest.raises(ConfigError, match=r"no GPU '2' here \(there are 2: indexes 0-1 or their UUIDs"):
        find_gpus("0,2", "cuda", nvml=nvml)
    with pytest.raises(ConfigError, match="names a GPU twice"):
        find_gpus("0,GPU-aaaa-0000", "cuda", nvml=nvml)
    monkeypatch.setattr("harness.machine.clocks.load_nvml", lambda: None)  # no driver: explicit entries as given
    assert [(g["id"], g["index"]) for g in find_gpus("0,1", "cpu")] == [("0", 0), ("1", 1)]
    assert [g["id"] for g in find_gpus("all", "cuda")] == ["1"]  # CUDA_VISIBLE_DEVICES as given
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert find_gpus("all", "cuda") == []


def test_a_job_given_one_gpu_names_nvmls_gpu_not_cudas_device_0(monkeypatch):
    """Under CUDA_VISIBLE_DEVICES=<UUID of GPU 1> CUDA calls that GPU device 0; NVML (clocks,
    names, the record's GPU) must still address GPU 1."""
    from harness.machine.clocks import nvml_index
    from harness.machine.environment import gpu_info

    nvml = TwoGpuNVML()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb-1111")
    assert nvml_index(nvml, 0) == 1
    info = gpu_info(nvml, 0)
    assert (info["gpu_index"], info["gpu_uuid"], info["gpu_name"], info["gpu_temperature_c"]) == \
        ("1", "GPU-bbbb-1111", "NVIDIA H100 #1", "41")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert (nvml_index(nvml, 0), nvml_index(nvml, 1)) == (1, 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml_index(nvml, 1) == 1 and gpu_info(nvml, 0)["gpu_uuid"] == "GPU-aaaa-0000"


def test_loadaware_sweep_over_two_gpus_uses_both_and_never_two_measurements_on_one(tmp_path):
    """Two (fake) GPUs named by index, on this CPU machine: every job sees its GPU alone through
    CUDA_VISIBLE_DEVICES (as its measuring child recorded it), both GPUs measure, the exclusive
    phases of one GPU never overlap, and the table shows the GPU per job and the makespan."""
    res, _ = _sweep(tmp_path, "loadaware", "hydra.launcher.gpus=[0,1]", "hydra.launcher.cpu_workers=4",
                    "backend.cpu_s=1", "backend.exclusive_s=2")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "4 CPU worker(s)" in out and "2 device(s) measured by one job at a time" in out
    assert "device 0: GPU 0" in out and "device 1: GPU 1" in out
    records = _records(tmp_path)
    assert sorted(r["status"] for r in records) == ["FINISHED"] * 4
    per_gpu: dict[str, list] = {}
    for r in records:
        gpu = str(r["params"]["launcher_gpu"])
        assert r["tags"]["cuda_visible_devices"] == gpu  # the measuring child saw its GPU alone
        assert str(r["params"]["launcher_gpu_index"]) == gpu and r["config"]["device"]["index"] == 0
        per_gpu.setdefault(gpu, []).extend(tuple(s) for s in json.loads(r["artifacts"]["leases.json"])["spans"])
    assert sorted(per_gpu) == ["0", "1"]  # both used
    assert all(spans and not _overlaps(spans) for spans in per_gpu.values())
    summary = json.loads(next(tmp_path.rglob("launcher.json")).read_text())
    assert [g["id"] for g in summary["gpus"]] == ["0", "1"] and summary["work_s"] > summary["makespan_s"] * 0.5
    assert "│ gpu │" in res.stdout.replace("  ", " ") or " gpu " in res.stdout
    assert "load-aware launcher: makespan" in res.stdout and "the jobs' own work" in res.stdout


def test_the_report_says_where_each_job_ran_and_the_makespan_against_the_jobs_own_work():
    from harness.machine.leases import summary_line
    from harness.report.runs import Run
    from harness.report.tables import gpu_table, launcher_table

    def run(model, gpu, wait):
        return Run({"status": "FINISHED", "label": "IOS-Both", "config": {"model": {"name": model}, "batch": 1},
                    "params": {"launcher_gpu_index": gpu}, "tags": {"gpu_uuid": f"GPU-{gpu}"},
                    "metrics": {"launcher_wait_s": wait, "launcher_cpu_s": 2.0, "launcher_exclusive_s": 3.0},
                    "artifacts": {"leases.json": json.dumps({"started_s": 1.5})}}, [])

    t = gpu_table([run("squeezenet", 0, 4.0), run("nasnet", 1, 0.0)])
    assert t.rows == ["squeezenet IOS-Both bs1", "nasnet IOS-Both bs1"]
    assert [t.text("nasnet IOS-Both bs1", c) for c in t.cols] == ["1", "GPU-1", "1.5", "0.0", "2.0", "3.0"]
    assert gpu_table([run("squeezenet", 0, 4.0), run("nasnet", 0, 0.0)]) is None  # one GPU: nothing to say
    la = {"makespan_s": 50.0, "wait_s": 4.0, "work_s": 100.0, "cpu_workers": 3, "devices": 2,
          "device_utilization": [0.5, 0.25], "gpus": [{"index": 0, "id": "GPU-0"}, {"index": 1, "id": "GPU-1"}]}
    lt = launcher_table([{"sweep_id": "s1", "launcher": la}], [2])
    assert lt.text("s1", "launcher") == "load-aware (3 CPU slots, 2 GPU(s): 0, 1)"
    assert lt.text("s1", "makespan / own work") == "0.50x" and lt.text("s1", "device busy") == "50%, 25%"
    assert summary_line(la) == ("load-aware launcher: makespan 50.0 s; busy measuring: device 0 50%, device 1 25%; "
                                "the jobs' own work 100.0 s one after another (0.50x of it)")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_workers_start_is_taken_after_their_start(sig):
    """Raised inside a worker's start, a stop cut off the start-up data the worker reads, which printed
    EOFError's traceback as the sweep stopped; it is taken once the workers are started."""
    from harness.interrupts import Terminated, raise_terminated
    from harness.multirun.launcher import _workers_hold_ctrl_c

    old = signal.signal(signal.SIGTERM, raise_terminated)
    after = []
    try:
        with pytest.raises(Terminated if sig == signal.SIGTERM else KeyboardInterrupt):
            with _workers_hold_ctrl_c():
                os.kill(os.getpid(), sig)
                time.sleep(0.2)  # a worker's start, not cut short
                after.append("started")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert after == ["started"]
    assert signal.getsignal(signal.SIGTERM) is old and signal.getsignal(signal.SIGINT) is signal.default_int_handler
