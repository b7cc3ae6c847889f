"""One job: ``harness.run(cfg)`` takes one measurement end to end, callable from Python; the
CLI is a thin layer over it. (The ``runner`` config group is the measurement protocol, see
protocol.py; ``backend.runner`` is TVM's candidate measurer.) The parent locks clocks (if
asked), runs the protocol in a child process, writes the JSON record, then logs it to MLflow."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import signal
import sys
import threading
from typing import Any

from omegaconf import DictConfig

from .config import ClockLockMode, ConfigError, conf_dir, hydra_error_line
from .machine.clocks import ClockLock, load_nvml, nvml_index
from .machine.leases import ENV_JOB, job_stats
from .machine.usage import peak_memory_mb, usage_heading, usage_text
from .measure import repeats
from .measure.isolation import Interrupted, Outcome, run_inline, run_isolated
from .measure.protocol import measure
from .models import MODEL_KEYS
from .plugins import label_options, register_configs
from .records import faults, sweeps
from .records.record import Measurement, Record, Status
from .records.tracking import deliver, delivering, flatten, records_dir, save_record
from .spec import RunSpec, resolve_run


def summary_line(model: str, optimization: str, batch: int, cost_s: float | None, latency_ms: float | None) -> str:
    """The original IOS one-liner (widths 12/15/3/8/10)."""
    # the original's "{:.0f} sec", with decimals below 10 s: a 0.43 s build does not read "0 sec"
    cost = "failed" if cost_s is None else (f"{cost_s:.2f} sec" if cost_s < 10 else f"{cost_s:.0f} sec")
    lat = "failed" if latency_ms is None else f"{latency_ms:.2f} ms"
    return (f"Model: {model:<12} | Optimization: {optimization:<15} | Batchsize: {batch:<3} | "
            f"Optimization cost: {cost:<8} | Latency: {lat:<10}")


def to_plain(cfg: Any) -> dict[str, Any]:
    """Any config form (BenchConfig, DictConfig, dict) -> the validated config as plain data."""
    return resolve_run(cfg).config


def compose(overrides: list[str]) -> DictConfig:
    """The config the CLI would build from these overrides (presets by name, ``+experiment=...``
    excepted: a sweep needs ``python -m harness -m``), through Hydra's compose API."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    try:
        if GlobalHydra.instance().is_initialized():  # inside a Hydra app: its search path is ours
            return hydra_compose("config", overrides=list(overrides))
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            return hydra_compose("config", overrides=list(overrides))
    except Exception as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(hydra_error_line(exc)) from None


def launched_apart() -> bool:
    """Whether this job was started by Submitit (a SLURM job, or a process of ``submitit_local``): the
    sweep is another process's, which collects each job's return, so an interrupted job (``scancel``
    sends SIGTERM) ends only itself and returns its KILLED record rather than ending the whole sweep."""
    return bool(os.environ.get("SUBMITIT_EXECUTOR"))


def run(cfg: Any = None, sweep: dict[str, str] | None = None, quiet: bool = False, *,
        overrides: list[str] | None = None) -> Record:
    """Measure one (model, backend, batch, device, precision); returns its :class:`Record`
    (a sweep's rerun returns the earlier one, ``skipped`` set).

    ``cfg`` is a config (dict, DictConfig or BenchConfig); or give ``overrides`` as on the
    command line: ``run(overrides=["model=nasnet", "runner=quick"])``."""
    if overrides is not None:
        if cfg is not None:
            raise ConfigError("give either a config or overrides, not both")
        cfg = compose(overrides)
    elif cfg is None:
        cfg = compose([])
    spec = resolve_run(cfg)
    plain = spec.config
    tr = plain["tracking"]
    tracking = {"enabled": tr["enabled"], "uri": tr["uri"],  # empty: the store beside wherever the record is
                "experiment": tr["experiment"], **(sweep or {})}
    label = spec.label()  # the variant's name (IOS-Both, PyTorch-CUDAGraph, ...), also when the run fails
    run_name = variant_name(spec, label, sweep)
    if sweep and sweep.get("sweep_id") and not plain["sweep"]["rerun"]:
        earlier = _finished_before(plain, sweep, run_name, quiet)
        if earlier is not None:
            return earlier
    record = Record.new(plain, tracking, run_name)
    outcome, interrupted = _measure_locked(spec, record)
    status, line, label = _take_outcome(record, spec, outcome, interrupted, label, sweep)
    waited = _lease_accounting(record)
    if waited >= 1.0:  # the run's time includes it; the optimization cost does not (launcher_prepare_wait_s)
        note = f"waited {waited:.0f} s for the device or a CPU slot (load-aware launcher)"
        record.notes = [*(record.notes or []), note]
        line += f" | {note}"
    record.end(status, line, label)
    faults.point("job.measured")
    if sweep and sweep.get("sweep_id"):  # the entry first: killed before the record is saved, a rerun finds
        sweeps.record_job(tr["results_dir"], sweep, plain, record)  # no record behind it and measures again
        faults.point("job.indexed")
    save_record(record, tr["results_dir"], pending=tr["enabled"])
    faults.point("job.saved")
    _hand_over(record, tr, tracking, sweep, line, outcome.ok, interrupted, quiet)
    return record


