"""Latency statistics: median headline, tails gated by sample count, a distribution-free
95% confidence interval of the median, Tukey outliers counted but never dropped."""

from __future__ import annotations

import math

import numpy as np

P90_MIN_SAMPLES = 64
P99_MIN_SAMPLES = 662
#: the least samples for a percentile to be reported: about 6.5 samples beyond it (p50 is the median)
MIN_SAMPLES = {50.0: 1, 90.0: P90_MIN_SAMPLES, 95.0: 128, 99.0: P99_MIN_SAMPLES, 99.9: 6620}


def min_samples(p: float) -> int:
    return MIN_SAMPLES.get(float(p), math.ceil(6.5 / max(1e-9, 1 - float(p) / 100)))


def percentile_name(p: float) -> str:
    return f"latency_p{float(p):g}_ms".replace(".", "_")


def median_ci(samples: np.ndarray, z: float = 1.96) -> tuple[float, float]:
    """95% CI of the median from order statistics (normal approximation of the
    binomial): ranks n/2 -+ z*sqrt(n)/2."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = len(x)
    if n == 0:
        return (math.nan, math.nan)
    half = z * math.sqrt(n) / 2
    lo = max(int(math.floor(n / 2 - half)), 0)
    hi = min(int(math.ceil(n / 2 + half)), n - 1)
    return float(x[lo]), float(x[hi])


def ci_rel_halfwidth(samples: np.ndarray) -> float:
    lo, hi = median_ci(samples)
    med = float(np.median(samples))
    return (hi - lo) / 2 / med if med > 0 else math.inf


def summarize(samples_ms: np.ndarray, batch: int, percentiles: tuple[float, ...] = (90.0, 99.0)) -> dict[str, float]:
    """Statistics of per-iteration latencies in ms (each percentile only with enough samples:
    :func:`min_samples`)."""
    x = np.asarray(samples_ms, dtype=np.float64)
    n = len(x)
    if n == 0:
        raise ValueError("no latency samples")
    med = float(np.median(x))
    q1, q3 = np.percentile(x, [25, 75])
    iqr = q3 - q1
    lo, hi = median_ci(x)
    out = {
        "latency_median_ms": med, "latency_mean_ms": float(x.mean()), "latency_min_ms": float(x.min()),
        "latency_max_ms": float(x.max()), "latency_std_ms": float(x.std(ddof=1)) if n > 1 else 0.0,
        "latency_ci_low_ms": lo, "latency_ci_high_ms": hi, "latency_iqr_ms": float(iqr),
        "samples": float(n), "outliers": float(np.sum((x < q1 - 1.5 * iqr) | (x > q3 + 1.5 * iqr))),
        "throughput_ips": batch / (med / 1000.0) if med > 0 else math.inf,
    }
    out["latency_cv"] = out["latency_std_ms"] / out["latency_mean_ms"] if out["latency_mean_ms"] > 0 else 0.0
    for p in percentiles:
        if n >= min_samples(p):
            out[percentile_name(p)] = float(np.percentile(x, p))
    return out


def missing_percentiles(n: int, percentiles: tuple[float, ...]) -> list[str]:
    """Percentiles asked for that too few samples leave out, said so (never silently absent)."""
    return [f"p{float(p):g} needs {min_samples(p)}" for p in percentiles if n < min_samples(p)]


def quality_flags(tags: dict[str, str], metrics: dict[str, float]) -> list[str]:
    """Short flags a table puts beside a number: ``noisy`` (the measurement said so: CV over 10% or
    a CI over 2%), ``capped`` (a time or iteration cap stopped it before its CI target),
    ``interrupted``, and what it shared: ``beside N CPU jobs`` (the load-aware launcher's CPU phases ran
    while it timed), ``busy CPU`` (a CPU timing began with more threads runnable than cores). Failed jobs have no
    number and show why instead."""
    flags = []
    if str(tags.get("noisy", "")).lower() == "true":
        flags.append("noisy")
    reason = tags.get("stop_reason")
    if reason in ("time", "iters"):
        flags.append("capped")
    elif reason == "interrupted" or metrics.get("interrupted"):
        flags.append("interrupted")
    beside = metrics.get("launcher_cpu_jobs_beside", 0)
    if beside:  # the load-aware launcher let other jobs compute while it timed (hydra.launcher.pause=false)
        flags.append(f"beside {beside:.0f} CPU job{'s' if beside > 1 else ''}")
    if metrics.get("cpu_busy"):  # a CPU timing began with more threads runnable than cores
        flags.append("busy CPU")
    return flags


def ratio_ci(ci_a: float | None, ci_b: float | None) -> float | None:
    """The relative 95% CI half-width of a ratio of two medians with relative half-widths ``ci_a``
    and ``ci_b`` (independent errors add in quadrature); None where either is unknown."""
    if ci_a is None or ci_b is None or not (math.isfinite(ci_a) and math.isfinite(ci_b)):
        return None
    return math.hypot(ci_a, ci_b)


def judge_speedup(ratio: float, ci_a: float | None, ci_b: float | None, flags_a: list[str] | None,
                  flags_b: list[str] | None) -> tuple[float | None, bool, bool]:
    """A speed-up between two medians (relative CIs ``ci_a``, ``ci_b``; their :func:`quality_flags`):
    (the ratio's CI, whether either side was noisy, whether it is beyond the CI). One rule for the
    terminal table, the report and ``--compare``."""
    ci = ratio_ci(ci_a, ci_b)
    return ci, "noisy" in [*(flags_a or []), *(flags_b or [])], significant(ratio, ci)


def significant(ratio: float, ci: float | None) -> bool:
    """Whether a speed-up ``ratio`` with relative CI half-width ``ci`` differs from 1 (no change)
    beyond its CI; unknown CIs count as significant (nothing says otherwise)."""
    return ci is None or abs(ratio - 1.0) > ratio * ci


#: Student's t, two-sided 95%, by degrees of freedom (1..30); the normal 1.96 beyond
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def between_processes(medians_ms: list[float]) -> dict[str, float]:
    """The spread of one job measured in several processes: the median of their medians (the headline), the
    coefficient of variation between them, and the 95% CI half-width of their mean (Student's t) relative to
    the headline: the interval a comparison between processes must beat."""
    x = np.asarray(medians_ms, dtype=np.float64)
    n = len(x)
    med = float(np.median(x))
    sd = float(x.std(ddof=1)) if n > 1 else 0.0
    t = _T975[n - 2] if 2 <= n <= len(_T975) + 1 else 1.96
    return {"latency_median_ms": med, "processes": float(n),
            "latency_process_cv": sd / float(x.mean()) if x.mean() > 0 else 0.0,
            "latency_process_min_ms": float(x.min()), "latency_process_max_ms": float(x.max()),
            "latency_ci_rel_halfwidth": (t * sd / math.sqrt(n)) / med if n > 1 and med > 0 else math.inf}
