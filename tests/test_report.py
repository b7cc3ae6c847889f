"""Study presets end to end on the CPU (the quick variant of each, report included) and the
report's tables, plots and HTML page."""

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import ConfigError
from harness.records import background
from harness.report import Run, build_report
from harness.report.tables import LAYOUTS, build_tables, launcher_table
from harness_plugins.ios.report import same_run_table

REPO = Path(__file__).resolve().parent.parent
PRESETS = ["schedules", "frameworks", "utilization", "specialization", "prune", "batchsize", "autotvm", "kernels",
           "timm_suite"]


def run(label, model, latency, status="FINISHED", error=None, **over):
    overrides = [f"model={model}", *(f"{k.replace('__', '.')}={v}" for k, v in over.items())]
    record = {"status": status, "label": label, "error": error, "config": {"model": {"name": model}},
              "metrics": {"latency_median_ms": latency, "throughput_ips": 1000 / latency} if latency else {},
              "summary": f"Model: {model} | Optimization: {label}"}
    return Run(record, overrides)


def test_tables_geomean_speedup_and_reasons():
    runs = [run("Sequential", "a", 4.0, backend__schedule="sequential"),
            run("IOS-Both", "a", 2.0, backend__schedule="ios-both"),
            run("Sequential", "b", 9.0, backend__schedule="sequential"),
            run("IOS-Both", "b", 1.0, backend__schedule="ios-both"),
            run("TVM", "b", None, "FAILED", "MissingDependency: tvm is not installed: pip install -e '.[tvm]'",
                backend="tvm")]
    values, speed = build_tables(runs, LAYOUTS["schedules"], "backend.schedule:sequential")
    md = values.markdown()
    assert "| model | Sequential | IOS-Both | TVM |" in md
    assert "| a | 4.000 | 2.000 | missing |" in md
    assert "| b | 9.000 | 1.000 | not installed: tvm is not installed: pip install -e '.[tvm]' |" in md
    assert "| GeoMean | 6.000 | 1.414 | - |" in md
    assert "| GeoMean | 1.00x | 4.24x | - |" in speed.markdown()  # sqrt(2 * 9)
    assert speed.csv().splitlines()[:3] == ["model,column,value,ci_low,ci_high,samples,flags,note",
                                            "a,Sequential,1.0,,,,,", "a,IOS-Both,2.0,,,,,"]
    assert speed.csv().splitlines()[3] == "a,TVM,,,,,,missing"


def test_the_papers_v100_figures_sit_beside_the_frameworks_study_in_its_own_columns():
    from harness.report.published import published_tables

    runs = [run("IOS-Both", "inception_v3", 0.47, backend="ios"), run("TensorRT", "inception_v3", None, "FAILED",
                                                                      "MissingDependency: no", backend="tensorrt"),
            run("ONNXRuntime", "inception_v3", 1.42, backend="onnxruntime"),
            run("IOS-Both", "nasnet", 2.11, backend="ios"), run("IOS-Both", "mine", 1.0, backend="ios")]
    values, speed = published_tables(runs, LAYOUTS["frameworks"], "frameworks", "backend:ios")
    assert values.rows == ["inception_v3", "nasnet"] and values.cols == ["IOS-Both", "TensorRT"]  # the paper's
    assert "| inception_v3 | 4.03 | 5.21 |" in values.markdown() and "| nasnet | 16.04 | 24.66 |" in values.markdown()
    assert speed.title.endswith("speed-up over IOS-Both") and "| nasnet | 1.00x | 0.65x |" in speed.markdown()
    assert published_tables(runs, LAYOUTS["frameworks"], "batchsize", "backend:ios") == []  # not beside this study


def test_variants_name_the_options_that_tell_them_apart():
    runs = [run("IOS-Both", "a", 1.0 + r, backend__r=r, backend__s=s) for r in (1, 2) for s in (3, 8)]
    (values, cost) = build_tables(runs, LAYOUTS["prune"], "")
    assert values.cols == ["IOS-Both r=1 s=3", "IOS-Both r=1 s=8", "IOS-Both r=2 s=3", "IOS-Both r=2 s=8"]
    assert cost.title == "all runs: optimization cost (s)"