def _hand_over(record: Record, tr: dict[str, Any], tracking: dict[str, Any], sweep: dict[str, str] | None,
               line: str, ok: bool, interrupted: Interrupted | None, quiet: bool) -> None:
    """The saved record to the user first (its summary as soon as it is safe on disk), then to MLflow: a
    single run's now, a sweep's in one batch when the sweep ends (callbacks), a job launched apart (SLURM) its
    own; a stopping load-aware sweep's stay pending, as its tree ends within seconds."""
    in_a_sweep_stopping = interrupted is not None and bool(os.environ.get(ENV_JOB))  # a load-aware worker's job
    batched = _batched(sweep)
    send = not in_a_sweep_stopping and not batched
    launched = launched_apart()
    if not quiet and (interrupted is None or launched):
        print(line, file=sys.stdout if ok else sys.stderr, flush=True)
        if ok:
            print(stats_line(record, tr["results_dir"], delivering=send and tr["enabled"]), flush=True)
    if send:
        with delivering(tr["results_dir"]):
            deliver(record, tr["results_dir"])
    if interrupted is None:
        return
    if sweep and sweep.get("sweep_id") and not launched:
        sweeps.close(tr["results_dir"], tracking, "KILLED")  # Hydra skips its end-of-sweep callback
    where = f"{tr['results_dir']}/records" + ("/pending (python -m harness.upload logs it to MLflow)"
                                              if not send and tr["enabled"] else "")
    print(f"interrupted: {record.run_name} stopped by {interrupted}; its record is kept "
          f"(status KILLED) under {where}", file=sys.stderr, flush=True)
    if not launched:
        raise SystemExit(128 + interrupted.signum)


def _batched(sweep: dict[str, str] | None) -> bool:
    """Whether the sweep sends its jobs' records to MLflow in one batch when it ends (its callback said so), not
    each job its own; a job launched apart (SLURM: another node, at another time) still sends its own."""
    return bool(sweep and sweep.get("deliver") == sweeps.DELIVER_AT_END) and not launched_apart()


def _take_outcome(record: Record, spec: RunSpec, outcome: Outcome, interrupted: Interrupted | None,
                  label: str, sweep: dict[str, str] | None) -> tuple[Status, str, str]:
    """Put the measurement (or the error, and what an interrupted run measured) into the record;
    returns its status, summary line and the variant's label."""
    status: Status
    if outcome.ok:
        res: Measurement | None = outcome.result
        assert res is not None  # an ok outcome carries the child's result
        status = "FINISHED"
        record.run_name = variant_name(spec, label, sweep)
        record.take(res)
        label = res.display_name
        line = summary_line(spec.model.label, label, spec.cfg.batch, res.metrics["optimization_cost_s"],
                            res.metrics["latency_median_ms"])
        m = res.metrics
        usage = usage_text(peak_memory_mb(m), m.get("energy_per_inference_mj"))
        line += f" | {usage_heading(m)}: {usage}" if usage != "-" else ""
        record.notes = list(res.notes)
        line += "".join(f" | {note}" for note in record.notes)  # why it stopped early, noise, throttling
    else:
        status = "KILLED" if interrupted else "FAILED"
        record.error, record.detail = outcome.error, outcome.detail
        partial = interrupted.partial if interrupted is not None else None
        if partial:  # what was measured before the interrupt is kept
            record.take(partial)
        line = summary_line(spec.model.label, label, spec.cfg.batch, None, None) + f" | {outcome.error}"
    return status, line, label


