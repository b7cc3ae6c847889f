"""The load-aware launcher's work (``hydra/launcher=loadaware``): the jobs of a sweep run at
once in worker processes, each bound to a device, with CPU phases overlapping and exclusive
phases (see :mod:`harness.machine.leases`) taking turns per device. The Hydra plugin class in
``hydra_plugins/harness_loadaware`` is a thin shell around :func:`launch`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ios_core.progress import send_to

from ..config import ConfigError
from ..interrupts import Terminated, raise_terminated
from ..lifecycle import THIS
from ..machine import cpus, leases
from ..machine.clocks import load_nvml, nvml_text, visible_gpus
from ..measure.isolation import die_with_parent
from . import progress

log = logging.getLogger(__name__)


@dataclass
class LoadAwareLauncherConf:
    """``hydra.launcher.*`` of the load-aware launcher."""

    _target_: str = "hydra_plugins.harness_loadaware.loadaware_launcher.LoadAwareLauncher"
    gpus: Any = "all"  # GPUs to share out, one lease each: all (those visible here) or indexes/UUIDs [0,1]
    devices: int = 0  # how many of them (0: every one); without GPUs, device slots (0: 1, the CPU)
    #: jobs in a CPU phase at once, each with an equal share of the cores no lane holds; 0: devices + 1, and with
    #: GPUs at least one per 4 such cores
    cpu_workers: int = 0
    jobs: int = 0  # jobs in flight at once; 0: cpu_workers + devices
    short_phase_s: float = 1.0  # a job whose last CPU phase was shorter starts its next without a slot (0: never)
    #: cores of its own for each GPU's measuring lane, which no CPU phase runs on (-1: 2 per GPU; 0: none set
    #: apart); a CPU sweep's measurement is CPU work: it runs on every core, kept apart by the pause
    lane_cores: int = -1
    #: stop (SIGSTOP) the jobs in a CPU phase while a device measures, none starting meanwhile (the lanes alone
    #: left GPU timings noisy: BENCHMARKS.md, issue 55)
    pause: bool = True
    pause_limit_s: float = 300.0  # a pause is let go after this long (a job stopped holding a lock the timing needs)
    progress_s: float = 30.0  # the progress lines' interval where stderr is not a terminal (0: none)


def resolve(devices: int, cpu_workers: int, jobs: int, gpus: list[dict[str, Any]] | None = None
            ) -> tuple[int, int, int]:
    """The settings with their automatic values filled in: one device per GPU (``gpus``, see
    :func:`find_gpus`), else ``devices`` slots (at least one: the CPU)."""
    if gpus:
        devices = len(gpus)
    devices = max(devices, 1)
    if cpu_workers <= 0:  # CPU phases (tuning builds, compilers) are multi-threaded: few slots, many threads each
        # with GPUs, a slot per 4 cores at least: much of a compile is one thread (Dynamo's tracing, the export),
        # and a job's pools are sized to its share, so more slots keep the device busy without oversubscribing
        cpu_workers = min(max(devices + 1, (leases.cores() - 2 * devices) // 4 if gpus else 0), leases.cores())
    return devices, cpu_workers, jobs if jobs > 0 else cpu_workers + devices


def _describe(nvml: Any, handle: Any, given: str) -> dict[str, Any]:
    uuid = nvml_text(nvml.nvmlDeviceGetUUID(handle))
    return {"id": uuid, "index": int(nvml.nvmlDeviceGetIndex(handle)), "uuid": uuid,
            "name": nvml_text(nvml.nvmlDeviceGetName(handle)), "given": given}


def find_gpus(spec: Any, device_type: str, limit: int = 0, nvml: Any = None) -> list[dict[str, Any]]:
    """The GPUs a load-aware sweep shares out, each as ``{id, index, uuid, name, given}`` where
    ``id`` is what the job's ``CUDA_VISIBLE_DEVICES`` gets (the UUID where NVML is there, so that
    CUDA's order and NVML's cannot disagree). ``spec`` is ``all`` (the GPUs visible to this
    process; none for a CPU sweep) or a comma-separated list of indexes or UUIDs; ``limit`` keeps
    the first ones. A GPU that is not there is a one-line error naming the ones that are."""
    if not isinstance(spec, (str, int)):  # a list: hydra.launcher.gpus=[0,1]
        spec = ",".join(str(g) for g in spec)
    spec = str(spec).strip()
    if spec.lower() in ("all", "") and device_type == "cpu":
        return []
    nvml = nvml if nvml is not None else load_nvml()
    wanted = ([g for g in spec.split(",") if g.strip()] if spec.lower() not in ("all", "")
              else visible_gpus())
    found: list[dict[str, Any]] = []
    if nvml is None:  # no driver: explicit entries are taken as given (a CPU sweep split in slots)
        found = [{"id": g.strip(), "index": int(g) if g.strip().isdigit() else None, "uuid": "", "name": "",
                  "given": g.strip()} for g in wanted or []]
    else:
        count = int(nvml.nvmlDeviceGetCount())
        for g in wanted if wanted is not None else [str(i) for i in range(count)]:
            g = g.strip()
            try:
                handle = (nvml.nvmlDeviceGetHandleByIndex(int(g)) if g.isdigit()
                          else nvml.nvmlDeviceGetHandleByUUID(g))
            except Exception:
                raise ConfigError(f"hydra.launcher.gpus: no GPU {g!r} here (there are {count}: indexes "
                                  f"0-{count - 1} or their UUIDs from nvidia-smi -L)") from None
            found.append(_describe(nvml, handle, g))
    if len({g["id"] for g in found}) != len(found):
        raise ConfigError(f"hydra.launcher.gpus={spec!r} names a GPU twice")
    return found[:limit] if limit > 0 else found


def placement(launcher: Any, devices: int, cpu_workers: int, gpus: list[dict[str, Any]]) -> cpus.Placement:
    """The sweep's partition of the cores (:mod:`harness.machine.cpus`) from the launcher's settings."""
    lane = int(getattr(launcher, "lane_cores", -1)) if gpus else 0  # a CPU sweep measures on every core
    return cpus.partition(cpus.available(), devices, 2 if lane < 0 else lane, cpu_workers,
                          bool(getattr(launcher, "pause", True)))


def _worker_init(placement_env: str = "", output: str = "", launcher_pid: int = 0) -> None:
    """Ctrl-C reaches every worker; one running a job is interrupted once (the job records itself
    KILLED; the launcher's forwarded signal, which follows the terminal's, must not cut that short), an
    idle one starts no job after it and is ended by the pool's shutdown (raising there would print the
    pool's traceback, and a worker that dies breaks the pool for the running jobs). The worker dies with
    the launcher (``kill -9`` of it included), and runs on the CPU pool with its slot's threads before
    anything is imported. It starts with Ctrl-C blocked (:func:`_workers_hold_ctrl_c`): one that came
    while it was importing is taken here, by the handler."""
    def on_signal(signum: int, frame: Any) -> None:
        first = not _stopping.is_set()
        _stopping.set()
        if THIS.busy and first:
            raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    die_with_parent(launcher_pid)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    progress.write_to(output)  # on a terminal: through the launcher's display
    if placement_env:
        os.environ[cpus.ENV_PLACEMENT] = placement_env
    cpus.enter_job()


_stopping = threading.Event()  # in a worker: a Ctrl-C came, no job starts


def _run_job(hydra_context: Any, task_function: Any, sweep_config: Any, singleton_state: Any, job: str,
             env: dict[str, str], devices: int, gpus: list[dict[str, Any]], label: str = "") -> Any:
    """One job in a worker process: bind a device, run it as Hydra's basic launcher would,
    and always give back what it held (a job that fails or crashes releases its device). A job
    bound to a GPU sees that GPU alone (``CUDA_VISIBLE_DEVICES``, inherited by its measuring
    child) as CUDA device 0."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals
    from omegaconf import open_dict

    Singleton.set_state(singleton_state)
    setup_globals()  # Hydra's resolvers (${now:...}, ...), left out of the state: closures do not pickle
    os.environ.update(env)
    broker = leases._client()
    assert broker is not None
    if _stopping.is_set():  # Ctrl-C came while this worker was idle: the queued job never starts
        return None
    THIS.busy = True
    status = ""
    try:
        device = broker.start(job, label, os.getpid())
        if device == leases.STOPPED:  # the sweep was interrupted before this job began: it never runs
            return None
        with open_dict(sweep_config):
            if gpus:
                os.environ["CUDA_VISIBLE_DEVICES"] = gpus[device]["id"]
                os.environ[leases.ENV_GPU] = json.dumps({**gpus[device], "slot": device})
                sweep_config.device.index = 0
            elif devices > 1:  # device slots without GPUs named: the job's device index
                sweep_config.device.index = device
        send_to(leases.report)
        ret = run_job(hydra_context=hydra_context, task_function=task_function, config=sweep_config,
                      job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
        status = str(ret._return_value) if isinstance(ret._return_value, str) else "FAILED"
        return _picklable(ret)
    except BaseException:
        status = "KILLED" if _stopping.is_set() else "FAILED"
        raise
    finally:
        broker.finish(job, status)
        THIS.busy = False


def _picklable(ret: Any) -> Any:
    """The job's result as it can travel back to the launcher: its configs as plain containers
    (Hydra's structured config classes, imported again in the worker, do not pickle) and an
    exception that does not pickle replaced by its text."""
    import pickle

    from omegaconf import OmegaConf

    ret.cfg = OmegaConf.create(OmegaConf.to_container(ret.cfg, resolve=False))
    ret.hydra_cfg = OmegaConf.create(OmegaConf.to_container(ret.hydra_cfg, resolve=False))
    try:
        pickle.dumps(ret._return_value)
    except Exception:
        value = ret._return_value
        ret._return_value = RuntimeError(f"{type(value).__name__}: {value}")
    return ret


def _job_configs(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
                 ) -> list[tuple[int, Any, str]]:
    """Each job's composed config and overrides, numbered as Hydra's basic launcher numbers them."""
    from hydra.core.utils import filter_overrides
    from omegaconf import open_dict

    configs = []
    values: dict[str, set[str]] = {}
    for overrides in job_overrides:
        for o in overrides:
            key, _, value = o.partition("=")
            values.setdefault(key, set()).add(value)
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        # what tells it apart from the sweep's other jobs, for the progress display
        label = " ".join(o for o in filter_overrides(overrides) if len(values.get(o.partition("=")[0], ())) > 1)
        cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
        with open_dict(cfg):
            cfg.hydra.job.id = idx
            cfg.hydra.job.num = idx
        configs.append((idx, cfg, label))
    return configs


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    """Run the jobs at once under a lease broker; write the makespan and device use."""
    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, setup_globals

    setup_globals()
    config, context = launcher.config, launcher.hydra_context
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    device_type = str(getattr(config.device.type, "value", config.device.type)) if "device" in config else "auto"
    gpus = find_gpus(getattr(launcher, "gpus", "all"), device_type, int(launcher.devices))
    devices, cpu_workers, jobs = resolve(int(launcher.devices), int(launcher.cpu_workers), int(launcher.jobs), gpus)
    place = placement(launcher, devices, cpu_workers, gpus)
    threads = place.share
    broker, server, address = leases.serve(devices, cpu_workers, float(launcher.short_phase_s), place.pause,
                                           float(getattr(launcher, "pause_limit_s", 300.0)))
    log.info(f"Launching {len(job_overrides)} jobs load-aware: {jobs} at once, {cpu_workers} CPU worker(s) of "
             f"{threads} thread(s), {devices} device(s) measured by one job at a time")
    log.info(f"\t{place.describe()}")
    for slot, gpu in enumerate(gpus):
        log.info(f"\tdevice {slot}: GPU {gpu['index'] if gpu['index'] is not None else gpu['given']}"
                 f"{' ' + gpu['name'] if gpu['name'] else ''}{' ' + gpu['uuid'] if gpu['uuid'] else ''}")
    configs = _job_configs(launcher, job_overrides, initial_job_idx)
    state = {**Singleton.get_state(), "omegaconf_resolvers": {}}
    env = {leases.ENV_ADDRESS: address, leases.ENV_THREADS: str(threads)}
    results: list[Any] = []
    # with GPUs to choose from, each job gets a fresh worker: CUDA_VISIBLE_DEVICES counts only
    # before CUDA starts in a process, and runner.isolate=false measures in the worker itself
    display = progress.SweepProgress(broker, len(configs), float(getattr(launcher, "progress_s", 30.0)))
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(configs)) or 1, mp_context=mp.get_context("spawn"),
                               initializer=_worker_init,
                               initargs=(place.to_env(), display.output(sweep_dir), os.getpid()),
                               max_tasks_per_child=1 if len(gpus) > 1 else None)
    futures: list[Any] = []
    old_term = _sigterm_interrupts()
    try:
        display.start()
        with _workers_hold_ctrl_c():
            futures = [pool.submit(_run_job, context, launcher.task_function, cfg, state, f"job{idx}",
                                   {**env, leases.ENV_JOB: f"job{idx}"}, devices, gpus, label)
                       for idx, cfg, label in configs]
        results = _collect([idx for idx, _, _ in configs], futures, broker, display)
        pool.shutdown()
    except KeyboardInterrupt as exc:  # the display goes on (and takes the jobs' last lines) until the end
        _interrupted(pool, futures, broker, getattr(exc, "signum", signal.SIGINT))
    finally:
        display.stop()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        summary = {**broker.summary(), "gpus": gpus, "placement": asdict(place)}
        (sweep_dir / leases.SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
        server.stop_event.set()
    log.info(leases.summary_line(summary))
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    return results


def _collect(indexes: list[int], futures: list[Any], broker: leases.Broker, display: progress.SweepProgress
             ) -> list[Any]:
    """The jobs' returns, in order; a worker that died (kill -9, out of memory) fails its job, not the sweep."""
    results = []
    for idx, future in zip(indexes, futures):
        try:
            results.append(future.result())
        except Exception as exc:
            broker.finish(f"job{idx}", "FAILED")
            display.print(f"job #{idx} ended without a result: {type(exc).__name__}: {exc}")
        except SystemExit:  # the job was interrupted in its worker and recorded KILLED there
            raise KeyboardInterrupt from None
    return results


@contextlib.contextmanager
def _workers_hold_ctrl_c() -> Any:
    """The workers started in the block (the pool starts them at the submits, and replacements from its
    manager thread, which starts here too) begin with Ctrl-C blocked until their initializer has its
    handler: one that came while a worker was still importing printed its traceback. A blocked signal
    stays blocked across exec, and stays pending, so a Ctrl-C in this window is not lost either. Here a Ctrl-C
    or SIGTERM is taken at the block's end: raised inside a worker's start, it cut the start-up data the worker
    reads off, and the worker printed that traceback (EOFError) as the sweep stopped."""
    came: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, lambda signum, frame: came.append(signum))
           for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if came:
        raise Terminated if came[0] == signal.SIGTERM else KeyboardInterrupt


