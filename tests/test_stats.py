import numpy as np
import pytest

from harness.stats import Latency, _order_rank, ci_rel_halfwidth, median_ci, t_quantile


def test_summary_numbers():
    x = np.arange(1, 101, dtype=float)  # 1..100 ms
    s = Latency.of(x, batch=4).metrics()
    assert s["latency_median_ms"] == 50.5
    assert s["latency_mean_ms"] == 50.5
    assert s["latency_min_ms"] == 1 and s["latency_max_ms"] == 100
    assert s["latency_std_ms"] == pytest.approx(np.std(x, ddof=1))
    assert s["latency_p90_ms"] == pytest.approx(90.1)
    assert "latency_p99_ms" not in s  # needs >= 662 samples
    assert s["throughput_ips"] == pytest.approx(4 / 0.0505)
    assert s["outliers"] == 0 and s["samples"] == 100


def test_latency_is_a_typed_value_whose_record_form_is_made_at_the_edge():
    """Issue 57: the statistics as named fields; ``metrics()`` the record's names, ``metrics("gpu_")`` the GPU
    timing's (its latencies only); the CI's relative half-width the stopping rule's."""
    x = np.arange(1, 101, dtype=float)
    lat = Latency.of(x, batch=2, percentiles=(50.0, 90.0, 99.0))
    assert (lat.median_ms, lat.samples, lat.ci_ms) == (50.5, 100, median_ci(x))
    assert lat.percentiles == ((50.0, 50.5), (90.0, pytest.approx(90.1)))  # p99 needs 662 samples: left out
    assert lat.ci_rel_halfwidth == ci_rel_halfwidth(x) and lat.cv == pytest.approx(np.std(x, ddof=1) / 50.5)
    gpu = lat.metrics("gpu_")
    assert gpu["gpu_latency_median_ms"] == 50.5 and gpu["gpu_latency_ci_low_ms"] == lat.ci_ms[0]
    assert not {"gpu_samples", "gpu_outliers", "gpu_throughput_ips", "samples"} & set(gpu)
    assert set(lat.metrics()) - {k.removeprefix("gpu_") for k in gpu} == {"samples", "outliers", "throughput_ips"}
    few = Latency.of(np.array([1.0, 2.0]), 1)
    assert few.ci_ms is None and few.ci_rel_halfwidth == float("inf") and "latency_ci_low_ms" not in few.metrics()
    with pytest.raises(ValueError, match="no latency samples"):
        Latency.of(np.array([]), 1)


def test_p90_p99_gating_and_outliers():
    assert "latency_p90_ms" not in Latency.of(np.ones(63), 1).metrics()
    x = np.ones(700)
    x[:5] = 50.0
    s = Latency.of(x, 1).metrics()
    assert "latency_p99_ms" in s and s["outliers"] == 5


def test_median_ci_contains_median_and_shrinks():
    rng = np.random.default_rng(0)
    small, big = rng.normal(10, 1, 100), rng.normal(10, 1, 10000)
    lo, hi = median_ci(small)
    assert lo < np.median(small) < hi
    blo, bhi = median_ci(big)
    assert (bhi - blo) < (hi - lo) / 5
    # exact order statistics: ranks 40 and 61 of 100 (Binomial(100, 1/2) puts 96.5% between them)
    assert median_ci(np.arange(100.0)) == (39.0, 60.0)


def test_quantiles_from_scipys_special_functions_match_scipy_stats():
    """The order-statistic rank and t quantile come from scipy.special (a third of scipy.stats' import, which
    otherwise lands in the first stopping-rule check of a run): the same numbers as binom.ppf and t.ppf."""
    from scipy import stats

    for n in (6, 9, 16, 17, 100, 1001, 20000):
        for confidence in (0.9, 0.95, 0.99):
            assert _order_rank(n, confidence) == max(int(stats.binom.ppf((1 - confidence) / 2, n, 0.5)), 1)
    for df in (1, 2, 4, 9, 30, 1000):
        assert t_quantile(df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-12)


def test_too_few_samples_have_no_ci_and_are_smoke_tests():
    """Six samples are the fewest whose min..max bounds the median at 95% (96.9%); five give no interval, and a
    run with them is a smoke test: no CI in its metrics, flagged wherever it is shown."""
    from harness.stats import is_smoke, quality_flags

    assert median_ci(np.arange(6.0)) == (0.0, 5.0)
    assert all(np.isnan(median_ci(np.arange(5.0))))
    m = Latency.of(np.array([1.0, 1.1, 0.9]), 1, (50.0,)).metrics()
    assert "latency_ci_low_ms" not in m and m["samples"] == 3
    assert is_smoke({}, m) and quality_flags({}, m) == ["smoke"]
    assert quality_flags({"smoke": "true"}, {"samples": 500.0}) == ["smoke"]  # runner=quick
    assert not is_smoke({"smoke": "false"}, {"samples": 6.0})


def test_a_ratios_interval_is_on_the_log_scale_never_below_zero():
    from harness.stats import geomean, judge_speedup, ratio_ci, ratio_interval

    h = ratio_ci(0.49, 0.004)  # a baseline of 3 samples was +-49%: the ratio's interval is wide, not negative
    lo, hi = ratio_interval(257.0, h)
    assert 0 < lo < 257.0 < hi and hi / 257.0 == pytest.approx(257.0 / lo)
    assert lo == pytest.approx(257.0 / 1.49, rel=0.01)
    assert judge_speedup(1.004, 0.004, 0.004, [], []).beyond is False  # within the noise
    assert judge_speedup(1.2, 0.004, 0.004, [], ["noisy"]) == (pytest.approx(ratio_ci(0.004, 0.004)), True, True,
                                                                False)
    assert judge_speedup(3.0, 0.01, None, ["smoke"], []).smoke
    g, gh = geomean([2.0, 8.0], [0.1, 0.1])
    assert g == pytest.approx(4.0) and gh == pytest.approx(0.1 / np.sqrt(2))
    assert geomean([2.0, 8.0], [0.1, None])[1] is None
