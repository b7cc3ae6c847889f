"""Latency statistics: median headline, tails gated by sample count, a distribution-free
95% confidence interval of the median (exact, from the binomial's order statistics), Tukey outliers
counted but never dropped; a ratio's interval on the log scale (asymmetric, never negative)."""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np

CONFIDENCE = 0.95
#: the fewest samples whose order statistics bound the median at 95% (min..max of 6 covers 96.9%; of 5, 93.8%):
#: a run with fewer has no CI and is a smoke test, never a side of a printed speed-up
MIN_CI_SAMPLES = 6

P90_MIN_SAMPLES = 64
P99_MIN_SAMPLES = 662
#: the least samples for a percentile to be reported: about 6.5 samples beyond it (p50 is the median)
MIN_SAMPLES = {50.0: 1, 90.0: P90_MIN_SAMPLES, 95.0: 128, 99.0: P99_MIN_SAMPLES, 99.9: 6620}


def min_samples(p: float) -> int:
    return MIN_SAMPLES.get(float(p), math.ceil(6.5 / max(1e-9, 1 - float(p) / 100)))


def percentile_name(p: float) -> str:
    return f"latency_p{float(p):g}_ms".replace(".", "_")


def special():
    """scipy's special functions, imported on first use (0.2 s that ``--help`` need not pay; scipy.stats would
    be 0.6 s more). :func:`prime` imports them before a measurement times anything."""
    return importlib.import_module("scipy.special")


def prime() -> None:
    """Import what the CIs need now, so that the first stopping-rule check between timed iterations is not an
    import."""
    _order_rank(MIN_CI_SAMPLES, CONFIDENCE)


@cache
def _order_rank(n: int, confidence: float) -> int:
    """The rank k (1-based) of the median CI's lower order statistic among ``n`` samples: Binomial(n, 1/2)'s
    ``(1 - confidence) / 2`` quantile (the smallest k whose CDF reaches it, as ``binom.ppf``), at least 1."""
    cdf = special().bdtr(np.arange(n + 1), n, 0.5)
    return max(int(np.searchsorted(cdf, (1 - confidence) / 2)), 1)


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """Student's t two-sided ``confidence`` quantile with ``df`` degrees of freedom."""
    return float(special().stdtrit(df, (1 + confidence) / 2))


