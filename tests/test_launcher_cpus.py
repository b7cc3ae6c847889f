"""The load-aware launcher's hold on the host (issue 55): the cores partitioned between measuring lanes
and CPU slots, every thread pool of a job sized to its share, CPU-phase jobs paused while a device
measures, broker calls that a signal cannot cut in half, and stops that release every wait."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from harness.machine import cpus, leases
from harness.machine.leases import STOPPED, Broker

MULTICORE = pytest.mark.skipif(len(cpus.available()) < 2, reason="needs two cores to partition")


def test_partition_sets_lanes_apart_and_shares_the_rest():
    p = cpus.partition(tuple(range(16)), devices=1, lane_cores=2, cpu_workers=3)
    assert p.lanes == ((14, 15),) and p.pool == tuple(range(14)) and p.share == 4
    two = cpus.partition(tuple(range(16)), devices=2, lane_cores=2, cpu_workers=3)
    assert two.lanes == ((12, 13), (14, 15)) and two.pool == tuple(range(12))
    small = cpus.partition((0, 1), devices=1, lane_cores=2, cpu_workers=2)  # one core stays with the slots
    assert small.lanes == ((1,),) and small.pool == (0,) and small.share == 1
    cpu_sweep = cpus.partition((0, 1, 2, 3), devices=1, lane_cores=0, cpu_workers=2, pause=True)
    assert cpu_sweep.lanes == ((0, 1, 2, 3),) and cpu_sweep.pool == (0, 1, 2, 3) and cpu_sweep.share == 2
    assert cpus.Placement.from_env() is None
    assert "cores 0-13, measuring lanes device 0: cores 14-15" in p.describe()


_PROBE = """
import json, os, torch
from harness.machine import cpus
cpus.enter_job()
seen = {"pool": sorted(os.sched_getaffinity(0)), "threads": torch.get_num_threads(),
        "omp": os.environ["OMP_NUM_THREADS"], "inductor": os.environ["TORCHINDUCTOR_COMPILE_THREADS"]}
with cpus.on_lane(0):
    seen["lane"] = sorted(os.sched_getaffinity(0))
    seen["lane_threads"] = torch.get_num_threads()
