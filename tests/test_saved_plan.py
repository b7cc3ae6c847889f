"""Issue 59 item 2: a plan saved as a folder loads in a new process ready to run, nothing searched or timed; one
made for another GPU, batch size, precision or library version is refused in one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.models import build_model
from ios_core.planner import Planner, PlanOptions
from ios_core.saved_plan import SavedPlanError, load_plan, save_plan
from ios_core.workload import Workload

from .helpers import SMALL

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    work = Workload(build_model("sample", **SMALL["sample"]), 2, "fp32", "a caller's label")
    options = PlanOptions(part_size=8, select=False)
    plan = Planner(options, tmp_path_factory.mktemp("store")).plan(work, "cpu")
    folder = save_plan(plan, work, options, tmp_path_factory.mktemp("plans") / "sample.plan")
    x = seeded_input(work.graph, 2, 0)
    np.save(folder.parent / "x.npy", x)
    return folder, plan, x, reference_forward(work.graph, x)


def test_a_saved_plan_runs_in_a_new_process_with_nothing_searched(saved):
    folder, plan, x, want = saved
    code = f"""
import json, numpy as np
from ios_core.saved_plan import load_plan
p = load_plan({str(folder)!r}, "cpu")
y = p.target.to_numpy(p.infer(p.load_input(np.load({str(folder.parent / 'x.npy')!r}))))
np.save({str(folder.parent / 'y.npy')!r}, y)
print(json.dumps({{"source": p.source, "blocks": p.schedule.to_dict()["blocks"],
                  "searched": "search_cost_s" in p.metrics, "layout": p.layout_how}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"source": "schedule file", "blocks": plan.schedule.to_dict()["blocks"], "searched": False,
                   "layout": "schedule file"}
    assert abs(np.load(folder.parent / "y.npy") - want).max() < 1e-3
    assert sorted(p.name for p in folder.iterdir()) == ["plan.json", "schedule.json", "weights.npz"]  # nothing added


@pytest.mark.parametrize(("field", "value", "says"), [
    ("device", "NVIDIA H200", "it was made for device 'NVIDIA H200', this is 'cpu'"),
    ("batch", 8, "it was made for batch 8, this is 2"),
    ("precision", "fp16", "it was made for precision 'fp16', this is 'fp32'"),
    ("libraries", "torch 1.0 cudnn None triton none", "it was made for libraries 'torch 1.0 cudnn None triton none', "
                                                      "this is 'torch ")])
def test_a_plan_made_for_another_gpu_batch_precision_or_library_is_refused_in_one_line(saved, tmp_path, field,
                                                                                         value, says):
    folder, *_ = saved
    other = tmp_path / "other.plan"
    other.mkdir()
    for f in folder.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    data = json.loads((other / "plan.json").read_text())
    data["made_for"][field] = value
    (other / "plan.json").write_text(json.dumps(data))
    with pytest.raises(SavedPlanError) as err:
        load_plan(other, "cpu", batch=2, precision="fp32")  # what this service runs
    text = str(err.value)
    assert text.startswith(f"{other}: ") and says in text and text.endswith("; plan it again here (its kernels and "
                                                                           "schedule were timed there)")
    assert "\n" not in text


def test_not_a_saved_plan_is_one_line(tmp_path):
    with pytest.raises(SavedPlanError, match=r"^.*/nothing: no saved plan there \(no plan.json\)$"):
        load_plan(tmp_path / "nothing", "cpu")
    (tmp_path / "plan.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(SavedPlanError, match=r"not a saved plan \(format 'something else', expected 'ios-plan-1'\)$"):
        load_plan(tmp_path, "cpu")


def test_the_example_plans_saves_loads_and_runs(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "examples" / "saved_plan.py"), "--folder", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"planned (searched) and saved to {tmp_path}/squeezenet.plan in ")
    assert lines[1].startswith("loaded (schedule file) and ran its first inference in ")
    assert lines[2].startswith("output (1, 1000, 1, 1), relative error against the float64 reference ")
    assert float(lines[2].rsplit(" ", 1)[1]) < 1e-4
    again = subprocess.run([*out.args, "--load-only"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(REPO)})  # a service's process: loads, plans nothing
    assert again.returncode == 0 and again.stdout.splitlines()[0].startswith("loaded (schedule file)"), again.stderr


def test_a_loaded_plan_takes_and_gives_torch_tensors(saved):
    """A service holds torch tensors: one goes in as it is (any device, any float type), one comes out."""
    import torch

    folder, _, x, want = saved
    ready = load_plan(folder, "cpu")
    y = ready.infer(ready.load_input(torch.from_numpy(x).double()))
    assert isinstance(y, torch.Tensor) and tuple(y.shape) == want.shape
    assert abs(y.detach().double().numpy() - want).max() < 1e-3
    nhwc = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)  # a caller's layout: made dense
    assert abs(ready.infer(ready.load_input(nhwc)).detach().double().numpy() - want).max() < 1e-3
    assert json.loads((folder / "plan.json").read_text())["made_for"]["device"] == "cpu"  # the device's own name
