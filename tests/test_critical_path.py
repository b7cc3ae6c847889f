"""The critical path read from a GPU trace (issue 42: what stands in the way of inception_v3's latency,
kernel by kernel): a synthetic two-stream trace in Kineto's format, so no GPU is needed."""

import json

from ios_core.runtime.critical import Kernel, critical_path, read_trace, split_runs, summary


def _trace(tmp_path, kernels):
    events = [{"ph": "X", "cat": "kernel", "name": n, "ts": ts, "dur": d, "args": {"stream": s}}
              for n, s, ts, d in kernels]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::conv", "ts": 0, "dur": 99})  # host work: not read
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_the_path_follows_the_producer_that_finished_last_across_streams(tmp_path):
    # stream 7: a (0-10) then c waits for b; stream 8: b (2-20, the slower branch) ; c (22-30) ; d on 8 (31-40)
    # a second inference starts 1 ms later
    kernels = read_trace(_trace(tmp_path, [("a", 7, 0, 10), ("b", 8, 2, 18), ("c", 7, 22, 8), ("d", 8, 31, 9),
                                           ("a", 7, 1000, 10), ("e", 7, 1012, 5)]))
    assert [k.name for k in kernels][:4] == ["a", "b", "c", "d"]
    first, second = split_runs(kernels, idle_us=200)
    assert len(first) == 4 and [k.name for k in second] == ["a", "e"]
    path = critical_path(first)
    assert [(s.kernel.name, s.gap_us) for s in path] == [("b", 0.0), ("c", 2.0), ("d", 1.0)]
    assert summary(path) == {"span_us": 38.0, "kernels": 3.0, "kernel_us": 35.0, "gap_us": 3.0, "streams": 2.0}
    assert [(s.kernel.name, s.gap_us) for s in critical_path(second)] == [("a", 0.0), ("e", 2.0)]


def test_on_a_tie_the_own_stream_is_the_predecessor_and_rounding_is_tolerated():
    a, b = Kernel("a", 1, 0.0, 10.0), Kernel("b", 2, 0.0, 10.2)
    c = Kernel("c", 1, 10.0, 5.0)  # starts 0.2 us before b's rounded end: still after both
    assert [s.kernel.name for s in critical_path([a, b, c])] == ["a", "c"]
    assert critical_path([]) == [] and summary([])["kernels"] == 0.0
