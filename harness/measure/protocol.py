"""The one measurement protocol every backend gets (runs inside the child process).

prepare (timed: "optimization cost") -> load input (timed) -> first call (timed) ->
correctness against the float64 reference (a mismatch fails the run) -> warmup by
count and time -> per-iteration sync/t0/call/sync/t1 host timing, plus CUDA events
where the backend runs on a torch CUDA stream -> stop after min iters and min time
once the median's 95% CI is tight enough, or at max time -> statistics.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ios_core.progress import Heartbeat, Progress, send_to

from ..backend import Backend, BackendError, Prepared
from ..config import RunnerConfig
from ..lifecycle import THIS
from ..machine import cpus, environment, leases
from ..machine.clocks import ClockSampler, load_nvml, nvml_index
from ..machine.leases import OwnTime, exclusive
from ..machine.usage import UsageMeter
from ..models import FormError, Model
from ..plugins import check_runnable
from ..records.record import Measurement
from ..spec import RunSpec
from ..stats import MIN_CI_SAMPLES, Latency, ci_rel_halfwidth, min_samples, missing_percentiles, prime
from .profiling import profile_ops
from .tracing import trace_run

# max |out - ref| / max |ref| allowed per precision
TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 3e-2, "bf16": 8e-2}
#: where a backend errs by more than TOLERANCE, it still passes within this many times the error of the model
#: evaluated as a correct backend would in its precision (harness.models.rounding): the model's conditioning
PRECISION_MARGIN = 4.0
#: but never beyond this: past it no check could tell a wrong output from rounding
TOLERANCE_CEILING = 0.25


class CorrectnessError(BackendError):
    pass


def relative_error(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    out = np.asarray(out, dtype=np.float64).reshape(ref.shape[0], -1)
    ref = ref.reshape(ref.shape[0], -1)
    if out.shape != ref.shape:
        raise CorrectnessError(f"output has {out.shape[1]} values per sample, the reference {ref.shape[1]}")
    if not np.isfinite(out).all():
        raise CorrectnessError("output contains NaN or Inf")
    abs_err = float(np.abs(out - ref).max())
    return abs_err, abs_err / max(float(np.abs(ref).max()), 1e-12)


STOP_REASONS = {"ci": "the median's 95% CI reached its target", "time": "runner.max_time_s was reached",
                "iters": "runner.max_iters was reached", "interrupted": "the run was interrupted"}


def _stopped() -> bool:
    """The parent was interrupted: end now and report what was measured."""
    return THIS.stopping()


def _warmup(infer: Any, handle: Any, r: RunnerConfig) -> None:
    """At least ``warmup_iters`` inferences and ``warmup_time_s`` seconds (a bar past a few seconds)."""
    t_end = time.perf_counter() + r.warmup_time_s
    i = 0
    with Progress("warmup", r.warmup_time_s, "s", interval=5.0) as bar:
        t0 = time.perf_counter()
        while (i < r.warmup_iters or time.perf_counter() < t_end) and not _stopped():
            infer(handle)
            i += 1
            if i % 16 == 0:
                bar.to(time.perf_counter() - t0, iterations=i)


def _timed_loop(prep, handle, r: RunnerConfig, sampler, x=None, meter: UsageMeter | None = None
                ) -> tuple[list[float], list[float], list[float], str]:
    """Warmup, then timed iterations (the usage ``meter`` started after the warmup); returns host ms, event
    ms, start stamps and why it stopped (a key of STOP_REASONS). Long phases show a live line (a status line
    when not on a terminal). With ``runner.include_transfers`` each iteration also copies the input ``x`` to the device
    and the output back to the host."""
    infer, sync = prep.infer, prep.synchronize
    if r.include_transfers and x is not None:
        def infer(_handle, _infer=prep.infer):
            return prep.to_numpy(_infer(prep.load_input(x)))

    prime()  # the CI's scipy import now, not between two timed iterations
    if THIS.timing is not None:  # an interrupt from now on waits (a moment) for what is timed
        THIS.timing.set()
    _warmup(infer, handle, r)
    sync()
    events = None
    if prep.cuda_stream is not None:
        import torch
        events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    host, gpu, stamps = [], [], []
    if meter is not None:
        meter.start()
    start = time.perf_counter()
    reason, last_check = "time", -1.0
    bar = Progress("measure", r.max_time_s, "s", interval=5.0)
    while True:
        sync()
        t0 = time.perf_counter_ns()
        if events is not None:
            events[0].record(prep.cuda_stream)
        infer(handle)
        if events is not None:
            events[1].record(prep.cuda_stream)
        sync()
        t1 = time.perf_counter_ns()
        host.append((t1 - t0) / 1e6)
        stamps.append(t0 / 1e9)
        if events is not None:
            gpu.append(events[0].elapsed_time(events[1]))
        n, elapsed = len(host), time.perf_counter() - start
        if n >= r.max_iters or elapsed >= r.max_time_s or _stopped():
            reason = "interrupted" if _stopped() else ("iters" if n >= r.max_iters else "time")
            if reason != "interrupted" and n >= r.min_iters and \
                    ci_rel_halfwidth(np.array(host)) <= r.ci_rel_target:
                reason = "ci"  # the cap came, but the CI target was met by then
            break
        # the CI sorts every sample: checked every 16 (and at min_iters), at most every 0.1 s past 4096
        if (n % 16 == 0 or n == r.min_iters) and (n <= 4096 or elapsed - last_check >= 0.1):
            last_check = elapsed
            ci = ci_rel_halfwidth(np.array(host))
            bar.to(elapsed, samples=n, ci=f"+-{100 * ci:.2f}% (target {100 * r.ci_rel_target:.2f}%)")
            if n >= r.min_iters and elapsed >= r.min_time_s and ci <= r.ci_rel_target:
                reason = "ci"
                break
    bar.close()
    return host, gpu, stamps, reason


BACK_TO_BACK_S = 0.1  # each of the rounds of queued calls after the timed loop lasts about this long


def _back_to_back(prep: Prepared, handle: Any, median_ms: float, rounds: int = 3) -> float:
    """One inference's GPU work with the host's time hidden: calls queued back to back (about
    :data:`BACK_TO_BACK_S` of them, 10 to 200), CUDA events around them, per call; the median of ``rounds``. A
    synchronised batch-1 call also waits for its own launch, so the median's excess over this is the host's time
    inside a call (what makes torch.compile reduce-overhead's compiles differ: BENCHMARKS.md)."""
    import torch

    calls = max(10, min(200, int(BACK_TO_BACK_S * 1e3 / max(median_ms, 1e-3))))
    per_call = []
    for _ in range(rounds):
        prep.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(prep.cuda_stream)
        for _ in range(calls):
            prep.infer(handle)
        end.record(prep.cuda_stream)
        prep.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    return float(np.median(per_call))


NOISY_CV = 0.10  # a coefficient of variation above this, or a CI half-width above NOISY_CI, is noisy
NOISY_CI = 0.02


def notes_on(metrics: dict[str, float], reason: str, r: RunnerConfig) -> list[str]:
    """What the reader of a number must know: why measuring stopped when not at the CI target,
    and whether the samples were noisy or throttled."""
    notes = []
    ci = metrics.get("latency_ci_rel_halfwidth", 0.0)
    n = int(metrics.get("samples", 0))
    if "samples" in metrics and n < MIN_CI_SAMPLES:  # its number says the backend runs; no CI or noise verdict
        return [f"smoke test: {n} samples, too few for a CI"]
    if r.smoke:
        notes.append("smoke test (runner.smoke): the numbers say the backend runs, not how fast")
    if reason != "ci":
        notes.append(f"stopped: {STOP_REASONS[reason]} before the CI target (CI +-{100 * ci:.2f}%, "
                     f"target +-{100 * r.ci_rel_target:.2f}%)")
    if metrics.get("latency_cv", 0.0) > NOISY_CV or ci > NOISY_CI:
        notes.append(f"noisy: CV {100 * metrics.get('latency_cv', 0.0):.1f}%, CI +-{100 * ci:.2f}% of the median")
    short = missing_percentiles(n, tuple(r.percentiles))
    if short:
        most = max(need for p in r.percentiles if (need := min_samples(float(p))) > n)
        notes.append(f"tails left out ({metrics.get('samples', 0):.0f} samples): {', '.join(short)} "
                     f"(runner.min_iters={most} gets them)")
    if metrics.get("cpu_busy"):
        notes.append(f"busy CPU: {metrics['cpu_busy']:.0f} threads runnable on {metrics['measure_cores']:.0f} "
                     f"cores as measuring began: other work shared them")
    if metrics.get("throttled_samples_dropped", 0.0) > 0 or metrics.get("throttle_reasons_mask", 0.0) > 0:
        notes.append(f"throttled: {metrics.get('throttled_samples_dropped', 0.0):.0f} samples dropped "
                     f"(reasons mask {metrics.get('throttle_reasons_mask', 0.0):.0f})")
    return notes


@dataclass
class _Prepared:
    model: Model
    backend: Backend
    prep: Prepared
    x: np.ndarray
    handle: Any
    out: Any


def measure(spec: RunSpec, clock_target_mhz: float = 0.0) -> Measurement:
    """Run one measurement of a resolved run (the parent's, pickled to the measuring child): prepare the
    backend, check its output against the float64 reference, time it, then the optional per-op profile
    and trace."""
    import torch

    _join_sweep()
    cfg, r = spec.cfg, spec.cfg.runner
    torch.manual_seed(r.seed)
    metrics: dict[str, float] = {}
    p = _prepare(spec, metrics)
    params = dict(p.prep.params)
    if p.prep.check_output and r.check_samples > 0:
        params["reference"] = _check_output(spec, p, metrics)
    nvml = load_nvml() if spec.device == "cuda" else None
    host, gpu, reason = _time(spec, p, nvml, clock_target_mhz, metrics)
    notes = [*p.prep.notes, *notes_on(metrics, reason, r)]
    _prediction_errors(metrics)
    artifacts = dict(p.prep.artifacts)
    label = p.prep.display_name or p.backend.label()
    if r.profile_ops:
        notes += _profile_ops(spec, p.model, metrics, artifacts)
    if r.trace:
        trace_metrics, trace_files = trace_run(p.prep, p.handle, spec.device, f"{p.model.name} {label}")
        metrics.update(trace_metrics)
        artifacts.update(trace_files)
    env = environment.capture(spec.device, nvml, cfg.device.index)
    # plain text, so the parent reads the result without importing the library (torch's TorchVersion)
    env.update({f"lib_{k}": str(v) for k, v in spec.backend.versions().items()})
    if p.prep.device_name:
        env["backend_device"] = p.prep.device_name
    env["stop_reason"] = reason
    env["noisy"] = str(any(n.startswith("noisy") for n in notes)).lower()
    env["smoke"] = str(bool(cfg.runner.smoke) or len(host) < MIN_CI_SAMPLES).lower()
    return Measurement(metrics=metrics, env=env, params=params, artifacts=artifacts, notes=notes,
                       latencies_ms=host, gpu_latencies_ms=gpu, device=spec.device, display_name=label,
                       graph_hash=p.model.graph().hash() if p.model.made("graph") else "")


def _join_sweep() -> None:
    """Under the load-aware launcher: this process on the CPU pool with its slot's threads, paused with its
    job where it leads a process group of its own (the measuring child), its progress on the launcher's
    display instead of the screen. Nothing elsewhere."""
    if cpus.enter_job() is None:
        return
    if os.getpgid(0) == os.getpid():
        leases.attach_group()
    send_to(leases.report)


def _profile_ops(spec: RunSpec, model: Model, metrics: dict[str, float], artifacts: dict[str, str]) -> list[str]:
    """Every node of the IR timed alone (runner.profile_ops); a note instead where the IR cannot take the model."""
    try:
        graph = model.graph()
    except FormError as exc:
        return [f"per-op profile skipped: {exc}"]
    op_metrics, op_files = profile_ops(graph, spec.device, spec.precision, spec.cfg.batch)
    metrics.update(op_metrics)
    artifacts.update(op_files)
    return []


def _prepare(spec: RunSpec, metrics: dict[str, float]) -> _Prepared:
    """Make the model in the form the backend takes (its time is the model's, not the backend's), prepare
    the backend (its time is the optimization cost), make one call."""
    cfg, device, backend_cls = spec.cfg, spec.device, spec.backend
    check_runnable(backend_cls, device, ready=False)  # the backend's own prepare says what else it lacks
    model = Model(spec.model, cfg.batch, cfg.runner.seed)
    span = OwnTime()
    try:
        with Heartbeat(f"model {model.name} for {backend_cls.name}"):
            form = model.take(backend_cls.forms)
    except FormError as exc:
        raise BackendError(f"backend {backend_cls.name} cannot take {model.name}: {exc}") from None
    metrics["model_build_s"] = span.stop()[0]  # a pause of the load-aware launcher's is not the model's time
    batch, precision = cfg.batch, spec.precision
    if not cfg.backend.store:  # schedules, cost caches, tuning databases: under the run's results folder
        cfg.backend.store = str(cfg.tracking.results_dir)
    backend = backend_cls(cfg.backend)  # the run's backend object, made here in the measuring child

    metrics.update({f"prepare_{k[len('measure_'):]}": v for k, v in cpus.how_measured().items()
                    if k.startswith("measure_")})  # what the CPU phase could use: its cores and threads
    if device == "cuda":  # the process's device context: not the backend's optimization
        metrics["device_start_s"] = environment.start_cuda()
    # a backend that autotunes while preparing holds its device for it (load-aware launcher; no-op elsewhere)
    hold = exclusive(lane=False) if backend_cls.times_in_prepare else contextlib.nullcontext()  # its CPU work too
    with hold:
        span = OwnTime()
        with Heartbeat(f"prepare {backend.label()} {model.name}", enabled=not backend_cls.shows_progress):
            prep = backend.prepare(model, batch, device, precision)
        # time queued for the device or a CPU slot while preparing is not the backend's cost: alone and in a
        # sweep the cost means the same; the wait is recorded beside it
        metrics["optimization_cost_s"], waited = span.stop()
        if waited > 0:
            metrics["launcher_prepare_wait_s"] = waited
        metrics.update(prep.metrics)
        if form is not None:
            prep.params.setdefault("model_form", form)

        x = model.input(cfg.runner.seed)
        t = time.perf_counter()
        handle = prep.load_input(x)
        prep.synchronize()
        metrics["load_s"] = time.perf_counter() - t
        t = time.perf_counter()
        out = prep.infer(handle)  # where cuDNN-based runtimes search their algorithms
        prep.synchronize()
        metrics["first_call_ms"] = (time.perf_counter() - t) * 1e3
    return _Prepared(model, backend, prep, x, handle, out)


def _check_output(spec: RunSpec, p: _Prepared, metrics: dict[str, float]) -> str:
    """The first call's output against the float64 reference from the model's source, within the precision's
    tolerance; returns what computed the reference."""
    precision = spec.precision
    k = min(spec.cfg.batch, spec.cfg.runner.check_samples)
    try:
        ref = p.model.reference(p.x[:k])
    except FormError as exc:
        raise BackendError(f"no float64 reference for {p.model.name}: {exc}") from None
    got = p.prep.to_numpy(p.out)[:k]
    abs_err, rel = relative_error(got, ref)
    metrics.update(max_abs_error=abs_err, max_rel_error=rel)
    tol = TOLERANCE[precision]
    if not spec.model.is_zoo:  # random-init or a file's weights may wash the input out (the zoo's do not)
        blind = p.model.reference(np.zeros_like(p.x[:k]))
        sens = float(np.abs(ref - blind).max() / max(float(np.abs(ref).max()), 1e-12))
        metrics["check_input_sensitivity"] = sens
        if sens < tol:
            warnings.warn(f"the correctness check cannot see the input: this model's output changes by only "
                          f"{sens:.2g} (relative) when the input is replaced by zeros, under the {precision} "
                          f"tolerance {tol:g}; a backend that mangled its input would pass", stacklevel=1)
    if rel > tol:
        tol = _conditioned_tolerance(p, k, ref, precision, tol, metrics)
    metrics["check_tolerance"] = tol
    if rel > tol:
        raise CorrectnessError(f"output mismatch: relative error {rel:.3g} exceeds "
                               f"{_tolerance_said(precision, tol, metrics.get('check_precision_error'))} "
                               f"(max abs error {abs_err:.3g})")
    return p.model.reference_kind


def _tolerance_said(precision: str, tol: float, honest: float | None) -> str:
    """Which tolerance a failed check applied: the fixed one, the conditioned one, or the ceiling."""
    if honest is None or tol == TOLERANCE[precision]:
        return f"the {precision} tolerance {tol:g}"
    if tol < TOLERANCE_CEILING:
        return f"{PRECISION_MARGIN:g}x the error of the model evaluated in {precision} on the CPU ({tol:.3g})"
    return (f"{TOLERANCE_CEILING:g}, the most any check allows (the model evaluated in {precision} on the CPU errs "
            f"by {honest:.3g} itself)")


def _conditioned_tolerance(p: _Prepared, k: int, ref: np.ndarray, precision: str, tol: float,
                           metrics: dict[str, float]) -> float:
    """The tolerance the model's conditioning forces (see PRECISION_MARGIN), found only where the backend
    missed the fixed one: the model's module evaluated in the precision on the CPU (no module: the fixed one)."""
    honest = p.model.in_precision(p.x[:k], precision)
    if honest is None:
        return tol
    error = relative_error(honest, ref)[1]
    metrics["check_precision_error"] = error
    return conditioned(tol, error)


def conditioned(tol: float, error: float) -> float:
    """The tolerance a check allows where the model evaluated in the precision on the CPU errs by ``error``:
    ``PRECISION_MARGIN`` times that, never below the fixed ``tol`` nor above ``TOLERANCE_CEILING``."""
    return max(tol, min(PRECISION_MARGIN * error, TOLERANCE_CEILING))


def _time(spec: RunSpec, p: _Prepared, nvml: Any, clock_target_mhz: float,
          metrics: dict[str, float]) -> tuple[list[float], list[float], str]:
    """The timed loop with clock sampling; samples taken below a locked clock are dropped before
    the statistics. Returns (host ms, GPU ms, why the loop stopped)."""
    cfg, r = spec.cfg, spec.cfg.runner
    # under the load-aware launcher: the device to itself, on its lane, while timing; alone: on a lane too
    with exclusive(), cpus.alone_on_lane(spec.device, r.lane_cores):
        nvml_gpu = nvml_index(nvml, cfg.device.index)
        sampler = ClockSampler(nvml, nvml_gpu, cfg.device.sample_interval_ms / 1e3).start()
        meter = UsageMeter(spec.device, nvml, nvml_gpu, p.prep.memory_stats)
        before = cpus.how_measured()
        try:
            host, gpu, stamps, reason = _timed_loop(p.prep, p.handle, r, sampler, p.x, meter)
        finally:
            sampler.stop()
        meter.stop(len(host))
        if p.prep.cuda_stream is not None and host and not THIS.stopping():
            metrics["gpu_latency_back_to_back_ms"] = _back_to_back(p.prep, p.handle, float(np.median(host)))
        after = cpus.how_measured()
    metrics.update({k: v for k, v in before.items() if k not in ("load_avg_1m", "runnable")})
    metrics.update(load_avg_start=before["load_avg_1m"], load_avg_end=after["load_avg_1m"])
    if spec.device == "cpu" and before.get("runnable", 0) > before["measure_cores"]:  # other work shares the CPU
        metrics["cpu_busy"] = before["runnable"]
    metrics.update(meter.metrics())
    if THIS.stopping():
        metrics["interrupted"] = 1.0  # the statistics below cover the samples taken until then
    mask = sampler.throttled_mask(stamps, float(clock_target_mhz or 0))
    kept = [h for h, m in zip(host, mask) if not m]
    metrics["throttled_samples_dropped"] = float(len(host) - len(kept))
    pcts = tuple(float(q) for q in r.percentiles)
    batch = cfg.batch
    latency = Latency.of(np.array(kept or host), batch, pcts)
    metrics.update(latency.metrics())
    if gpu:
        metrics.update(Latency.of(np.array([v for v, m in zip(gpu, mask) if not m] or gpu), batch, pcts)
                       .metrics(prefix="gpu_"))
    metrics.update(sampler.summary())
    ci = latency.ci_rel_halfwidth
    if math.isfinite(ci):  # too few samples have none (a smoke test): left out rather than infinite
        metrics["latency_ci_rel_halfwidth"] = ci
    metrics["ci_target_met"] = float(reason == "ci")
    return host, gpu, reason


def _prediction_errors(metrics: dict[str, float]) -> None:
    """How far the backend's own predictions (IOS: the DP's objective, the in-situ sum) were off."""
    for k in [k for k in metrics if k.startswith("predicted") and k.endswith("_ms")]:
        lat = metrics["latency_median_ms"]
        metrics[k[:-3] + "_error_pct"] = 100.0 * (metrics[k] - lat) / lat
    if "predicted_error_pct" in metrics:
        metrics["prediction_error_pct"] = metrics.pop("predicted_error_pct")