def test_kernels_tables_per_model_and_precision_with_speedup_over_ios():
    runs = [run(label, m, ms * (2 if p == "tf32" else 1), backend=b, precision=p, batch=bs)
            for m in ("a", "b") for p in ("fp16", "tf32") for bs in (1, 16)
            for label, b, ms in (("IOS-Both", "ios", 1.0 * bs), ("TorchCompile-RO", "pytorch_compile", 2.0 * bs))]
    tables = build_tables(runs, LAYOUTS["kernels"], "backend:ios")
    assert [t.title for t in tables][:2] == ["a fp16: median latency (ms)", "speed-up over IOS-Both"]
    assert len(tables) == 8 and tables[0].cols == ["IOS-Both", "TorchCompile-RO"] and tables[0].rows == ["1", "16"]
    assert "| 16 | 1.00x | 0.50x |" in tables[3].markdown()  # b fp16's speed-ups
    assert "| 16 | 32.000 | 64.000 |" in tables[6].markdown()  # b tf32's latencies


def test_same_run_table_uses_the_finalists_timed_in_one_process():
    """Speed-ups over Greedy and Sequential come from the search's back-to-back timings, not from
    latencies of separate jobs; runs without them (other backends, reused schedules) are left out."""
    ios = run("IOS-Both", "a", 1.1, backend__schedule="ios-both")
    ios.record["metrics"].update(search_whole_selected_ms=1.0, search_whole_dp_ms=1.05, search_whole_greedy_ms=1.2,
                                 search_whole_sequential_ms=2.0, predicted_insitu_ms=1.0)
    spec = run("IOS-Both-opt32", "a", 6.0, backend__opt_batch=32, batch=1)
    spec.record["config"].update(backend={"opt_batch": 32}, batch=1)
    spec.record["metrics"].update(search_whole_selected_ms=6.0, search_whole_dp_ms=6.0, search_whole_greedy_ms=6.6,
                                  search_whole_sequential_ms=7.2)
    other = run("Sequential", "a", 2.0, backend__schedule="sequential")
    t = same_run_table([ios, other], LAYOUTS["schedules"])
    assert "| a IOS-Both | 1.000 | 1.200 | 2.000 | 1.20x | 2.00x |" in t.markdown()
    assert len(t.rows) == 1
    s = same_run_table([spec, run("IOS-Both", "a", 1.0, batch=32)], LAYOUTS["specialization"])
    assert s.rows == ["a IOS-Both-opt32 (searched at bs32)"] and s.text(s.rows[0], "kept vs Greedy") == "1.10x"
    assert same_run_table([other], LAYOUTS["schedules"]) is None


def test_an_unknown_sweep_lists_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match="no sweep or study named 'nope'.*sweeps there: none"):
        build_report("nope", tmp_path)


def test_a_quick_preset_name_finds_its_study(tmp_path):
    from harness.records import sweeps
    from harness.report.runs import find_sweep

    sweeps.start(tmp_path, {"sweep_id": "q1", "sweep_name": "s", "study": "schedules"}, {"enabled": False})
    assert find_sweep(tmp_path, "schedules_quick")["sweep_id"] == "q1"
    with pytest.raises(ConfigError, match="no sweep or study named 'prune_quick'"):
        find_sweep(tmp_path, "prune_quick")


def _png_has_content(path: Path) -> bool:
    import matplotlib.image

    img = matplotlib.image.imread(path)
    return img.shape[0] > 100 and img.shape[1] > 100 and float(img.std()) > 0.05


