"""Per-operator profile (runner.profile_ops, OpBench): work counted right, the critical path
found from the timings, the artifacts written, and two runs side by side in the report."""

import harness
from harness.report import Run
from harness.report.tables import Layout, op_table
from ios_core.cost.opprofile import from_csv, op_profile, to_csv, to_markdown
from ios_core.models import build_model

FAKE = {"1": 1.0, "2": 5.0, "3": 1.0, "4": 1.0, "5": 0.5}


def test_rows_work_and_critical_path():
    g = build_model("sample", channels=8, size=7)
    rows = op_profile(g, lambda nodes: [FAKE[n.name] for n in nodes], batch=2)
    by = {r.node: r for r in rows}
    assert [r.node for r in rows] == ["1", "2", "3", "4", "5"]
    assert {r.node for r in rows if r.critical} == {"2", "5"}  # 5.5 ms through conv 2, 2.5 through 1 -> 4
    conv = by["1"]
    assert conv.op == "Conv2d" and conv.input_shape == "2x8x7x7" and conv.output_shape == "2x8x7x7"
    assert conv.kernel == "3x3" and conv.stride == "1x1" and conv.groups == "1"
    assert conv.flops == 2 * (8 * 7 * 7) * (3 * 3 * 8 + 1) * 2  # 2 x outputs x (MACs + bias) per output x batch
    assert conv.bytes == (2 * 8 * 7 * 7 * 2 + 8 * 8 * 9 + 8) * 4  # in + out (batch 2) + weights and bias
    assert abs(conv.gflops_per_s - conv.flops / 1e6) < 1e-9  # 1 ms
    assert abs(sum(r.share_pct for r in rows) - 100.0) < 1e-9 and abs(by["2"].share_pct - 5 / 8.5 * 100) < 1e-9
    assert from_csv(to_csv(rows))[1]["latency_ms"] == "5.0"
    assert "| 2 | Conv2d | 2x8x7x7 | 2x16x7x7 | 3x3 | 1x1 | 1 |" in to_markdown(rows)


def test_profile_ops_run_writes_the_table(bench_cfg):
    rec = harness.run(bench_cfg(**{"runner.profile_ops": True}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    rows = from_csv(rec.artifacts["op_profile.csv"])
    assert [r["node"] for r in rows] == ["1", "2", "3", "4", "5"] and all(float(r["latency_ms"]) > 0 for r in rows)
    assert rec.metrics["op_profile_nodes"] == 5.0
    assert 0 < rec.metrics["op_profile_critical_path_ms"] <= rec.metrics["op_profile_sum_ms"]
    assert rec.artifacts["op_profile.md"].startswith("# per-operator profile: sample, batch 1, fp32, cpu")


def test_report_puts_two_profiles_side_by_side():
    g = build_model("sample", channels=8, size=7)
    runs = []
    for batch, scale in ((1, 1.0), (4, 3.0)):
        rows = op_profile(g, lambda nodes, k=scale: [FAKE[n.name] * k for n in nodes], batch=batch)
        runs.append(Run({"status": "FINISHED", "label": "PyTorch", "config": {"model": {"name": "sample"},
                                                                             "batch": batch},
                         "artifacts": {"op_profile.csv": to_csv(rows)}, "metrics": {}}, [f"batch={batch}"]))
    t = op_table(runs, Layout())
    assert t.cols == ["sample PyTorch batch=1", "sample PyTorch batch=4", "ratio"]
    assert t.text("2 Conv2d", "ratio") == "3.0000" and t.text("2 Conv2d", "sample PyTorch batch=4") == "15.0000"
