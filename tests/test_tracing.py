"""runner.trace: kernels (GPU) or busy threads (CPU) in flight over time, from a profiler trace."""

import json

import harness
from harness.measure.tracing import busy_intervals, in_flight, merged, summary


def test_in_flight_counts_overlaps():
    times, counts = in_flight([(0, 10), (5, 15), (5, 8), (20, 30)])
    assert list(zip(times, counts)) == [(0, 1), (5, 3), (8, 2), (10, 1), (15, 0), (20, 1), (30, 0)]
    s = summary([(0, 10), (5, 15), (5, 8), (20, 30)])
    assert s["trace_max_in_flight"] == 3.0 and s["trace_span_ms"] == 0.03
    assert abs(s["trace_mean_in_flight"] - (5 * 1 + 3 * 3 + 2 * 2 + 5 * 1 + 10 * 1) / 25) < 1e-12


def test_gpu_kernels_and_cpu_threads():
    events = [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 4}, {"ph": "X", "cat": "kernel", "ts": 2, "dur": 4},
              {"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 10, "tid": 1},
              {"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 2, "tid": 1},  # nested in the first: same thread
              {"ph": "X", "cat": "cpu_op", "ts": 5, "dur": 10, "tid": 2}]
    assert busy_intervals(events, cuda=True) == [(0.0, 4.0), (2.0, 6.0)]
    assert sorted(busy_intervals(events, cuda=False)) == [(0.0, 10.0), (5.0, 15.0)]
    assert merged([(0, 2), (1, 3), (5, 6)]) == [(0, 3), (5, 6)]


def test_a_traced_run_keeps_the_trace_and_the_plot(bench_cfg):
    rec = harness.run(bench_cfg(**{"runner.trace": True}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    trace = json.loads(rec.artifacts["trace.json"])
    assert any(e.get("cat") == "cpu_op" for e in trace["traceEvents"])
    assert rec.metrics["trace_units"] >= 1 and rec.metrics["trace_max_in_flight"] >= 1
    assert "<svg" in rec.artifacts["in_flight.svg"]


def test_stream_timeline_names_units_on_hover():
    from ios_core.runtime.profile import GroupSpan, timeline_svg

    spans = [GroupSpan(0, 0, ["1", "2"], 0.0, 1.0), GroupSpan(0, 1, ["3"], 0.0, 0.5), GroupSpan(1, 0, ["4"], 1.0, 2.0)]
    svg = timeline_svg(spans, "t")
    assert svg.count("<title>") == 3
    assert "<title>stage 0, stream 0: 1 2 (0.000-1.000 ms)</title>" in svg
    assert "<title>stage 1, stream 0: 4 (1.000-2.000 ms)</title>" in svg