def _sigterm_interrupts() -> Any:
    """Make SIGTERM raise :class:`Terminated` (main thread only); returns the old handler."""
    if threading.current_thread() is not threading.main_thread():
        return None

    return signal.signal(signal.SIGTERM, raise_terminated)


def _interrupted(pool: ProcessPoolExecutor, futures: list[Any], broker: leases.Broker,
                 signum: int = signal.SIGINT, budget_s: float = 8.0) -> None:
    """Ctrl-C or SIGTERM: jobs not started are dropped, running ones are interrupted (each records
    itself KILLED, as under the basic launcher), the workers are ended and the sweep is ended
    KILLED; one line, exit 128 + the signal, the whole tree gone within ``budget_s`` and a
    moment. A second Ctrl-C does not break this."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    deadline = time.monotonic() + budget_s
    broker.stop()  # no queued job starts, none waits on; paused jobs go on, to see the interrupt
    for future in futures:
        future.cancel()
    procs = _workers(pool)
    for proc in procs:  # Ctrl-C reached them already; `kill -INT` of this process alone did not. The signal
        with contextlib.suppress(OSError):  # that came, so that the records name it
            os.kill(proc.pid, signum)
    running = [f for f in futures if not f.cancelled()]
    # each job records itself KILLED: its measuring child gets 3 s to hand over what it timed
    _, stuck = wait(running, timeout=max(0.0, deadline - 3.0 - time.monotonic()))
    if stuck:  # a job that does not stop: SIGTERM, which it records too, then its worker is killed
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.terminate()
        wait(stuck, timeout=max(0.5, deadline - time.monotonic()))
    _end_workers(pool, procs, grace_s=max(0.1, deadline - time.monotonic()))
    if THIS.sweep is not None:
        THIS.sweep.end("KILLED")
    print("interrupted: the load-aware sweep stopped; finished and interrupted jobs keep their records "
          "(rerun the command to resume)", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def _workers(pool: ProcessPoolExecutor) -> list[Any]:
    """The pool's live worker processes."""
    return [p for p in list((getattr(pool, "_processes", None) or {}).values()) if p.is_alive()]


def _end_workers(pool: ProcessPoolExecutor, procs: list[Any], grace_s: float = 10.0) -> None:
    """Shut the pool down and make sure no worker outlives the launcher: an idle worker leaves on
    the pool's sentinel; one still in a job's signal handling is killed after ``grace_s``. (A
    worker left waiting for work kept the launcher from exiting: the pool joins its workers at
    exit, and the test waiting for the sweep's end timed out.)"""
    procs = procs + [p for p in _workers(pool) if p not in procs]
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()  # its measuring child dies with it (parent-death signal)
            proc.join(2)
