"""The plugin contract is enforced: a plugin that returns something other than a Backend
subclass, an empty or duplicate name, or a misspelt hook is refused with one line naming it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import plugins
from harness.backend import Backend, BackendError, Prepared
from harness.hookspecs import hookimpl
from ios_core.errors import UserError

REPO = Path(__file__).resolve().parents[1]


class Good(Backend):
    name = "contract_good"

    def prepare(self, model, batch, device, precision):
        return Prepared(infer=lambda x: x)


class NoName(Good):
    name = ""


class Twin(Good):
    name = "pytorch"


def with_plugin(monkeypatch, obj):
    pm = plugins.plugin_manager.__wrapped__()  # a fresh manager: the cached one stays clean
    pm.register(obj, name="bad_plugin")
    monkeypatch.setattr(plugins, "plugin_manager", lambda: pm)
    plugins.backends.cache_clear()
    return pm


@pytest.mark.parametrize("provided,message", [
    ([object], r"plugin 'bad_plugin' returned <class 'object'>, which is not a harness.backend.Backend subclass"),
    ([NoName], r"plugin 'bad_plugin': backend class NoName has an empty name"),
    ([Twin], r"both provide a backend named 'pytorch'"),
])
def test_bad_plugins_are_refused_by_name(monkeypatch, provided, message):
    class Plugin:
        @hookimpl
        def harness_backends(self):
            return provided
    with_plugin(monkeypatch, Plugin())
    try:
        with pytest.raises(BackendError, match=message):
            plugins.backends()
    finally:
        plugins.backends.cache_clear()


def test_a_good_plugin_is_registered_like_the_built_in_ones(monkeypatch):
    class Plugin:
        @hookimpl
        def harness_backends(self):
            return [Good]
    with_plugin(monkeypatch, Plugin())
    try:
        assert plugins.backends()["contract_good"] is Good and "ios" in plugins.backends()
    finally:
        plugins.backends.cache_clear()


def test_a_misspelt_hook_is_refused(monkeypatch, tmp_path):
    (tmp_path / "typo_plugin.py").write_text("from harness.hookspecs import hookimpl\n\n@hookimpl\n"
                                             "def harness_backend():  # the hook is harness_backends\n"
                                             "    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HARNESS_PLUGINS", "typo_plugin")
    with pytest.raises(BackendError, match="a plugin implements a hook the harness does not have.*harness_backend"):
        plugins.plugin_manager.__wrapped__()


def test_backend_is_abstract_and_errors_share_one_base():
    with pytest.raises(TypeError, match="abstract"):
        type("Half", (Backend,), {"name": "half"})({})
    from harness.config import ConfigError
    from ios_core.ir import GraphError
    from ios_core.schedule import ScheduleError
    assert all(issubclass(e, UserError) for e in (ConfigError, BackendError, GraphError, ScheduleError))


def test_a_backend_holds_its_typed_config():
    """Backends read ``self.cfg.r``, not ``int(cfg["r"])``: the composed mapping becomes the
    backend's dataclass, its values checked once, closed choices with one message."""
    from harness.config import ConfigError
    from harness_plugins.ios.config import IosConfig
    from harness_plugins.pytorch.backend import Mode, PyTorchBackend, PyTorchConfig
    from harness_plugins.tvm.backend import AutoTvmBackend
    from harness_plugins.tvm.config import AutoTvmConfig

    b = PyTorchBackend({"name": "pytorch", "mode": "cudagraph", "compile_mode": "default", "channels_last": False})
    assert isinstance(b.cfg, PyTorchConfig) and b.cfg.mode is Mode.cudagraph and b.label() == "PyTorch-CUDAGraph"
    assert isinstance(AutoTvmBackend({"trials": 8}).cfg, AutoTvmConfig)
    assert IosConfig.from_mapping({"name": "ios", "r": 2}).r == 2
    with pytest.raises(ConfigError, match=r"^backend.mode='fast' is invalid; choose one of: eager, cudagraph, compile"):
        PyTorchConfig(mode="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^backend.schedule='ios' is invalid; choose one of: sequential, greedy"):
        IosConfig(schedule="ios")
    with pytest.raises(ConfigError, match=r"^backend.mdoe is not an option of backend 'pytorch'; its options: "):
        PyTorchConfig.from_mapping({"name": "pytorch", "mdoe": "eager"})


