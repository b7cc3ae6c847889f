"""The CLI's answers that need no run (--help, --list-backends) import no framework, and say install commands
as this install needs them (issue 56)."""

from __future__ import annotations

import os
import subprocess
import sys

from harness import install

#: a process where importing a framework fails, then ``python -m harness`` with the given arguments
_BLOCKED = """
import importlib.abc, importlib.machinery, runpy, sys
FRAMEWORKS = ("torch", "jax", "tensorflow", "tvm", "timm", "torchvision", "mlflow")
class Block(importlib.abc.MetaPathFinder, importlib.abc.Loader):  # found (so "installed"), never imported
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FRAMEWORKS:
            return importlib.machinery.ModuleSpec(name, self)
    def create_module(self, spec):
        raise ImportError(f"{spec.name} is blocked in this test")
    def exec_module(self, module):
        raise ImportError(f"{module.__name__} is blocked in this test")
sys.meta_path.insert(0, Block())
sys.argv = ["harness", *sys.argv[1:]]
runpy.run_module("harness", run_name="__main__")
"""


def _blocked(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "400", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-c", _BLOCKED, *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_help_lists_every_backend_without_importing_a_framework():
    out = _blocked("--help")
    assert out.returncode == 0, out.stderr[-2000:]
    for text in ("backend=ios", "backend=pytorch", "backend.schedule=", "runner.lane_cores=2", "--list-backends",
                 "--list-models", "harness.report --compare", "model.arch=", "fp32, tf32, fp16, bf16"):
        assert text in out.stdout, text
    assert out.stdout.count("backend.store=") == 1  # every backend's option, listed once with what it is
    assert "runner.processes=1                         measure the job this many times" in out.stdout


def test_list_backends_without_a_framework_keeps_the_brackets_of_install_commands():
    out = _blocked("--list-backends")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "pip install -e '.[onnx]'" in out.stdout  # rich markup would have eaten "[onnx]"
    ios_row = next(line for line in out.stdout.splitlines() if line.startswith("│ ios "))
    assert "ready (cpu)" in ios_row  # its plugin loaded, torch found but not imported


def test_install_hints_name_the_package_outside_a_checkout(monkeypatch):
    monkeypatch.setattr(install, "editable", lambda: False)
    assert install.fit("needs onnx: pip install -e '.[onnx]'") == "needs onnx: pip install 'ios-harness[onnx]'"
    monkeypatch.setattr(install, "editable", lambda: True)
    assert install.fit("pip install -e '.[tvm]'") == "pip install -e '.[tvm]'"


def test_warnings_read_as_one_line_unless_debugging(monkeypatch):
    import warnings

    from harness.messages import one_line_warnings

    python_form = warnings.formatwarning
    monkeypatch.setattr(warnings, "formatwarning", python_form)
    monkeypatch.setenv("HARNESS_DEBUG", "1")
    one_line_warnings()
    assert warnings.formatwarning is python_form
    monkeypatch.delenv("HARNESS_DEBUG")
    one_line_warnings()
    assert warnings.formatwarning("MLflow is not installed", UserWarning, "harness/job.py", 114) == \
        "warning: MLflow is not installed\n"
    assert warnings.formatwarning("old", DeprecationWarning, "x.py", 1) == "warning: old (DeprecationWarning)\n"


def test_a_cpu_runs_parent_process_never_imports_torch(tmp_path):
    """Only the measuring child needs torch: the parent resolves the device through NVML and reads the child's
    result as plain values (a second of every run's overhead, issue 56). Nor does loading the plugins import onnx
    (the TASO and TensorRT plugins did: 0.6 s), or anything scipy.stats (0.6 s more than the CIs' scipy.special)."""
    code = ("import atexit, runpy, sys\n"
            "heavy = lambda: sorted(m for m in ('torch', 'onnx', 'scipy.stats') if m in sys.modules)\n"
            "atexit.register(lambda: print('parent imported torch:', 'torch' in sys.modules, heavy()))\n"
            "sys.argv = ['harness', *sys.argv[1:]]\n"
            "runpy.run_module('harness', run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", code, "model=sample", "device=cpu", "runner=quick", "backend=pytorch",
                          "tracking.enabled=false", f"tracking.results_dir={tmp_path}"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Model: sample" in out.stdout and "parent imported torch: False []" in out.stdout
