"""The Record dataclass: what harness.run returns, and a JSON form that records already on disk
(older ones included) and the report's dict reader keep reading."""

import json

import pytest

import harness
from harness.records.record import Record

FINISHED = {"run_id": "a" * 32, "created": "2025-01-02T03:04:05+00:00",
            "config": {"model": {"name": "sample"}, "batch": 1, "tracking": {"results_dir": "/r"}},
            "tracking": {"enabled": True, "uri": "", "experiment": "harness", "sweep_id": "s1", "job_num": 0},
            "status": "FINISHED", "metrics": {"latency_median_ms": 1.5}, "tags": {"device": "cpu"},
            "params": {"ios_final": "x"}, "artifacts": {"a.txt": "hi"}, "run_name": "sample PyTorch bs1 fp32 cpu",
            "latencies_ms": [1.4, 1.5, 1.6], "gpu_latencies_ms": [], "graph_hash": "h", "notes": [],
            "summary": "Model: sample ...", "label": "PyTorch", "ended": "2025-01-02T03:04:09+00:00",
            "mlflow_run_id": "m1"}
FAILED = {"run_id": "b" * 32, "created": "2025-01-02T03:04:05+00:00", "config": {}, "tracking": {"enabled": False},
          "status": "FAILED", "metrics": {}, "tags": {"harness.status": "FAILED"}, "params": {}, "artifacts": {},
          "run_name": "n", "error": "RuntimeError: kaboom", "detail": "", "summary": "s", "label": "l",
          "ended": "2025-01-02T03:04:06+00:00"}
OLDER = {"run_id": "c" * 32, "created": "2024-06-01T00:00:00+00:00", "config": {}, "tracking": {},
         "status": "FINISHED", "metrics": {"latency_median_ms": 2.0}, "tags": {}, "params": {}, "artifacts": {},
         "run_name": "old", "summary": "Model: old", "latencies_ms": [2.0],
         "future_key": {"kept": True}}  # no label, ended or notes yet; a key this release does not know


@pytest.mark.parametrize("data", [FINISHED, FAILED, OLDER], ids=["finished", "failed", "older"])
def test_the_json_form_round_trips_exactly(data):
    record = Record.from_dict(json.loads(json.dumps(data)))
    assert json.loads(json.dumps(record.to_dict())) == data  # no key added, none lost


def test_fields_are_typed_attributes_and_unknown_keys_are_kept():
    old = Record.from_dict(OLDER)
    assert old.label is None and old.ended is None and old.notes is None and old.mlflow_run_id is None
    assert old.metrics["latency_median_ms"] == 2.0 and old.extra == {"future_key": {"kept": True}}
    assert not old.skipped and "skipped" not in old.to_dict()


def test_a_file_that_is_not_a_record_is_refused():
    with pytest.raises(ValueError, match="not a harness record: it has no config, created, tracking"):
        Record.from_dict({"run_id": "x"})


def test_a_new_record_is_running_and_ends_with_its_status_tag():
    record = Record.new({"batch": 1}, {"enabled": False}, "name")
    assert record.status == "RUNNING" and len(record.run_id) == 32 and record.to_dict()["run_name"] == "name"
    assert set(record.to_dict()) == {"run_id", "created", "config", "tracking", "status", "metrics", "tags",
                                     "params", "artifacts", "run_name"}
    record.end("FAILED", "line", "label")
    assert record.tags["harness.status"] == "FAILED" and record.ended and record.summary == "line"


def test_run_returns_the_record_it_saved(bench_cfg, tmp_path):
    rec = harness.run(bench_cfg(), quiet=True)
    assert isinstance(rec, harness.Record) and rec.status == "FINISHED"
    (path,) = (tmp_path / "results" / "records").glob("*.json")
    saved = json.loads(path.read_text())
    assert saved == json.loads(json.dumps(rec.to_dict()))
    assert Record.from_dict(saved) == rec
    assert {"error", "detail", "mlflow_run_id", "skipped"}.isdisjoint(saved)  # only the keys that were set
    assert saved["notes"] == rec.notes and saved["label"] == rec.label == "PyTorch"


def test_the_report_reads_a_saved_record_as_a_dict(bench_cfg, tmp_path):
    from harness.report.runs import Run

    rec = harness.run(bench_cfg(**{"backend.name": "test_raise"}), quiet=True)
    (path,) = (tmp_path / "results" / "records").glob("*.json")
    run = Run(json.loads(path.read_text()), [])
    assert run.status == rec.status == "FAILED" and run.label == rec.label and run.value("batch") == "1"
    assert run.reason == "failed: kaboom in prepare" and run.metric("latency_median_ms") is None


def test_an_older_pending_record_uploads_and_keeps_its_unknown_keys(tmp_path):
    pytest.importorskip("mlflow")
    import harness.upload

    pending = tmp_path / "records" / "pending"
    pending.mkdir(parents=True)
    (pending / f"{OLDER['run_id']}.json").write_text(json.dumps(OLDER))
    assert harness.upload.main(["--results-dir", str(tmp_path)]) == 0
    done = json.loads((tmp_path / "records" / f"{OLDER['run_id']}.json").read_text())
    assert done["future_key"] == {"kept": True} and done["mlflow_run_id"]
    assert "label" not in done and not list(pending.glob("*.json"))


def test_a_record_is_on_the_disk_before_write_json_returns(tmp_path, monkeypatch):
    """Records and sweep state are flushed to the disk (the file, then the folder that holds its new name), so a
    machine that goes down right after a run keeps it."""
    import os

    from harness.records.tracking import write_json

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1])
    write_json(tmp_path / "records" / "r.json", {"status": "FINISHED"})
    assert synced[0].startswith(str(tmp_path / "records" / ".r.json.")) and synced[1] == str(tmp_path / "records")
    assert json.loads((tmp_path / "records" / "r.json").read_text()) == {"status": "FINISHED"}
