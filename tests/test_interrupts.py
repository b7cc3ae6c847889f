"""Ctrl-C, SIGTERM and kill -9 of a run: one line, the right exit code, the record kept as
KILLED, and no measuring child left running."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

LONG = ["model=sample", "backend=pytorch", "device=cpu", "tracking=off", "runner.min_time_s=120",
        "runner.max_time_s=120", "runner.ci_rel_target=0.0", "runner.min_iters=10000000", "runner.max_iters=10000000",
        "runner.timeout_s=300"]


def start(tmp_path: Path, tracking: bool = False) -> tuple[subprocess.Popen, psutil.Process]:
    # SIGINT's default disposition, whatever this suite inherited: a shell starts background jobs with
    # SIGINT ignored, the child would inherit that, and Python keeps an ignored SIGINT ignored
    args = [a for a in LONG if a != "tracking=off" or not tracking]  # tracking: the local store, the background upload
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args, f"tracking.results_dir={tmp_path}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:  # wait for the spawned measuring child to be timing:
        kids = [c for c in psutil.Process(proc.pid).children(recursive=True) if "python" in c.name().lower()]
        busy = [c for c in kids if c.cpu_times().user > 3.0]  # past its imports (~1 s) and preparation
        if busy:
            return proc, busy[0]
        time.sleep(0.5)
    proc.kill()
    pytest.fail(f"the measuring child never started: {proc.communicate()[1][-2000:]}")


def gone(p: psutil.Process, within: float) -> bool:
    try:
        p.wait(within)
        return True
    except psutil.TimeoutExpired:
        return False


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_keeps_the_record_and_ends_the_child(tmp_path, sig, code):
    proc, child = start(tmp_path)
    os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-2000:]
    lines = [x for x in err.splitlines() if x.strip()]
    assert lines[-1].startswith("interrupted: sample PyTorch bs1 fp32 cpu stopped by " + sig.name)
    assert "Traceback" not in err
    assert gone(child, 5)
    records = list((tmp_path / "records").rglob("*.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text())
    assert rec["status"] == "KILLED" and sig.name in rec["error"]
    # the child was timing: what it had measured is kept
    assert rec["metrics"]["interrupted"] == 1.0 and rec["metrics"]["samples"] >= 1
    assert len(rec["latencies_ms"]) >= 1


@pytest.mark.parametrize("second_after_s", [0.03, 0.05, 0.08])  # -2 (an uncaught KeyboardInterrupt) at 0.05 before
def test_a_second_ctrl_c_while_the_run_stops_changes_nothing(tmp_path, second_after_s):
    proc, child = start(tmp_path, tracking=True)
    time.sleep(5)
    os.kill(proc.pid, signal.SIGINT)
    time.sleep(second_after_s)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    lines = [x for x in err.splitlines() if x.strip()]
    assert proc.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert lines[-1].startswith("interrupted: sample PyTorch bs1 fp32 cpu stopped by SIGINT")
    records = list((tmp_path / "records").glob("**/????????????????????????????????.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["status"] == "KILLED"


@pytest.mark.parametrize("parent_too", [True, False])
def test_a_child_terminated_first_ends_the_run_killed_only_if_the_run_was_stopped(tmp_path, parent_too):
    """scancel signals every process of the job: the child may die before its parent hears its own SIGTERM.
    That is a stopped run (KILLED, 143), not a crash; a child terminated alone is the run's failure."""
    proc, child = start(tmp_path)
    child.terminate()
    if parent_too:
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    rec = json.loads(next((tmp_path / "records").rglob("*.json")).read_text())
    if parent_too:
        assert (proc.returncode, rec["status"]) == (143, "KILLED"), err[-2000:]
    else:
        assert (proc.returncode, rec["status"]) == (1, "FAILED"), err[-2000:]
        assert rec["error"] == "the measuring process died with SIGTERM"
    assert "Traceback" not in err


