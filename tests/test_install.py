"""The package works outside its checkout: a wheel (not an editable install) finds its Hydra
configs and writes its results under the current directory."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A new virtual environment outside the checkout holding the wheel alone; the dependencies come from the
    test's own environment through a path line (its site's .pth files, the editable install's finder among them,
    are not run from there, so nothing of the checkout can be imported)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                           str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stderr[-2000:]
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "torch").is_dir())
    (site / "zz_test_dependencies.pth").write_text(f"{deps}\n")
    return venv


def test_an_installed_wheel_runs_one_job_from_another_directory(tmp_path):
    """Built from a copy of the sources, installed into a fresh virtual environment outside the checkout: every
    package is in the wheel (a hand-kept list once missed ios_core.passes, and no backend could load), the configs
    ship with it, results go under the current directory, and PyTorch and IOS run end to end."""
    src = tmp_path / "src"  # build from a copy: an in-tree build would leave build/ in the checkout
    for part in ("harness", "ios_core", "plugins", "conf", "hydra_plugins"):
        shutil.copytree(REPO / part, src / part, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for part in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(REPO / part, src / part)
    run = {"capture_output": True, "text": True, "timeout": 600}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path / "dist"), str(src)], **run)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("ios_harness-*.whl")
    venv = _fresh_venv(tmp_path, wheel)
    python = str(venv / "bin" / "python")
    site = next((venv / "lib").glob("python3*/site-packages"))
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_PLUGINS", "PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([python, "-c", "import harness, harness_conf, ios_core.passes, harness.config as c; "
                            "print(harness.__file__); print(ios_core.passes.__file__); print(c.conf_dir())"],
                           cwd=work, env=env, **run)
    assert where.returncode == 0, where.stderr[-2000:]
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
    for backend in ("pytorch", "ios"):
        job = subprocess.run([python, "-m", "harness", "model=sample", f"backend={backend}", "device=cpu",
                              "runner=quick", "tracking.enabled=false", "+model.params.channels=8"],
                             cwd=work, env=env, **run)
        assert job.returncode == 0, job.stderr[-3000:]
        assert "Model: sample" in job.stdout
    found = subprocess.run([python, "-c", "from hydra.core.plugins import Plugins; "
                            "from hydra.plugins.launcher import Launcher; import sys; "
                            "print([sys.modules[c.__module__].__file__ for c in Plugins.instance().discover(Launcher) "
                            "if 'loadaware' in c.__module__])"], cwd=work, env=env, **run)
    assert str(site / "hydra_plugins" / "harness_loadaware") in found.stdout, found.stdout + found.stderr
    records = [json.loads(r.read_text()) for r in (work / "results" / "records").glob("*.json")]
    assert sorted(r["config"]["backend"]["name"] for r in records) == ["ios", "pytorch"]
    assert all(r["status"] == "FINISHED" for r in records)
    found = subprocess.run([python, "-c", "from importlib.metadata import entry_points; "
                            "print([e.value for e in entry_points(group='torch_dynamo_backends') if e.name == 'ios'])"],
                           cwd=work, env=env, **run)
    assert "['ios_core.dynamo:ios']" in found.stdout, found.stdout + found.stderr  # torch.compile(backend="ios")
    helped = subprocess.run([python, "-m", "harness", "--help"], cwd=work, env=env, **run)
    assert "experiment: autotvm" in helped.stdout and not (site / "results").exists()


def test_a_plugin_that_fails_to_load_stops_only_its_own_backend(tmp_path):
    """A broken third-party plugin (here: one that raises on import) leaves every other backend running and
    is named in one line when asked for."""
    pkg = tmp_path / "plugs"
    info = pkg / "broken_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[harness.backends]\nbroken = broken_plugin\n")
    (pkg / "broken_plugin.py").write_text("import not_a_module_anywhere\n")
    env = {**{k: v for k, v in os.environ.items() if k != "HARNESS_PLUGINS"}, "PYTHONPATH": str(pkg)}
    run = {"capture_output": True, "text": True, "timeout": 300, "cwd": tmp_path, "env": env}
    ok = subprocess.run([sys.executable, "-m", "harness", "model=sample", "device=cpu", "runner=quick",
                         "tracking.enabled=false", "+model.params.channels=8"], **run)
    assert ok.returncode == 0 and "Model: sample" in ok.stdout, ok.stderr[-2000:]
    bad = subprocess.run([sys.executable, "-m", "harness", "backend=broken", "device=cpu"], **run)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert ("the plugin 'broken' (broken_plugin) of the 'harness.backends' entry-point group failed to load: "
            "ModuleNotFoundError: No module named 'not_a_module_anywhere'") in bad.stderr, bad.stderr[-2000:]
    wide = {**run, "env": {**env, "COLUMNS": "400"}}
    listed = subprocess.run([sys.executable, "-m", "harness", "--list-backends"], **wide)
    assert "broken: ModuleNotFoundError" in listed.stdout, listed.stdout[-2000:]
