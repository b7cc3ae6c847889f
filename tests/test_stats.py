import numpy as np
import pytest

from harness.stats import median_ci, summarize


def test_summary_numbers():
    x = np.arange(1, 101, dtype=float)  # 1..100 ms
    s = summarize(x, batch=4)
    assert s["latency_median_ms"] == 50.5
    assert s["latency_mean_ms"] == 50.5
    assert s["latency_min_ms"] == 1 and s["latency_max_ms"] == 100
    assert s["latency_std_ms"] == pytest.approx(np.std(x, ddof=1))
    assert s["latency_p90_ms"] == pytest.approx(90.1)
    assert "latency_p99_ms" not in s  # needs >= 662 samples
    assert s["throughput_ips"] == pytest.approx(4 / 0.0505)
    assert s["outliers"] == 0 and s["samples"] == 100


def test_p90_p99_gating_and_outliers():
    assert "latency_p90_ms" not in summarize(np.ones(63), 1)
    x = np.ones(700)
    x[:5] = 50.0
    s = summarize(x, 1)
    assert "latency_p99_ms" in s and s["outliers"] == 5


def test_median_ci_contains_median_and_shrinks():
    rng = np.random.default_rng(0)
    small, big = rng.normal(10, 1, 100), rng.normal(10, 1, 10000)
    lo, hi = median_ci(small)
    assert lo < np.median(small) < hi
    blo, bhi = median_ci(big)
    assert (bhi - blo) < (hi - lo) / 5
    # order statistics: ranks 50 -+ 9.8 of 100
    assert median_ci(np.arange(100.0)) == (40.0, 60.0)