def test_kill_9_of_the_parent_leaves_no_child(tmp_path):
    proc, child = start(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    assert gone(child, 3)


def test_ctrl_c_while_the_harness_starts_is_one_line(tmp_path):
    """Ctrl-C during the imports, plugin loading or Hydra's composition (seconds on a slow
    machine) used to print the traceback of wherever it fell; now one line and exit 130."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", "model=sample", "backend=overhead", "backend.cpu_s=60",
                             "device=cpu", "tracking=off", f"tracking.results_dir={tmp_path}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while psutil.Process(proc.pid).cpu_times().user < 0.3:  # importing (torch alone takes longer)
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted: stopped by SIGINT")
    assert not list(tmp_path.rglob("*.json"))  # no run began: nothing recorded


@pytest.mark.parametrize("command,quiet", [("harness", True), ("harness.upload", False), ("harness.report", False)])
def test_only_python_m_harness_exits_quietly_while_starting(monkeypatch, command, quiet):
    """The start-up handler is for `python -m harness` alone: upload and report do their work
    while "starting" by that measure, and their Ctrl-C must not say that nothing was run."""
    from harness import interrupts

    monkeypatch.setattr(sys, "orig_argv", [sys.executable, "-m", command, "x=1"], raising=False)
    monkeypatch.setattr(sys, "argv", ["-m", "x=1"])
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupts.quiet_while_starting()
        assert (signal.getsignal(signal.SIGINT) is interrupts._while_starting) == quiet
        interrupts.started()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


# -- bad input that used to slip through (issue 11's table) ------------------------------

def test_protocol_values_are_checked(bench_cfg):
    from harness.config import ConfigError
    from harness.job import run

    with pytest.raises(ConfigError, match="runner.max_iters=0 must be >= 1"):
        run(bench_cfg(**{"runner.max_iters": 0}), quiet=True)
    with pytest.raises(ConfigError, match="and >= runner.min_iters=50"):
        run(bench_cfg(**{"runner.min_iters": 50, "runner.max_iters": 10}), quiet=True)
    with pytest.raises(ConfigError, match="runner.min_time_s=-1"):
        run(bench_cfg(**{"runner.min_time_s": -1.0}), quiet=True)


def test_onnx_model_without_a_path_says_how_to_give_one():
    from ios_core.ir import GraphError
    from ios_core.models import build_model

    with pytest.raises(GraphError, match=r"model=onnx needs the file: add \+model.params.path="):
        build_model("onnx")


def test_a_schedule_file_holding_a_list_is_refused(tmp_path):
    from ios_core.schedule import Schedule, ScheduleError

    p = tmp_path / "s.json"
    p.write_text("[1, 2]")
    with pytest.raises(ScheduleError, match="the file holds a JSON list"):
        Schedule.load(p)


def test_ios_store_follows_the_results_dir(bench_cfg, tmp_path):
    from harness.job import run

    rec = run(bench_cfg(**{"backend.name": "ios", "backend.cost_model": "analytic", "backend.progress": False}),
              quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert Path(rec.params["schedule_path"]).is_relative_to(tmp_path / "results" / "schedules")


def test_upload_hint_names_a_custom_results_dir(tmp_path):
    from harness.records.tracking import upload_command

    assert upload_command(tmp_path) == f"python -m harness.upload --results-dir {tmp_path.resolve()}"
    from harness.config import TrackingConfig
    assert upload_command(TrackingConfig.results_dir) == "python -m harness.upload"


def test_an_undeclared_backend_key_is_refused(bench_cfg):
    from harness.config import ConfigError
    from harness.job import run

    with pytest.raises(ConfigError, match=r"backend.mdoe is not an option of backend 'pytorch'; its options: .*mode"):
        run(bench_cfg(**{"backend.mdoe": "x"}), quiet=True)


def test_cli_refuses_typos_paths_and_unwritable_results(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "harness", "model=sample", "device=cpu", "runner=quick",
                               "tracking=off", *args], capture_output=True, text=True, timeout=120)
    out = cli("+backend.mdoe=x", f"tracking.results_dir={tmp_path}")
    assert out.returncode == 2 and "error: backend.mdoe is not an option" in out.stderr
    out = cli("model=../../../tmp/x")
    assert out.returncode == 2 and "error: model='../../../tmp/x' is not a model name" in out.stderr
    out = cli("tracking.results_dir=/proc/nope")
    assert out.returncode == 2 and "error: tracking.results_dir=/proc/nope cannot be written" in out.stderr
    assert "Traceback" not in out.stderr
    out = cli("backend=test_missing", f"tracking.results_dir={tmp_path}")  # found before the child starts
    assert out.returncode == 2 and out.stderr.strip() == ("error: backend 'test_missing' needs "
                                                          "surely_not_a_module_xyz, which is not installed: "
                                                          "pip install -e '.[tvm]'")
    assert not (tmp_path / "records").exists()  # nothing measured, no FAILED record


@pytest.mark.parametrize("name", ["overhead", "null"])
def test_overhead_backend_by_name_and_by_its_old_name(tmp_path, name):
    out = subprocess.run([sys.executable, "-m", "harness", "model=sample", "device=cpu", "runner=quick",
                          "tracking=off", f"backend={name}", f"tracking.results_dir={tmp_path}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1500:]
    assert "Optimization: Overhead" in out.stdout


def test_too_small_an_image_names_the_minimum():
    from ios_core.ir import GraphError
    from ios_core.models import build_model

    with pytest.raises(GraphError, match=r"model 'inception_v3' needs image_size >= 75$"):
        build_model("inception_v3", image_size=16)
    with pytest.raises(GraphError, match=r"model 'squeezenet' needs image_size >= 29$"):
        build_model("squeezenet", image_size=16)


def test_model_ranges_and_a_missing_onnx_path_are_checked_in_the_parent(bench_cfg, tmp_path):
    """No child is spawned and no FAILED run recorded: ConfigError before any work."""
    from harness.config import ConfigError
    from harness.job import run

    cfg = bench_cfg(**{"model": {"name": "inception_v3", "params": {"image_size": 16}}, "runner.isolate": True})
    with pytest.raises(ConfigError, match=r"needs image_size >= 75"):
        run(cfg, quiet=True)
    with pytest.raises(ConfigError, match=r"^model=onnx needs the file: add model.path="):
        run(bench_cfg(**{"model": {"name": "onnx", "params": {"path": "???"}}}), quiet=True)
    assert not (tmp_path / "results" / "records").exists()


def test_missing_input_files_are_refused_before_any_work(bench_cfg, tmp_path):
    from harness.config import ConfigError
    from harness.job import run

    with pytest.raises(ConfigError, match=r"model.params.path=/nope/x.onnx: no such file"):
        run(bench_cfg(**{"model": {"name": "onnx", "params": {"path": "/nope/x.onnx"}}}), quiet=True)
    with pytest.raises(ConfigError, match=r"backend.schedule_file=/nope/s.json: no such file"):
        run(bench_cfg(**{"backend.name": "ios", "backend.schedule_file": "/nope/s.json"}), quiet=True)
    assert not (tmp_path / "results" / "records").exists()


SCRIPT = """import harness
rec = harness.run(overrides=["model=sample", "backend=overhead", "device=cpu", "runner=quick", "tracking=off",
                             "tracking.results_dir={results}"], quiet=True)
print("RESULT", rec.status, rec.error)
"""


@pytest.mark.parametrize("how", ["script", "stdin"])
def test_run_from_a_script_without_a_main_guard_measures_once(tmp_path, how):
    code = SCRIPT.format(results=tmp_path / "results")
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_PLUGINS"}  # the built-in backends only
    if how == "script":
        (tmp_path / "bench_me.py").write_text(code)
        res = subprocess.run([sys.executable, str(tmp_path / "bench_me.py")], capture_output=True, text=True,
                             timeout=300, cwd=tmp_path, env=env)
    else:
        res = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=300,
                             cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("RESULT") == 1 and "RESULT FINISHED None" in res.stdout, res.stdout + res.stderr[-2000:]
    records = list((tmp_path / "results" / "records").rglob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["status"] == "FINISHED"
