"""One job: ``harness.run(cfg)`` takes one measurement end to end, callable from Python; the
CLI is a thin layer over it. (The ``runner`` config group is the measurement protocol, see
protocol.py; ``backend.runner`` is TVM's candidate measurer.) The parent locks clocks (if
asked) and runs the protocol in a child process; the run hooks (the sweep journal, the JSON record, the
console, MLflow: harness.builtin) keep, show and send its record."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import signal
import sys
import threading
from typing import Any

from omegaconf import DictConfig

from . import interrupts
from .config import ClockLockMode, ConfigError, conf_dir, hydra_error_line
from .context import SweepJob, context
from .machine.clocks import ClockLock, load_nvml, nvml_index
from .machine.leases import job_stats
from .machine.usage import peak_memory_mb, usage_heading, usage_text
from .measure import repeats
from .measure.isolation import Interrupted, Outcome, run_inline, run_isolated
from .measure.protocol import measure
from .models import MODEL_KEYS
from .plugins import label_options, plugin_manager, register_configs
from .records import faults
from .records.background import wait as wait_for_uploads
from .records.record import Measurement, Record, Status
from .records.tracking import flatten
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


def run(cfg: Any = None, sweep: dict[str, Any] | None = None, quiet: bool = False, *,
        overrides: list[str] | None = None, background: bool = False) -> Record:
    """Measure one (model, backend, batch, device, precision); returns its :class:`Record`
    (a sweep's rerun returns the earlier one, ``skipped`` set; a run a signal stopped its KILLED one,
    ``stopped_by`` set: the caller decides whether to exit).

    ``cfg`` is a config (dict, DictConfig or BenchConfig); or give ``overrides`` as on the
    command line: ``run(overrides=["model=nasnet", "runner=quick"])``. Around the measurement the run
    hooks (:mod:`harness.hookspecs`) keep, show and send the record; ``background`` (the CLI's single runs): sent by
    a detached process, where ``tracking.background``, so the caller may exit once the record is on disk."""
    if overrides is not None:
        if cfg is not None:
            raise ConfigError("give either a config or overrides, not both")
        cfg = compose(overrides)
    elif cfg is None:
        cfg = compose([])
    spec = resolve_run(cfg)
    label = spec.label()  # the variant's name (IOS-Both, PyTorch-CUDAGraph, ...), also when the run fails
    job = SweepJob.of(sweep)
    ctx = context(spec, job, variant_name(spec, label, job), quiet, background)
    hook = plugin_manager().hook
    earlier = hook.harness_run_start(run=ctx)
    if earlier is not None:
        earlier.skipped = True
        hook.harness_run_finished(run=ctx, record=earlier)
        return earlier
    record = Record.new(spec.config, dict(ctx.tracking), ctx.run_name)
    for line in wait_for_uploads(ctx.results_dir, take_log=not quiet):  # an earlier run's upload ends first
        print(f"{line} (an earlier run's background upload)", file=sys.stderr, flush=True)
    outcome, interrupted = _measure_locked(spec, record)
    status, line, label = _take_outcome(record, spec, outcome, interrupted, label, job)
    waited = _lease_accounting(record)
    if waited >= 1.0:  # the run's time includes it; the optimization cost does not (launcher_prepare_wait_s)
        note = f"waited {waited:.0f} s for the device or a CPU slot (load-aware launcher)"
        record.notes = [*(record.notes or []), note]
        line += f" | {note}"
    record.end(status, line, label)
    record.stopped_by = interrupted.signum if interrupted is not None else None
    try:  # a stopped run: a second signal waits until the record is kept and said (interrupts.defer)
        faults.point("job.measured")
        hook.harness_run_recorded(run=ctx, record=record)
        hook.harness_run_finished(run=ctx, record=record)
        if record.stopped_by is not None:
            hook.harness_run_stopped(run=ctx, record=record)
    finally:
        interrupts.undefer()
    return record


def _take_outcome(record: Record, spec: RunSpec, outcome: Outcome, interrupted: Interrupted | None,
                  label: str, sweep: SweepJob | None) -> tuple[Status, str, str]:
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
        interrupts.defer()  # until the record is kept and said (run's end)
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


#: overrides a run's name says already (model, label, batch, precision, device); each backend adds the
#: options its label names (plugins.label_options)
NAMED = (*MODEL_KEYS, "batch", "precision", "device", "device.type")


def variant_name(spec: RunSpec, label: str, sweep: SweepJob | None) -> str:
    """The run's name: model, variant, batch, precision, device, and in a sweep the other options
    that tell its jobs apart (``inception_v3 IOS-Both bs1 tf32 cuda r=2 s=8``)."""
    name = f"{spec.model.label} {label} bs{spec.cfg.batch} {spec.precision} {spec.device}"
    if sweep is None:
        return name
    swept, named = sweep.swept, {*NAMED, *label_options()}
    extra = []
    for o in sweep.job_overrides:
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