def median_ci(samples: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact distribution-free CI of the median: the order statistics whose ranks Binomial(n, 1/2)
    puts ``confidence`` between (coverage at least ``confidence``); NaN for fewer than
    :data:`MIN_CI_SAMPLES` samples, whose min..max covers less."""
    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = len(x)
    if n < MIN_CI_SAMPLES:
        return (math.nan, math.nan)
    k = _order_rank(n, confidence)  # P(B <= k - 1) < alpha/2: ranks k and n - k + 1
    return float(x[k - 1]), float(x[n - k])


def ci_rel_halfwidth(samples: np.ndarray) -> float:
    """The median's CI half-width relative to it; infinite where there is none (too few samples)."""
    lo, hi = median_ci(samples)
    med = float(np.median(samples))
    return (hi - lo) / 2 / med if med > 0 and math.isfinite(lo) else math.inf


@dataclass(frozen=True)
class Latency:
    """Per-iteration latencies summarised, in ms: the median headline, the spread, the median's CI (None with too
    few samples: :data:`MIN_CI_SAMPLES`), Tukey outliers counted, and each percentile asked for that has enough
    samples (:func:`min_samples`). Typed where it is made and used; :meth:`metrics` is the record's flat form."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    iqr_ms: float
    samples: int
    outliers: int
    throughput_ips: float
    ci_ms: tuple[float, float] | None
    percentiles: tuple[tuple[float, float], ...] = ()  # (p, ms), only those with enough samples

    @classmethod
    def of(cls, samples_ms: np.ndarray, batch: int, percentiles: tuple[float, ...] = (90.0, 99.0)) -> Latency:
        x = np.asarray(samples_ms, dtype=np.float64)
        n = len(x)
        if n == 0:
            raise ValueError("no latency samples")
        med = float(np.median(x))
        q1, q3 = np.percentile(x, [25, 75])
        iqr = q3 - q1
        lo, hi = median_ci(x)
        return cls(median_ms=med, mean_ms=float(x.mean()), min_ms=float(x.min()), max_ms=float(x.max()),
                   std_ms=float(x.std(ddof=1)) if n > 1 else 0.0, iqr_ms=float(iqr), samples=n,
                   outliers=int(np.sum((x < q1 - 1.5 * iqr) | (x > q3 + 1.5 * iqr))),
                   throughput_ips=batch / (med / 1000.0) if med > 0 else math.inf,
                   ci_ms=(lo, hi) if math.isfinite(lo) else None,
                   percentiles=tuple((float(p), float(np.percentile(x, p))) for p in percentiles
                                     if n >= min_samples(p)))

    @property
    def cv(self) -> float:
        return self.std_ms / self.mean_ms if self.mean_ms > 0 else 0.0

    @property
    def ci_rel_halfwidth(self) -> float:
        """The median's CI half-width relative to it; infinite where there is none (too few samples)."""
        if self.ci_ms is None or self.median_ms <= 0:
            return math.inf
        return (self.ci_ms[1] - self.ci_ms[0]) / 2 / self.median_ms

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """The record's names (``latency_median_ms``, ...); with ``prefix`` (``gpu_``) the latencies alone, renamed
        (the sample count, outliers and throughput are the host timing's)."""
        out = {"latency_median_ms": self.median_ms, "latency_mean_ms": self.mean_ms, "latency_min_ms": self.min_ms,
               "latency_max_ms": self.max_ms, "latency_std_ms": self.std_ms, "latency_iqr_ms": self.iqr_ms}
        if not prefix:
            out.update(samples=float(self.samples), outliers=float(self.outliers), throughput_ips=self.throughput_ips)
        if self.ci_ms is not None:  # too few samples: no interval at all, rather than a number that is not one
            out.update(latency_ci_low_ms=self.ci_ms[0], latency_ci_high_ms=self.ci_ms[1])
        out["latency_cv"] = self.cv
        out.update({percentile_name(p): v for p, v in self.percentiles})
        return {f"{prefix}{k}": v for k, v in out.items()}


def missing_percentiles(n: int, percentiles: tuple[float, ...]) -> list[str]:
    """Percentiles asked for that too few samples leave out, said so (never silently absent)."""
    return [f"p{float(p):g} needs {min_samples(p)}" for p in percentiles if n < min_samples(p)]


def is_smoke(tags: dict[str, str], metrics: dict[str, float]) -> bool:
    """A smoke test: run with ``runner.smoke`` (``runner=quick``) or with too few samples for a CI. Its number
    says the backend runs; it is never a side of a speed-up or in a GeoMean."""
    samples = metrics.get("samples")
    return str(tags.get("smoke", "")).lower() == "true" or (samples is not None and samples < MIN_CI_SAMPLES)


def quality_flags(tags: dict[str, str], metrics: dict[str, float]) -> list[str]:
    """Short flags a table puts beside a number: ``smoke`` (:func:`is_smoke`), ``noisy`` (the measurement said
    so: CV over 10% or a CI over 2%), ``capped`` (a time or iteration cap stopped it before its CI target),
    ``interrupted``, and what it shared: ``beside N CPU jobs`` (the load-aware launcher's CPU phases ran
    while it timed), ``busy CPU`` (a CPU timing began with more threads runnable than cores). Failed jobs have no
    number and show why instead."""
    flags = []
    if is_smoke(tags, metrics):
        flags.append("smoke")
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
    """The 95% CI of a ratio of two medians with relative half-widths ``ci_a`` and ``ci_b``, as a half-width
    on the log scale: log(1 + ci) of each side, independent, added in quadrature. The interval is
    :func:`ratio_interval`: asymmetric and never negative, however wide. None where either is unknown."""
    if ci_a is None or ci_b is None or not (math.isfinite(ci_a) and math.isfinite(ci_b)):
        return None
    return math.hypot(math.log1p(ci_a), math.log1p(ci_b))


def ratio_interval(ratio: float, log_halfwidth: float) -> tuple[float, float]:
    """The interval of ``ratio`` whose half-width on the log scale is ``log_halfwidth``."""
    return ratio * math.exp(-log_halfwidth), ratio * math.exp(log_halfwidth)


class Speedup(NamedTuple):
    """A judged speed-up: its log-scale CI half-width (None: unknown), whether either side was noisy, whether it
    is beyond its CI, and whether either side is a smoke test (then it is not shown at all)."""

    ci: float | None
    noisy: bool
    beyond: bool
    smoke: bool


def judge_speedup(ratio: float, ci_a: float | None, ci_b: float | None, flags_a: list[str] | None,
                  flags_b: list[str] | None) -> Speedup:
    """A speed-up between two medians (relative CIs ``ci_a``, ``ci_b``; their :func:`quality_flags`). One rule
    for the terminal table, the report and ``--compare``."""
    flags = [*(flags_a or []), *(flags_b or [])]
    ci = ratio_ci(ci_a, ci_b)
    return Speedup(ci, "noisy" in flags, significant(ratio, ci), "smoke" in flags)


def significant(ratio: float, ci: float | None) -> bool:
    """Whether a speed-up ``ratio`` with log-scale CI half-width ``ci`` differs from 1 (no change) beyond its
    CI; unknown CIs (records made before there were any) count as significant: nothing says otherwise."""
    return ci is None or abs(math.log(ratio)) > ci


def geomean(ratios: list[float], log_halfwidths: list[float | None]) -> tuple[float, float | None]:
    """The geometric mean of ``ratios`` and its log-scale CI half-width (the mean of independent logs: the
    root of the summed squares over the count); None where any is unknown."""
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    if any(h is None for h in log_halfwidths):
        return g, None
    return g, math.sqrt(sum(h * h for h in log_halfwidths if h is not None)) / len(ratios)


def between_processes(medians_ms: list[float]) -> dict[str, float]:
    """The spread of one job measured in several processes: the median of their medians (the headline), the
    coefficient of variation between them, and the 95% CI half-width of their mean (Student's t) relative to
    the headline: the interval a comparison between processes must beat."""
    x = np.asarray(medians_ms, dtype=np.float64)
    n = len(x)
    med = float(np.median(x))
    sd = float(x.std(ddof=1)) if n > 1 else 0.0
    t = t_quantile(n - 1) if n > 1 else math.inf
    return {"latency_median_ms": med, "processes": float(n),
            "latency_process_cv": sd / float(x.mean()) if x.mean() > 0 else 0.0,
            "latency_process_min_ms": float(x.min()), "latency_process_max_ms": float(x.max()),
            "latency_ci_rel_halfwidth": (t * sd / math.sqrt(n)) / med if n > 1 and med > 0 else math.inf}
