"""Sweeps through Submitit (``hydra/launcher=submitit_local`` here, ``submitit_slurm`` on a
cluster): the launcher composes with the harness config, and a local sweep runs each job in a
Submitit process and still ends with one sweep state, the records and an MLflow parent run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")

from harness.records import background  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LAUNCHERS = "hydra_plugins.hydra_submitit_launcher.submitit_launcher"


def compose_with_hydra(overrides: list[str]):
    """The config the CLI builds, ``hydra`` node included (the launcher lives there)."""
    from hydra import compose, initialize_config_dir

    from harness.config import conf_dir
    from harness.plugins import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def test_submitit_local_composes(tmp_path):
    cfg = compose_with_hydra(["hydra/launcher=submitit_local", "device=cpu", f"tracking.results_dir={tmp_path}"])
    launcher = cfg.hydra.launcher
    assert launcher._target_ == f"{LAUNCHERS}.LocalLauncher"
    # Submitit's job files go beside the sweep's Hydra output, under tracking.results_dir
    assert launcher.submitit_folder == f"{cfg.hydra.sweep.dir}/.submitit/%j"
    assert cfg.hydra.sweep.dir.startswith(f"{tmp_path}/hydra/multirun/")
    assert [c.get("_target_") for c in cfg.hydra.callbacks.values()] == ["harness.multirun.callbacks.SweepCallback"]


def test_submitit_slurm_composes_with_cluster_settings(tmp_path):
    from hydra_plugins.harness_slurm.slurm_launcher import register

    register()  # as the CLI does: the harness's launcher (it waits for every job) behind Hydra's name
    cfg = compose_with_hydra(["hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=30",
                              "hydra.launcher.gpus_per_node=1", "hydra.launcher.partition=gpu",
                              "hydra.launcher.cpus_per_task=8",
                              "+hydra.launcher.additional_parameters={mail-type: END}",
                              "device=cuda", f"tracking.results_dir={tmp_path}"])
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.harness_slurm.slurm_launcher.SlurmLauncher"
    assert (launcher.timeout_min, launcher.gpus_per_node, launcher.partition, launcher.cpus_per_task) == \
        (30, 1, "gpu", 8)
    assert launcher.additional_parameters == {"mail-type": "END"}
    assert cfg.device.type == "cuda"  # the harness's own groups compose beside it as usual


def test_a_submitit_local_sweep_end_to_end(tmp_path):
    results = tmp_path / "r"
    res = subprocess.run([sys.executable, "-m", "harness", "-m", "hydra/launcher=submitit_local", "model=sample",
                          "backend=null", "batch=1,2", "runner=quick", "device=cpu",
                          f"tracking.results_dir={results}"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "Submitit 'local' sweep output dir" in res.stdout + res.stderr
    assert background.wait(results) == []  # the end batch (records, parent closed) sent by a detached upload

    # each job ran in a Submitit process of its own and returned its status through Submitit
    (sweep_out,) = (results / "hydra" / "multirun").iterdir()
    assert len(list(sweep_out.glob(".submitit/*/*_result.pkl"))) == 2

    records = [json.loads(p.read_text()) for p in (results / "records").glob("*.json")]
    assert sorted(r["config"]["batch"] for r in records) == [1, 2]
    assert all(r["status"] == "FINISHED" for r in records), [r.get("error") for r in records]
    (state,) = [json.loads(p.read_text()) for p in (results / "records" / "sweeps").glob("*/sweep.json")]
    assert state["status"] == "FINISHED" and state["parent_closed"]
    jobs = [json.loads(p.read_text()) for p in (results / "records" / "sweeps" / state["sweep_id"]).glob("jobs/*.json")]
    assert sorted(j["job_num"] for j in jobs) == [0, 1] and {j["status"] for j in jobs} == {"FINISHED"}
    assert {j["record_id"] for j in jobs} == {r["run_id"] for r in records}

    mlflow = pytest.importorskip("mlflow")
    client = mlflow.tracking.MlflowClient(f"sqlite:///{results / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("harness").experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("harness.parent") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == 2 and {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert {c.data.tags["harness.record_id"] for c in children} == {r["run_id"] for r in records}
    assert all(r.info.status == "FINISHED" for r in runs)
    # the sweep is named by its task overrides; its command also shows the launcher that ran it
    assert parent.info.run_name.startswith("sweep ") and "launcher" not in parent.info.run_name
    assert parent.data.tags["harness.command"].startswith(
        "python -m harness -m hydra/launcher=submitit_local model=sample backend=overhead")


def test_a_failed_submitit_job_fails_the_command(tmp_path):
    results = tmp_path / "r"
    res = subprocess.run([sys.executable, "-m", "harness", "-m", "hydra/launcher=submitit_local", "model=sample",
                          "backend=null", "batch=0,1", "runner=quick", "device=cpu", "tracking.enabled=false",
                          f"tracking.results_dir={results}"],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    (state,) = [json.loads(p.read_text()) for p in (results / "records" / "sweeps").glob("*/sweep.json")]
    assert state["status"] == "FAILED"  # batch=0 is refused in its Submitit process, batch=1 still runs
    assert "FINISHED" in res.stdout  # the end-of-sweep table
    assert res.returncode == 1 and "1 run(s) failed" in res.stderr, res.stderr[-2000:]


@pytest.mark.parametrize("extra, refused", [
    (["device=cuda"], True),  # the GPU for every job, several jobs at once: refused
    (["device=cpu"], False),
])
def test_a_parallel_local_launcher_is_refused_for_a_gpu_sweep(tmp_path, extra, refused):
    from harness.multirun.callbacks import overlapping_launcher

    cfg = compose_with_hydra(["hydra/launcher=submitit_local", f"tracking.results_dir={tmp_path}", *extra])
    why = overlapping_launcher(cfg)
    if refused:
        assert why is not None and why.startswith("hydra/launcher=submitit_local runs several jobs at once")
        assert "use hydra/launcher=loadaware (jobs share the CPUs, each measurement has the GPU to itself)" in why
    else:
        assert why is None


def test_a_gpu_sweep_on_submitit_local_stops_in_one_line_before_any_job(tmp_path):
    res = subprocess.run([sys.executable, "-m", "harness", "-m", "hydra/launcher=submitit_local", "model=sample",
                          "backend=null", "batch=1,2", "runner=quick", "device=cuda",
                          f"tracking.results_dir={tmp_path}"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "error: hydra/launcher=submitit_local runs several jobs at once" in res.stderr
    assert not (tmp_path / "records").exists()


@pytest.mark.parametrize("extra, refused", [
    ([], True),  # SLURM gives no GPU unless asked: the jobs would share the node's
    (["hydra.launcher.gpus_per_node=1"], False),
    (["hydra.launcher.gres=gpu:1"], False),
])
def test_a_gpu_sweep_on_slurm_must_ask_for_a_gpu_per_job(tmp_path, extra, refused):
    from harness.multirun.callbacks import overlapping_launcher
    from hydra_plugins.harness_slurm.slurm_launcher import register

    register()
    cfg = compose_with_hydra(["hydra/launcher=submitit_slurm", "device=cuda", f"tracking.results_dir={tmp_path}",
                              *extra])
    why = overlapping_launcher(cfg)
    if refused:
        assert why == ("hydra/launcher=submitit_slurm asks SLURM for no GPU, so the jobs would share whatever GPUs "
                       "the node shows them: add hydra.launcher.gpus_per_node=1 (each job gets a GPU of its own "
                       "through SLURM's gres)")
    else:
        assert why is None


def test_slurm_accounting_that_cannot_be_read_is_named(tmp_path, monkeypatch):
    """Submitit knows a job that ended without a result only from sacct: the launcher says when it cannot answer."""
    from harness.multirun.slurm import accounting_problem

    monkeypatch.setenv("PATH", str(tmp_path))  # no sacct at all
    assert accounting_problem().startswith("sacct could not run: ")
    fake = tmp_path / "sacct"  # a cluster without slurmdbd answers like this
    fake.write_text("#!/bin/sh\necho 'sacct: error: Slurm accounting storage is disabled' >&2\nexit 1\n")
    fake.chmod(0o755)
    assert accounting_problem() == "sacct: error: Slurm accounting storage is disabled"


def test_without_the_submitit_extra_hydra_has_nothing_to_warn_about(tmp_path):
    """Hydra's plugin discovery imports every hydra_plugins module: the harness's SLURM shell must import
    without Hydra's Submitit plugin (a GPU machine without the extra printed an import error on every run)."""
    code = ("import runpy, sys\n"
            "sys.modules['hydra_plugins.hydra_submitit_launcher'] = None  # the extra not installed\n"
            f"sys.argv = ['harness', 'model=sample', 'backend=pytorch', 'device=cpu', 'tracking=off', "
            f"'tracking.results_dir={tmp_path}', 'runner.max_time_s=0.2', 'runner.min_time_s=0.1', "
            f"'runner.warmup_time_s=0', 'runner.min_iters=3']\n"
            "runpy.run_module('harness', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "harness_slurm" not in proc.stderr, proc.stderr[-2000:]
    assert "Latency:" in proc.stdout
