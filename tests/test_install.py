"""The package works outside its checkout: a wheel (not an editable install) finds its Hydra
configs and writes its results under the current directory."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_an_installed_wheel_runs_one_job_from_another_directory(tmp_path):
    src = tmp_path / "src"  # build from a copy: an in-tree build would leave build/ in the checkout
    for part in ("harness", "ios_core", "plugins", "conf", "hydra_plugins"):
        shutil.copytree(REPO / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / part, src / part)
    run = {"capture_output": True, "text": True, "timeout": 600}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path / "dist"), str(src)], **run)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("ios_harness-*.whl")
    site = tmp_path / "site"
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                           str(site), str(wheel)], **run)
    assert inst.returncode == 0, inst.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_PLUGINS"}
    env["PYTHONPATH"] = str(site)  # ahead of the checkout's editable install
    where = subprocess.run([sys.executable, "-c", "import harness, harness_conf, harness.config as c; "
                            "print(harness.__file__); print(c.conf_dir())"], cwd=work, env=env, **run)
    assert where.returncode == 0, where.stderr[-2000:]
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
    job = subprocess.run([sys.executable, "-m", "harness", "model=sample", "device=cpu", "runner=quick",
                          "tracking.enabled=false", "+model.params.channels=8"], cwd=work, env=env, **run)
    assert job.returncode == 0, job.stderr[-3000:]
    assert "Model: sample" in job.stdout
    found = subprocess.run([sys.executable, "-c", "from hydra.core.plugins import Plugins; "
                            "from hydra.plugins.launcher import Launcher; import sys; "
                            "print([sys.modules[c.__module__].__file__ for c in Plugins.instance().discover(Launcher) "
                            "if 'loadaware' in c.__module__])"], cwd=work, env=env, **run)
    assert str(site / "hydra_plugins" / "harness_loadaware") in found.stdout, found.stdout + found.stderr
    (record,) = (work / "results" / "records").glob("*.json")
    assert json.loads(record.read_text())["status"] == "FINISHED"
    helped = subprocess.run([sys.executable, "-m", "harness", "--help"], cwd=work, env=env, **run)
    assert "experiment: autotvm" in helped.stdout and not (site / "results").exists()