class Observer:
    """An external plugin of the run hooks: what it was told, in order."""

    def __init__(self):
        self.seen = []

    @hookimpl
    def harness_run_start(self, run):
        self.seen.append(("start", run.run_name, run.sweep is not None))

    @hookimpl
    def harness_run_recorded(self, run, record):
        self.seen.append(("recorded", record.status))

    @hookimpl
    def harness_run_finished(self, run, record):
        kept = (Path(run.results_dir) / "records" / f"{record.run_id}.json").exists()
        self.seen.append(("finished", record.status, record.skipped, kept))
        self.last = record


def test_an_external_plugin_observes_every_run_in_order(bench_cfg):
    import harness

    observer = Observer()
    pm = plugins.plugin_manager()
    pm.register(observer, name="observer")
    try:
        sweep = {"sweep_id": "obs123", "sweep_name": "observed"}
        first = harness.run(bench_cfg(), sweep=sweep, quiet=True)
        again = harness.run(bench_cfg(), sweep=sweep, quiet=True)  # reused: not measured, not recorded again
        failed = harness.run(bench_cfg(**{"backend.name": "test_raise"}), quiet=True)
    finally:
        pm.unregister(observer)
    name = "sample PyTorch bs1 fp32 cpu"
    assert observer.seen == [("start", name, True), ("recorded", "FINISHED"), ("finished", "FINISHED", False, True),
                             ("start", name, True), ("finished", "FINISHED", True, True),
                             ("start", "sample test_raise bs1 fp32 cpu", False), ("recorded", "FAILED"),
                             ("finished", "FAILED", False, True)]
    assert again.run_id == first.run_id and observer.last is failed


def test_a_sweeps_end_is_a_hook_an_external_plugin_observes_and_the_console_a_plugin_left_out(tmp_path):
    """A sweep's end goes through harness_sweep_finished: an external plugin sees it after the journal closed it
    (FAILED: one failed job counted), and with the console blocked no table is printed."""
    log = tmp_path / "seen.jsonl"
    env = {**os.environ, "HARNESS_PLUGINS": "tests.fake_backends,tests.sweep_observer", "SWEEP_OBSERVER_LOG": str(log),
           "HARNESS_BLOCK_PLUGINS": "console"}
    cmd = [sys.executable, "-m", "harness", "-m", "model=sample", "backend=overhead,test_raise", "runner=quick",
           "device=cpu", "tracking=off", f"tracking.results_dir={tmp_path}", "sweep.baseline=backend:overhead"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 1, done.stderr[-2000:]  # a job failed
    (seen,) = [json.loads(line) for line in log.read_text().splitlines()]
    state = json.loads(next((tmp_path / "records" / "sweeps").glob("*/sweep.json")).read_text())
    assert seen == {"sweep_id": state["sweep_id"], "ended": True, "failed": 1, "status": "FAILED",
                    "baseline": "backend:overhead",
                    "tracking": {"enabled": False, "uri": "", "experiment": "harness", "background": True}}
    assert "┏" not in done.stdout and "report: python -m harness.report" not in done.stdout  # no console


def test_mlflow_is_a_plugin_a_user_can_leave_out(tmp_path):
    """HARNESS_BLOCK_PLUGINS=mlflow: the run's record is kept, pending for harness.upload, and no store is made."""
    script = ("import harness; r = harness.run({'model': {'name': 'sample', 'params': {'channels': 8, 'size': 7}}, "
              "'device': {'type': 'cpu'}, 'runner': {'min_iters': 5, 'min_time_s': 0.0, 'max_time_s': 0.3, "
              f"'isolate': False}}, 'tracking': {{'results_dir': {str(tmp_path)!r}}}}}, quiet=True); "
              "print(r.status, r.tracking['enabled'])")
    env = {**os.environ, "HARNESS_BLOCK_PLUGINS": "mlflow"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["FINISHED", "True"], done.stderr[-2000:]
    assert len(list((tmp_path / "records" / "pending").glob("*.json"))) == 1
    assert not (tmp_path / "mlflow.db").exists()


def test_backends_are_asked_for_through_pluggys_hook_caller():
    """A hook-call monitor (pluggy's tracing) sees every plugin's harness_backends call: the backend contract
    goes through the hook caller, not around it."""
    seen: list[str] = []
    undo = plugins.plugin_manager().add_hookcall_monitoring(
        lambda name, impls, kwargs: seen.extend(i.plugin_name for i in impls if name == "harness_backends"),
        lambda outcome, name, impls, kwargs: None)
    plugins.backends.cache_clear()
    try:
        found = plugins.backends()
    finally:
        undo()
        plugins.backends.cache_clear()
    assert {"pytorch", "ios", "test_crash"} <= set(found)
    assert {"tests.fake_backends"} <= set(seen) and len(seen) == len(set(seen)) >= 3
