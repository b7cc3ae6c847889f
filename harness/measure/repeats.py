"""One job measured in several processes (``runner.processes=N``): each a fresh measuring child that
prepares the backend again, as a user who restarts would. The spread between processes (allocation,
kernel choices, clocks, an autotuner's pick) is many times the CI one process reports
(BENCHMARKS.md), so with N > 1 the headline is the median of the processes' medians and its CI is the
one between processes; the within-process CI is kept under its own name."""

from __future__ import annotations

import numpy as np

from ..config import RunnerConfig
from ..machine.usage import MEMORY_SOURCES
from ..records.record import Measurement
from ..stats import Latency, between_processes
from .protocol import NOISY_CI, NOISY_CV


def combine(results: list[Measurement], batch: int, runner: RunnerConfig) -> Measurement:
    """One measurement of N: the first process's facts (its cold preparation, its check), the pooled
    samples' distribution, and the headline and CI between the processes."""
    first = results[0]
    medians = [r.metrics["latency_median_ms"] for r in results]
    pooled = [v for r in results for v in r.latencies_ms]
    metrics = dict(first.metrics)
    metrics.update(Latency.of(np.array(pooled), batch, tuple(float(q) for q in runner.percentiles)).metrics())
    metrics["latency_within_ci_rel_halfwidth"] = float(np.median([r.metrics.get("latency_ci_rel_halfwidth", np.inf)
                                                                  for r in results]))
    between = between_processes(medians)
    metrics.update(between)
    metrics["throughput_ips"] = batch / (between["latency_median_ms"] / 1000.0)
    metrics.update(_last_preparation(results[-1].metrics))
    for key in ("energy_per_inference_mj", "power_mean_w", "memory_peak_mb", "memory_peak_rss_mb",
                "memory_prepare_peak_mb", "memory_held_mb", *MEMORY_SOURCES):  # so the report names the source
        values = [r.metrics[key] for r in results if key in r.metrics]
        if values:
            metrics[key] = float(np.median(values)) if "memory" not in key else float(max(values))
    cv, ci = between["latency_process_cv"], between["latency_ci_rel_halfwidth"]
    note = (f"median of {len(results)} processes: {100 * cv:.1f}% CV between them, CI ±{100 * ci:.1f}% (within one: "
            f"±{100 * metrics['latency_within_ci_rel_halfwidth']:.2f}%)")
    # the first process's noise verdict was on its own samples; the headline's is on the processes' medians
    notes = [n for n in first.notes if not n.startswith("noisy")]
    noisy = cv > NOISY_CV or ci > NOISY_CI
    if noisy:
        notes.append(f"noisy between processes: CV {100 * cv:.1f}%, CI +-{100 * ci:.2f}% of the median")
    # seven digits: the spread between processes is recomputed from them (five made a 0.1% CI error, a failed test)
    params = {**first.params, "process_medians_ms": ",".join(f"{m:.7g}" for m in medians)}
    return Measurement(metrics=metrics, env={**first.env, "noisy": str(noisy).lower()}, params=params,
                       artifacts=first.artifacts, notes=[*notes, note], latencies_ms=pooled,
                       gpu_latencies_ms=[v for r in results for v in r.gpu_latencies_ms], device=first.device,
                       display_name=first.display_name, graph_hash=first.graph_hash)


def _last_preparation(last: dict[str, float]) -> dict[str, float]:
    """The last process's preparation beside the first's (cold): its optimization cost, its plan's phases and
    whether it reused the schedule, under ``*_last_s`` / ``search_reused_last`` (a warm rerun's figures)."""
    out = {"optimization_cost_last_s": last.get("optimization_cost_s", 0.0)}
    out.update({f"{k[:-2]}_last_s": v for k, v in last.items() if k.startswith("plan_") and k.endswith("_s")})
    if "search_reused" in last:
        out["search_reused_last"] = last["search_reused"]
    return out