def _measure_locked(spec: RunSpec, record: Record) -> tuple[Outcome, Interrupted | None]:
    """The measurement (in its child process unless ``runner.isolate=false``) with the GPU's clock
    locked as asked and always reset; an interrupt or a refused lock becomes an outcome."""
    runner, dev = spec.cfg.runner, spec.cfg.device
    lock = None
    if dev.lock_clocks != ClockLockMode.off:
        nvml = load_nvml()
        lock = ClockLock(nvml, nvml_index(nvml, dev.index), dev.clock,
                         required=dev.lock_clocks == ClockLockMode.required)
    interrupted: Interrupted | None = None
    try:
        with _sigterm_raises():
            target_mhz = 0.0
            if lock is not None and lock.lock():
                target_mhz = float(lock.locked_mhz or 0)
                record.tags["clock_locked_mhz"] = str(lock.locked_mhz)
            job = functools.partial(measure, clock_target_mhz=target_mhz)  # picklable for the spawned child
            outcome = (_in_processes(job, spec) if runner.isolate  # the run's spec, pickled
                       else run_inline(job, copy.deepcopy(spec)))  # measure fills in the store
    except (KeyboardInterrupt, Interrupted) as exc:
        interrupted = exc if isinstance(exc, Interrupted) else Interrupted(getattr(exc, "signum", signal.SIGINT))
        outcome = Outcome(False, None, f"interrupted by {interrupted}")
    except Exception as exc:  # clock lock required but refused, ...
        outcome = Outcome(False, None, f"{type(exc).__name__}: {exc}")
    finally:
        if lock is not None:
            lock.reset()
    record.tags["clock_locked"] = str(bool(record.tags.get("clock_locked_mhz"))).lower()
    return outcome, interrupted


def _in_processes(job: Any, spec: RunSpec) -> Outcome:
    """The measurement in ``runner.processes`` fresh children, one after another; the first failure is the
    outcome (naming which process), else one measurement of them all (:func:`repeats.combine`)."""
    runner = spec.cfg.runner
    results: list[Measurement] = []
    for i in range(runner.processes):
        outcome = run_isolated(job, spec, runner.timeout_s)
        if not outcome.ok:
            if runner.processes > 1:
                outcome.error = f"process {i + 1} of {runner.processes}: {outcome.error}"
            return outcome
        results.append(outcome.result)
    if len(results) == 1:
        return outcome
    return Outcome(True, repeats.combine(results, spec.cfg.batch, runner))


def stats_line(record: Record, results_dir: str, delivering: bool = False) -> str:
    """Under the summary line, as trtexec prints: the latency statistics the run has enough samples for,
    the throughput, the CI, and where the record went (``delivering``: where it goes once MLflow has it)."""
    m = record.metrics
    parts = [f"{k} {m[f'latency_{k}_ms']:.4g}" for k in ("min", "mean", "median") if f"latency_{k}_ms" in m]
    parts += [f"{key[len('latency_'):-len('_ms')]} {m[key]:.4g}" for key in sorted(m, key=_pct)
              if _pct(key) > 0 and _pct(key) != 50]  # p50 is the median
    base = records_dir(results_dir)
    path = base / f"{record.run_id}.json"
    if not delivering and not path.exists() and (base / "pending" / path.name).exists():
        path = base / "pending" / path.name
    ci = m.get("latency_ci_rel_halfwidth")
    between = f" between {int(m['processes'])} processes" if m.get("processes", 1) > 1 else ""
    return (f"  latency ms: {', '.join(parts)} ({int(m.get('samples', 0))} samples"
            + (f", CI +-{100 * ci:.2f}%{between}" if ci is not None else "")
            + f") | {m.get('throughput_ips', 0):.4g} images/s | record {path}")