@pytest.mark.parametrize("preset", PRESETS)
def test_quick_preset_end_to_end(tmp_path, preset):
    """The quick variant runs on the CPU; its report has the study's tables, plots and page."""
    mlflow = pytest.importorskip("mlflow")
    res = subprocess.run([sys.executable, "-m", "harness", "-m", f"+experiment={preset}_quick",
                          f"tracking.results_dir={tmp_path}"], capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode in (0, 1), res.stderr[-3000:]
    rep = subprocess.run([sys.executable, "-m", "harness.report", preset, "--results-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert rep.returncode == 0, rep.stderr[-3000:]
    folder = Path(rep.stdout.splitlines()[0].removeprefix("report: ")).parent
    md = (folder / "report.md").read_text()
    page = (folder / "index.html").read_text()
    state = json.loads(next((tmp_path / "records" / "sweeps").glob("*/sweep.json")).read_text())
    assert state["study"] == preset and state["status"] in ("FINISHED", "FAILED")
    pngs = sorted(folder.glob("*.png"))
    assert pngs and all(_png_has_content(p) for p in pngs), pngs
    assert page.count("data:image/png;base64,") == len(pngs) and '<table class="dataframe results">' in page
    assert [t["csv"] for t in json.loads((folder / "tables.json").read_text())] == \
        [f"table{i + 1}.csv" for i in range(len(list(folder.glob("table*.csv"))))]
    assert len((folder / "summary.txt").read_text().strip().splitlines()) >= 2
    layout = LAYOUTS[preset]
    if preset == "frameworks":  # every backend has a number or its reason; none dropped
        assert ("| model | IOS-Both | PyTorch | TensorFlow | JAX | ONNXRuntime-CPU | TVM | TVM-cuDNN | TensorRT | "
                "TASO |" in md)
        row = next(line for line in md.splitlines() if line.startswith("| sample |"))
        assert row.count("|") == 11 and "missing" not in row
        assert "not available: backend 'tvm_cudnn' does not run on cpu" in row  # TVM-cuDNN needs a GPU
        assert "not installed: backend 'tensorrt' needs tensorrt" in row and "not installed: backend 'taso'" in row
        # the backends that cannot run here are skipped, one line each, before any work: the sweep succeeds
        skipped = [line for line in res.stderr.splitlines() if line.startswith("skipped: ")]
        assert [line.split(":")[1].strip() for line in skipped] == [
            "model=sample backend=tvm_cudnn", "model=sample backend=tensorrt", "model=sample backend=taso"]
        assert res.returncode == 0 and state["status"] == "FINISHED", res.stderr[-2000:]
    elif preset == "timm_suite":  # models by name, each through its native form: IOS through the imported IR
        assert "| model | IOS-Both | PyTorch | ONNXRuntime-CPU |" in md and "missing" not in md
        for arch in ("deit_tiny_patch16_224", "mobilenetv2_100", "ghostnet_100"):
            row = next(line for line in md.splitlines() if line.startswith(f"| timm:{arch}@64 |"))
            cells = [c.strip() for c in row.split("|")[2:5]]
            assert all(c[0].isdigit() for c in cells), row  # every backend has a number
        assert res.returncode == 0 and state["status"] == "FINISHED", res.stderr[-2000:]
    else:
        assert res.returncode == 0, res.stderr[-3000:]
        assert "failed" not in md and "missing" not in md
    if layout.plot == "heatmap":
        assert (folder / "specialization-sample.png").exists()
    if preset == "utilization":
        assert len(list(folder.glob("timeline-*.svg"))) == 2 and len(list(folder.glob("in_flight-*.svg"))) == 2
        assert page.count("<svg") >= 4
    client = mlflow.tracking.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("harness")
    (parent,) = client.search_runs([exp.experiment_id], "tags.`harness.parent` = 'true'")
    assert parent.info.status == state["status"]
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert "report/index.html" in logged
    children = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("harness.parent") != "true"]
    if preset in ("schedules", "utilization", "batchsize", "kernels"):  # a sweep.baseline: speed-ups on the runs
        assert any(r.data.metrics.get("speedup_vs_baseline") == 1.0 for r in children)
        assert all("speedup_vs_baseline" in r.data.metrics for r in children if r.info.status == "FINISHED")


def test_report_of_a_sweep_that_only_mlflow_has(tmp_path):
    """A sweep run elsewhere and uploaded: the report reads the runs back from MLflow."""
    pytest.importorskip("mlflow")
    res = subprocess.run([sys.executable, "-m", "harness", "-m", "+experiment=utilization_quick",
                          f"tracking.results_dir={tmp_path}"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    local = build_report("utilization", tmp_path, tmp_path / "a", log=False)
    assert background.wait(tmp_path) == []  # the detached upload has sent the sweep
    shutil.rmtree(tmp_path / "records")
    remote = build_report("utilization", tmp_path, tmp_path / "b", log=False)
    assert (local / "table1.csv").read_text() == (remote / "table1.csv").read_text()


def test_devices_study_runs_a_schedule_made_on_another_gpu(tmp_path):
    """Device specialization on the CPU: a schedule saved under another device's name is loaded
    (not searched, not overwritten), the device's own entry searches; one report covers both."""
    pytest.importorskip("mlflow")
    common = [f"tracking.results_dir={tmp_path}", "tracking=off"]
    res = subprocess.run([sys.executable, "-m", "harness", "model=sample", "backend=ios", "device=cpu",
                          "runner=quick", "backend.schedule=greedy", *common],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    (own,) = (tmp_path / "schedules").rglob("cpu-bs1-*-greedy.json")
    foreign = own.with_name(own.name.replace("cpu-", "nvidia-h200-141gb-", 1))
    sched = json.loads(own.read_text())
    sched["device"] = "NVIDIA H200 141GB"
    foreign.write_text(json.dumps(sched))
    res = subprocess.run([sys.executable, "-m", "harness", "-m", "+experiment=devices_quick",
                          "backend.schedule=greedy", "backend.schedule_device=cpu,nvidia-h200", *common],
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    made_on = sorted(r["params"]["schedule_made_on"] for r in records if r.get("tracking", {}).get("sweep_id"))
    assert made_on == ["NVIDIA H200 141GB", "cpu"]
    assert json.loads(foreign.read_text())["device"] == "NVIDIA H200 141GB"
    folder = build_report("devices", tmp_path, log=False)
    md = (folder / "report.md").read_text()
    assert "| schedule made on \\ GPU | cpu |" in md
    assert "| NVIDIA H200 141GB |" in md and "| cpu |" in md and "failed" not in md
    assert _png_has_content(folder / "devices-sample.png")
    # a GPU with no saved schedule: one line naming the GPUs that have one
    res = subprocess.run([sys.executable, "-m", "harness", "model=sample", "backend=ios", "device=cpu",
                          "runner=quick", "backend.schedule=greedy", "backend.schedule_device=nvidia-a100", *common],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "backend.schedule_device='nvidia-a100': no schedule of this search saved by that GPU" in out
    assert "(GPUs with one: nvidia-h200-141gb)" in out


def test_the_launcher_table_compares_a_sweep_run_one_at_a_time_and_load_aware():
    basic = {"sweep_id": "b", "started": "2026-11-23T22:48:22+00:00", "ended": "2026-11-23T22:53:58+00:00"}
    la = {"sweep_id": "l", "started": "2026-11-23T22:43:31+00:00", "ended": "2026-11-23T22:48:07+00:00",
          "launcher": {"makespan_s": 269.0, "jobs": 4, "devices": 1, "cpu_workers": 2,
                       "device_utilization": [0.18], "wait_s": 192.0}}
    assert launcher_table([basic], [4]) is None  # nothing to compare: no table
    t = launcher_table([basic, la], [4, 4])
    assert t is not None and t.rows == ["b", "l"]
    assert t.grid()[1] == ["b", "one job at a time", "4", "336.0", "-", "-", "-", "-", "-"]
    assert t.grid()[2] == ["l", "load-aware (2 CPU slots, 1 device(s))", "4", "276.0", "269.0", "18%", "192.0",
                           "-", "-"]


def test_batch_varying_sweeps_compare_images_per_second():
    """Latencies of batch 1 and batch 2 are no speed-up of each other: with batch varying across columns
    the report adds images/s and takes the speed-up (and the bars) on it (issue 27 item 3)."""
    runs = []
    for batch, (pt, ort) in {1: (20.0, 19.0), 2: (41.8, 39.9)}.items():
        for label, backend, ms in (("PyTorch", "pytorch", pt), ("ONNXRuntime", "onnxruntime", ort)):
            r = run(label, "sample", ms, backend=backend, batch=batch)
            r.record["config"]["batch"] = batch
            r.record["metrics"]["throughput_ips"] = batch * 1000 / ms
            runs.append(r)
    tables = build_tables(runs, LAYOUTS["schedules"], "backend=pytorch")
    titles = [t.title for t in tables]
    assert titles[1] == "all runs: throughput (images/s)", titles
    speed = tables[-1].markdown()
    # PyTorch at batch 1 is the baseline (50.0 images/s); ONNX Runtime at batch 2 gives 50.1 images/s
    row = next(line for line in speed.splitlines() if line.startswith("| sample"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    thr = {c: tables[1].cells[("sample", c)] for c in tables[1].cols}
    base = thr[tables[1].cols[0]]
    assert cells == [f"{v / base:.2f}x" for v in thr.values()]
    assert max(v / base for v in thr.values()) < 1.06  # latency ratios would say 0.48x for batch 2


def test_report_cells_carry_the_ci_and_flags_and_a_speedup_says_when_it_is_not_significant():
    def noisy(label, model, latency, ci, tags=None, **over):
        r = run(label, model, latency, **over)
        r.record["metrics"]["latency_ci_rel_halfwidth"] = ci
        r.record["tags"] = tags or {}
        return r

    runs = [noisy("PyTorch", "a", 2.0, 0.004, backend="pytorch"),
            noisy("ORT", "a", 1.0, 0.49, {"noisy": "true", "stop_reason": "time"}, backend="onnxruntime"),
            noisy("TVM", "a", 1.99, 0.004, backend="tvm")]
    values, speed = build_tables(runs, LAYOUTS["frameworks"], "backend:pytorch")
    assert values.text("a", "ORT") == "1.000 ±49.0% (noisy, capped)"
    assert values.text("a", "PyTorch") == "2.000 ±0.4%"
    assert speed.text("a", "ORT") == "2.00x [1.34, 2.98] (noisy)"  # on the log scale: asymmetric
    assert speed.text("a", "TVM") == "1.01x [1.00, 1.01] (n.s.)"
    assert speed.text("a", "PyTorch") == "1.00x"
    assert "2.00x [1.34, 2.98] (noisy)" in speed.markdown() and "±49.0%" in values.html()
    import pandas as pd

    frame = pd.read_csv(io.StringIO(speed.csv()))  # issue 56: numbers a program can read, flags apart
    ort = frame[frame.column == "ORT"].iloc[0]
    assert ort.value == 2.0 and ort.ci_low == pytest.approx(1.3423, abs=1e-4) and ort["flags"] == "noisy"
    assert frame.value.dtype == float and frame.ci_high.dtype == float
    as_json = json.loads(json.dumps(speed.json()))  # the same cells for programs that read JSON (tables.json)
    cell = next(c for c in as_json["rows"] if c["column"] == "ORT")
    assert cell["value"] == 2.0 and cell["ci_low"] == pytest.approx(1.3423, abs=1e-4) and cell["flags"] == "noisy"
    assert as_json["title"] == speed.title and next(c for c in as_json["rows"] if c["column"] == "PyTorch")


def test_a_smoke_test_is_never_a_side_of_a_speedup_nor_in_a_geomean():
    """Issue 56: a 3-sample baseline printed 257.11x; runner=quick runs are flagged and give no ratio."""
    def measured(label, model, latency, ci, tags, **over):
        r = run(label, model, latency, **over)
        r.record["metrics"]["latency_ci_rel_halfwidth"] = ci
        r.record["tags"] = tags
        return r

    runs = [measured("PyTorch", "a", 2.0, 0.01, {"smoke": "true"}, backend="pytorch"),
            measured("ORT", "a", 1.0, 0.01, {}, backend="onnxruntime"),
            measured("PyTorch", "b", 4.0, 0.01, {}, backend="pytorch"),
            measured("ORT", "b", 1.0, 0.01, {}, backend="onnxruntime")]
    values, speed = build_tables(runs, LAYOUTS["frameworks"], "backend:pytorch")
    assert values.text("a", "PyTorch") == "2.000 ±1.0% (smoke)"
    assert speed.text("a", "ORT") == speed.text("a", "PyTorch") == "smoke"
    assert speed.geomeans()["ORT"].startswith("4.00x [3.94, 4.06]*")  # row b alone, with its interval
    assert values.geomeans()["PyTorch"].startswith("4.000")  # the smoke test's 2.0 left out


def _sweep_on_disk(results_dir, sweep_id, jobs):
    """A finished sweep as the harness leaves it: its state, job entries and records.
    ``jobs``: (overrides, label, median ms, CI, tags)."""
    from harness.records import sweeps
    from harness.records.tracking import write_json

    state = sweeps.start(results_dir, {"sweep_id": sweep_id, "sweep_name": f"sweep {sweep_id}",
                                       "sweep_command": "python -m harness -m ..."}, {"enabled": False})
    for i, (overrides, label, ms, ci, tags) in enumerate(jobs):
        rid = f"{sweep_id}{i}"
        given = dict(o.split("=", 1) for o in overrides)
        write_json(Path(results_dir) / "records" / f"{rid}.json",
                   {"run_id": rid, "status": "FINISHED", "label": label, "tags": tags,
                    "config": {"model": {"name": given["model"]}, "batch": int(given.get("batch", 1))},
                    "metrics": {"latency_median_ms": ms, "latency_ci_rel_halfwidth": ci,
                                "throughput_ips": 1000 / ms}})
        write_json(sweeps.sweep_dir(results_dir, sweep_id) / "jobs" / f"{i}.json",
                   {"record_id": rid, "status": "FINISHED", "job_num": i, "overrides": overrides,
                    "latency_median_ms": ms, "attempt": state["started"]})
    sweeps.end(results_dir, sweep_id, "FINISHED")


def test_compare_two_sweeps_job_by_job_with_the_ci_and_a_verdict(tmp_path, capsys):
    """issue 27 item 3: a baseline-vs-candidate view (pytest-benchmark's compare)."""
    from harness.report.__main__ import main

    base = [(["model=a", "backend=ios", "batch=1"], "IOS-Both", 2.0, 0.004, {}),
            (["model=a", "backend=ios", "batch=8"], "IOS-Both", 8.0, 0.004, {}),
            (["model=b", "backend=ios", "batch=1"], "IOS-Both", 3.0, 0.30, {"noisy": "true"})]
    cand = [(o, lab, ms, ci, tags) for (o, lab, _, ci, tags), ms in zip(base, (1.0, 8.01, 2.0))]
    cand[0] = (cand[0][0] + ["backend.channels_last=true"], *cand[0][1:])  # a fixed option may differ
    _sweep_on_disk(tmp_path, "aaa", base)
    _sweep_on_disk(tmp_path, "bbb", [*cand, (["model=c", "backend=ios", "batch=1"], "IOS-Both", 1.0, 0.01, {})])
    assert main(["--compare", "aaa", "bbb", "--results-dir", str(tmp_path), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    lines = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")[1:]]
             for line in out.splitlines() if line.startswith("| ") and not line.startswith("| job")}
    assert "sweep bbb (candidate) against sweep aaa (baseline)" in out
    assert lines["a batch=1"] == ["2.000 ±0.4%", "1.000 ±0.4%", "2.000x [1.989, 2.011]", "faster (100.0%)"]
    assert lines["a batch=8"][2:] == ["0.999x [0.993, 1.004]", "same (within the CI)"]
    # 1.5x with +-30% on both sides: on the log scale [1.03, 2.18], beyond 1 (the linear sum of CIs said "same")
    assert lines["b batch=1"][3] == "faster (50.0%), noisy" and "(noisy)" in lines["b batch=1"][0]
    assert lines["c batch=1"][:1] == ["missing"] and lines["c batch=1"][3] == "-"
    assert (tmp_path / "cmp" / "compare.csv").read_text().startswith("job,column,value,ci_low,ci_high,samples,flags")
    assert main(["--compare", "aaa", "aaa", "--results-dir", str(tmp_path)]) == 2
    assert "two different sweeps" in capsys.readouterr().err
    # as a CI gate: the candidate's regressions beyond the noise and the threshold fail the command
    assert main(["--compare", "aaa", "bbb", "--results-dir", str(tmp_path), "--fail-on-slowdown", "5%"]) == 0
    assert main(["--compare", "bbb", "aaa", "--results-dir", str(tmp_path), "--fail-on-slowdown", "5%"]) == 1
    err = capsys.readouterr().err
    assert "slower: a batch=1: 100.0% beyond the noise (threshold 5%)" in err and "batch=8" not in err
    assert main(["--compare", "bbb", "aaa", "--results-dir", str(tmp_path), "--fail-on-slowdown", "150"]) == 0
    assert main(["--compare", "bbb", "aaa", "--results-dir", str(tmp_path), "--fail-on-slowdown", "x"]) == 2
    assert "give a percentage such as 5%" in capsys.readouterr().err


def test_two_sweeps_of_the_same_jobs_get_a_column_each_and_their_own_folder(tmp_path):
    jobs = [(["model=a", "backend=ios"], "IOS-Both", 2.0, 0.004, {}), (["model=a", "backend=pytorch"], "PyTorch",
                                                                       4.0, 0.004, {})]
    _sweep_on_disk(tmp_path, "s1", jobs)
    _sweep_on_disk(tmp_path, "s2", [(o, lab, ms * 1.5, ci, t) for o, lab, ms, ci, t in jobs])
    folder = build_report(["s1", "s2"], tmp_path, log=False)
    assert folder.name == "sweep-s1+s2"
    md = (folder / "report.md").read_text()
    assert "| model | IOS-Both [s1] | PyTorch [s1] | IOS-Both [s2] | PyTorch [s2] |" in md
    assert "| a | 2.000 ±0.4% | 4.000 ±0.4% | 3.000 ±0.4% | 6.000 ±0.4% |" in md  # nothing overwritten
    alone = build_report("s1", tmp_path, log=False)
    assert alone.name == "sweep-s1" and "IOS-Both [s1]" not in (alone / "report.md").read_text()


def test_a_study_split_over_stores_by_model_reports_as_one_table():
    """Lanes of one study (a model per GPU, each in its own store) differ only in where results go: one column
    per backend, not one per store."""
    runs = [run("IOS-Both", "a", 2.0, backend="ios", tracking__results_dir="/tmp/s0"),
            run("PyTorch", "a", 4.0, backend="pytorch", tracking__results_dir="/tmp/s0"),
            run("IOS-Both", "b", 1.0, backend="ios", tracking__results_dir="/tmp/s1", tracking="off")]
    values = build_tables(runs, LAYOUTS["frameworks"], "backend:ios")[0]
    assert values.cols == ["IOS-Both", "PyTorch"] and "| b | 1.000 | missing |" in values.markdown()


def test_the_report_has_a_usage_table_for_runs_that_measured_memory_and_energy():
    from harness.report.runs import Run
    from harness.report.tables import usage_table

    def run(label, metrics):
        return Run({"status": "FINISHED", "label": label, "config": {"model": {"name": "m"}, "batch": 1},
                    "metrics": {"latency_median_ms": 1.0, **metrics}}, ["model=m", "batch=1"])

    assert usage_table([run("PyTorch", {"latency_mean_ms": 1.0})]) is None  # nothing measured: no table
    cpu = usage_table([run("PyTorch", {"memory_peak_rss_mb": 300.0})])  # a CPU run: its RSS, no energy
    assert cpu is not None and cpu.text("m PyTorch bs1", "peak memory MB") == "300.000"
    assert cpu.text("m PyTorch bs1", "memory read from") == "the measuring process's peak RSS (CPU)"
    assert cpu.text("m PyTorch bs1", "energy mJ / inference") == "-"
    t = usage_table([run("IOS-Both", {"memory_peak_mb": 512.0, "memory_peak_torch_mb": 512.0,
                                      "energy_per_inference_mj": 12.5, "power_mean_w": 250.0}),
                     run("ORT", {"memory_peak_mb": 900.0, "memory_used_nvml_mb": 900.0}),
                     run("JAX", {"memory_peak_mb": 95.0, "memory_peak_allocator_mb": 95.0,
                                 "memory_used_nvml_mb": 61857.0})])
    assert t is not None and t.rows == ["m IOS-Both bs1", "m ORT bs1", "m JAX bs1"]
    assert t.text("m JAX bs1", "memory read from") == "the backend's allocator peak, since it started"
    assert t.text("m IOS-Both bs1", "energy mJ / inference") == "12.500" and t.text("m ORT bs1", "mean power W") == "-"
    assert t.text("m IOS-Both bs1", "memory read from") == "PyTorch allocator peak"
    assert t.text("m ORT bs1", "memory read from") == "GPU used (NVML), reserved pools included"


def _single_run_on_disk(results_dir, run_id, created, ms, ci, name="sample PyTorch bs1 fp32 cpu"):
    from harness.records.tracking import write_json

    write_json(Path(results_dir) / "records" / f"{run_id}.json",
               {"run_id": run_id, "created": created, "status": "FINISHED", "label": "PyTorch", "run_name": name,
                "tags": {}, "tracking": {"enabled": True}, "config": {"model": {"name": "sample"}, "batch": 1},
                "metrics": {"latency_median_ms": ms, "latency_ci_rel_halfwidth": ci, "samples": 500.0}})


def test_compare_two_single_runs_by_id_prefix_or_latest_and_fail_on_a_slowdown(tmp_path, capsys):
    """Issue 56: --compare of two single runs (`error: no sweep or study named ...` before); the report's command
    alone lists what there is to compare."""
    from harness.report.__main__ import main

    _single_run_on_disk(tmp_path, "a1b2c3d4e5f6" + "0" * 20, "2026-11-28T10:00:00+00:00", 1.0, 0.004)
    _single_run_on_disk(tmp_path, "f6e5d4c3b2a1" + "0" * 20, "2026-11-28T11:00:00+00:00", 1.2, 0.004)
    assert main(["--results-dir", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert listed.index("f6e5d4c3b2a1") < listed.index("a1b2c3d4e5f6")  # newest first
    assert main(["--compare", "a1b2c3", "latest", "--results-dir", str(tmp_path), "--fail-on-slowdown", "5%"]) == 1
    out = capsys.readouterr()
    assert "run f6e5d4c3b2a1 (candidate) against run a1b2c3d4e5f6 (baseline)" in out.out
    assert "| sample PyTorch bs1 fp32 cpu | 1.000 ±0.4% | 1.200 ±0.4% | 0.833x [0.829, 0.838] | slower (16.7%) |" \
        in out.out
    assert "slower: sample PyTorch bs1 fp32 cpu: 20.0% beyond the noise" in out.err
    assert main(["--compare", "a1b2c", "latest", "--results-dir", str(tmp_path)]) == 2  # too short a prefix
    assert "no sweep, study or run named 'a1b2c'" in capsys.readouterr().err


def test_a_noisy_latency_never_gets_an_interval_below_zero_in_the_csv_or_the_batch_plot(monkeypatch):
    """A CI wider than the median (the half-width 150% of it) is cut at zero: the CSV's ci_low and the error bar
    of the batch-size plot, which drew it down to -0.5 ms before."""
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    from harness.report import plots
    from harness.report.tables import Table

    t = Table("latency, ms: batch", "batch", ["1", "8"], ["IOS"], cells={("1", "IOS"): 1.0, ("8", "IOS"): 4.0},
              ci={("1", "IOS"): 1.5, ("8", "IOS"): 0.1}, geomean=False)
    frame = t.frame()
    assert list(frame["ci_low"]) == [0.0, pytest.approx(3.6)] and list(frame["ci_high"]) == [2.5, pytest.approx(4.4)]
    drawn = []
    real = Axes.errorbar
    monkeypatch.setattr(Axes, "errorbar", lambda ax, x, y, yerr=None, **kw: drawn.append((y, yerr)) or real(
        ax, x, y, yerr=yerr, **kw))
    plots.lines(t)
    (ys, (below, above)), = drawn
    assert [y - b for y, b in zip(ys, below)] == [0.0, pytest.approx(3.6)] and above[0] == 1.5


def test_a_cells_interval_is_the_medians_own_order_statistic_bounds_in_the_csv():
    """The CI of a median is asymmetric (order statistics): the CSV carries the run's own bounds, inverted for
    images/s, not the median -+ a symmetric half-width."""
    from harness.report.runs import Run
    from harness.report.tables import Table

    run = Run({"status": "FINISHED", "label": "PyTorch", "config": {"model": {"name": "m"}, "batch": 1},
               "metrics": {"latency_median_ms": 1.0, "latency_ci_low_ms": 0.9, "latency_ci_high_ms": 1.3,
                           "latency_ci_rel_halfwidth": 0.2, "samples": 50.0}}, ["model=m", "batch=1"])
    t = Table("t", "job", ["ms", "ips"], ["PyTorch"], cells={("ms", "PyTorch"): 1.0, ("ips", "PyTorch"): 1000.0},
              geomean=False)
    t.mark(("ms", "PyTorch"), run)
    t.mark(("ips", "PyTorch"), run, rate=True)
    frame = t.frame().set_index("job")
    assert (frame.loc["ms", "ci_low"], frame.loc["ms", "ci_high"]) == (pytest.approx(0.9), pytest.approx(1.3))
    assert (frame.loc["ips", "ci_low"], frame.loc["ips", "ci_high"]) == (pytest.approx(1000 / 1.3),
                                                                         pytest.approx(1000 / 0.9))