seen["after"] = sorted(os.sched_getaffinity(0))
seen["after_threads"] = torch.get_num_threads()
print(json.dumps(seen))
"""


@MULTICORE
def test_a_job_runs_on_the_pool_with_its_share_and_measures_on_its_lane():
    """In a process of the sweep (torch loaded): the pool's cores, every pool sized to the share; on the lane
    for the exclusive block, every thread of it, and back."""
    cores = cpus.available()
    place = cpus.Placement(pool=cores[:1], lanes=(cores[1:],), share=1)
    env = {**os.environ, cpus.ENV_PLACEMENT: place.to_env(), "OMP_NUM_THREADS": "7"}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["pool"] == [cores[0]] and seen["threads"] == 1 and seen["omp"] == "1" and seen["inductor"] == "1"
    assert seen["lane"] == list(cores[1:]) and seen["lane_threads"] == len(cores) - 1
    assert seen["after"] == [cores[0]] and seen["after_threads"] == 1


def test_outside_the_launcher_nothing_is_pinned(monkeypatch):
    monkeypatch.delenv(cpus.ENV_PLACEMENT, raising=False)
    before = cpus.available()
    assert cpus.enter_job() is None
    with cpus.on_lane(0):
        assert cpus.available() == before


@MULTICORE
def test_a_gpu_measured_alone_times_on_a_lane_and_comes_back(monkeypatch):
    """Outside the launcher a GPU's timed loop runs on the last ``runner.lane_cores`` cores, as in a sweep;
    a CPU measurement and ``lane_cores=0`` stay on every core."""
    import torch
    monkeypatch.delenv(cpus.ENV_PLACEMENT, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    cores, threads = cpus.available(), torch.get_num_threads()
    with cpus.alone_on_lane("cuda", 1):
        assert cpus.available() == cores[-1:] and torch.get_num_threads() == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"
    assert cpus.available() == cores and torch.get_num_threads() == threads and os.environ["OMP_NUM_THREADS"] == "7"
    for device, lane in (("cpu", 1), ("cuda", 0)):
        with cpus.alone_on_lane(device, lane):
            assert cpus.available() == cores


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _stopped(pid: int, want: bool = True, within: float = 5.0) -> bool:
    """Whether ``pid`` is (``want``) or is not stopped, waiting up to ``within`` s (a signal is delivered
    asynchronously, and this machine may be busy)."""
    deadline = time.monotonic() + within
    while (_state(pid) == "T") != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return (_state(pid) == "T") == want


def test_a_measuring_job_pauses_the_cpu_phases_and_resumes_them():
    """With ``pause`` a job in a CPU phase is stopped (its worker and its measuring child's group) while
    another holds the device, starts no CPU phase meanwhile, and counts the time as waiting."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        broker = Broker(devices=1, cpu_workers=2, pause=True)
        assert broker.start("a", "compiling", worker.pid) == 0
        broker.attach("a", child.pid)  # the child leads its group
        assert broker.start("b") == 0
        broker.enter_exclusive("b")
        assert _stopped(worker.pid) and _stopped(child.pid)
        assert broker.snapshot()["jobs"]["a"]["state"] == "paused"
        late = threading.Thread(target=broker.start, args=("c",))
        late.start()
        time.sleep(0.3)
        assert broker.snapshot()["jobs"]["c"]["state"] == "queued"  # no CPU phase begins beside a measurement
        broker.leave_exclusive("b")
        late.join(5)
        assert not late.is_alive()
        assert _stopped(worker.pid, False) and _stopped(child.pid, False)
        stats = broker.stats("a")
        assert stats["paused_s"] >= 0.25 and stats["wait_s"] >= stats["paused_s"]
        assert broker.stats("b")["cpu_jobs_beside"] == [0]  # the one in a CPU phase was paused
    finally:
        for p in (worker, child):
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait()


def test_a_pause_past_its_limit_is_let_go_and_the_record_says_so():
    """A job stopped while holding what the measurement waits for (a cache's file lock) must not hang both."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        broker = Broker(devices=1, cpu_workers=2, pause=True, pause_limit_s=0.5)
        broker.start("a", "", worker.pid)
        broker.start("b")
        broker.enter_exclusive("b")
        assert _stopped(worker.pid)
        assert _stopped(worker.pid, False) and broker.snapshot()["jobs"]["a"]["state"] == "cpu"
        broker.leave_exclusive("b")
        assert broker.stats("b")["cpu_jobs_beside"] == [1]
    finally:
        os.kill(worker.pid, signal.SIGCONT)
        worker.kill()
        worker.wait()


def test_without_pause_the_record_says_how_many_jobs_computed_beside_the_measurement():
    broker = Broker(devices=1, cpu_workers=3)
    broker.start("a")
    broker.start("b")
    broker.enter_exclusive("b")  # "a" computes beside it
    broker.start("c")  # and from now "c" too
    broker.leave_exclusive("b")
    assert broker.stats("b")["cpu_jobs_beside"] == [2]


def test_a_stopped_broker_releases_a_job_waiting_for_its_device():
    broker = Broker(devices=1, cpu_workers=2)
    broker.start("a")
    broker.start("b")
    broker.enter_exclusive("a")
    got = []
    waiter = threading.Thread(target=lambda: got.append(broker.enter_exclusive("b")))
    waiter.start()
    time.sleep(0.2)
    broker.stop()
    waiter.join(5)
    assert got == [STOPPED]


def test_a_signal_during_a_broker_call_comes_after_it():
    """SIGINT inside the call is held back; the call completes and the interrupt follows it."""
    done = []
    with pytest.raises(KeyboardInterrupt):
        with leases.signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)  # the handler would have run here
            done.append(True)
    assert done == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_progress_lines_count_the_jobs_and_name_each_running_one():
    from harness.multirun.progress import lines

    snap = {"jobs": {
        "job0": {"label": "model.arch=a backend=ios", "device": 0, "state": "ended", "status": "FINISHED",
                 "phase": "", "done": None, "eta_s": None, "phase_s": 0.0},
        "job1": {"label": "model.arch=b backend=ios", "device": 0, "state": "measuring", "status": "",
                 "phase": "ios search", "done": 0.4, "eta_s": 30.0, "phase_s": 12.0},
        "job2": {"label": "model.arch=c backend=ios", "device": 0, "state": "ended", "status": "FAILED",
                 "phase": "", "done": None, "eta_s": None, "phase_s": 0.0}}}
    text = lines(snap, total=5, elapsed_s=65)
    assert text[0] == "sweep 65 s: 1 done, 1 failed, 1 running, 2 queued"
    assert text[1] == "  #1 model.arch=b backend=ios [device 0: measuring] ios search 40%, 12 s, ~30 s left"
    assert len(text) == 2


def test_the_tables_flag_a_timing_that_shared_the_machine():
    from harness.stats import quality_flags

    assert quality_flags({}, {"launcher_cpu_jobs_beside": 2.0, "cpu_busy": 1.0}) == ["beside 2 CPU jobs", "busy CPU"]
    assert quality_flags({}, {"launcher_cpu_jobs_beside": 0.0}) == []


def test_a_job_that_ends_holding_its_device_lets_the_paused_ones_go_on():
    """Its measuring child timed out or crashed: nobody leaves the exclusive phase, the job is finished."""
    broker = Broker(devices=1, cpu_workers=2, pause=True)
    broker.start("a")
    broker.start("b")
    broker.enter_exclusive("b")
    assert broker.snapshot()["jobs"]["a"]["state"] == "paused"
    broker.finish("b", "FAILED")
    assert broker.snapshot()["jobs"]["a"]["state"] == "cpu" and broker.pause_timer is None


def test_stop_releases_a_job_waiting_for_a_cpu_slot_after_measuring():
    broker = Broker(devices=1, cpu_workers=1, short_phase_s=0.0)
    broker.start("a")
    broker.enter_exclusive("a")
    broker.start("b")  # takes the one slot
    back = threading.Thread(target=broker.leave_exclusive, args=("a",))
    back.start()
    time.sleep(0.2)
    assert back.is_alive()
    broker.stop()
    back.join(5)
    assert not back.is_alive()