def _pct(key: str) -> float:
    """The percentile a ``latency_p90_ms`` metric holds (0 for other keys)."""
    if not (key.startswith("latency_p") and key.endswith("_ms")):
        return 0.0
    try:
        return float(key[len("latency_p"):-len("_ms")].replace("_", "."))
    except ValueError:
        return 0.0


#: overrides a run's name says already (model, label, batch, precision, device); each backend adds the
#: options its label names (plugins.label_options)
NAMED = (*MODEL_KEYS, "batch", "precision", "device", "device.type")


def variant_name(spec: RunSpec, label: str, sweep: dict[str, Any] | None) -> str:
    """The run's name: model, variant, batch, precision, device, and in a sweep the other options
    that tell its jobs apart (``inception_v3 IOS-Both bs1 tf32 cuda r=2 s=8``)."""
    name = f"{spec.model.label} {label} bs{spec.cfg.batch} {spec.precision} {spec.device}"
    swept = {o.lstrip("+~").partition("=")[0] for o in str((sweep or {}).get("sweep_command", "")).split()
             if "=" in o and "," in o.partition("=")[2]} | set((sweep or {}).get("swept", []))  # what it varies
    named = {*NAMED, *label_options()}
    extra = []
    for o in (sweep or {}).get("job_overrides", []):
        key, _, value = o.lstrip("+~").partition("=")
        if key in swept and key not in named:
            extra.append(f"{key.rsplit('.', 1)[-1]}={value}")
    return " ".join([name, *extra])


def _lease_accounting(record: Record) -> float:
    """Under the load-aware launcher: what the job waited for and held, and on which device.
    Returns the seconds it waited (0 under other launchers)."""
    stats = job_stats()
    if not stats:
        return 0.0
    record.metrics.update({f"launcher_{k}": float(stats[k]) for k in ("wait_s", "exclusive_s", "cpu_s")})
    beside = stats.get("cpu_jobs_beside") or []
    if beside:  # other jobs in a CPU phase while this one timed: its last exclusive span, and any span
        record.metrics["launcher_cpu_jobs_beside"] = float(beside[-1])
        record.metrics["launcher_cpu_jobs_beside_max"] = float(max(beside))
    record.params["launcher_device"] = stats["device"]
    record.params["launcher_pause"] = bool(stats.get("pause"))
    gpu = stats.get("gpu") or {}
    if gpu:  # which GPU of the host: its UUID (what CUDA_VISIBLE_DEVICES named), NVML index, name
        record.params["launcher_gpu"] = gpu["id"]
        record.params["launcher_gpu_index"] = gpu["index"] if gpu["index"] is not None else gpu["given"]
        if gpu.get("name"):
            record.params["launcher_gpu_name"] = gpu["name"]
    record.artifacts["leases.json"] = json.dumps(stats, indent=1)
    return float(stats["wait_s"])


def _finished_before(plain: dict[str, Any], sweep: dict[str, Any], run_name: str, quiet: bool) -> Record | None:
    """A rerun of a sweep skips a job that an earlier attempt finished (same config, code, device)."""
    results_dir = plain["tracking"]["results_dir"]
    entry = sweeps.finished_job(results_dir, sweep, plain)
    record = sweeps.saved_record(results_dir, entry["record_id"]) if entry else None
    if record is None or entry is None:
        return None
    sweeps.mark_reused(results_dir, sweep, plain)
    if (records_dir(results_dir) / "pending" / f"{record.run_id}.json").exists() and not _batched(sweep):
        deliver(record, results_dir)  # killed while logging it: the earlier MLflow run is completed, not doubled
    if not quiet:
        lat = record.metrics.get("latency_median_ms")
        print(f"skipped: {run_name} finished earlier in this sweep ({lat:.4g} ms, record {entry['record_id'][:8]}); "
              f"sweep.rerun=true measures it again", flush=True)
    record.skipped = True
    return record


@contextlib.contextmanager
def _sigterm_raises():
    """SIGTERM ends the run like Ctrl-C does (record kept, child killed, clocks reset)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted(signum)
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


__all__ = ["flatten", "run", "summary_line", "to_plain"]
