"""Issue 58's battery: every input the parent can know is bad, given as a user gives it on the command line, and
the one line and exit code it must get, side by side; nothing may be recorded (no record, no MLflow store)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: (the command line's arguments, the one line on stderr as a regex, the exit code); {dir} is the files' folder
CASES = [
    (["model=onnx", "model.path={dir}/trunc.onnx"], r"error: model.path=\S+/trunc.onnx: not a valid ONNX model \(.+\)",
     2),
    (["model=onnx", "model.path={dir}/random.onnx"], r"error: model.path=\S+/random.onnx: not a valid ONNX model "
                                                     r"\(.+\)", 2),
    (["model=onnx", "model.path={dir}/nope.onnx"], r"error: model.path=\S+/nope.onnx: no such file.*", 2),
    (["model=onnx", "model.path={dir}/cum.onnx", "backend=ios"],
     r"error: backend ios cannot take onnx:cum: ios_core's IR, which it needs, cannot import it: ONNX node '[^']+' "
     r"\(CumSum\): operator 'CumSum' is not supported; supported: .*", 2),
    (["model=module", "model.target=tests.helpers:lstm_net", "backend=ios"],
     r"error: backend ios cannot take module:lstm_net: ios_core's IR, which it needs, cannot import it: its layer "
     r"'rows' \(torch.nn.LSTM\) exports to the ONNX operator 'LSTM', which the IR does not take; run it on "
     r"backend=pytorch or backend=onnxruntime", 2),
    (["model=onnx", "model.path={dir}/symbolic.onnx"],
     r"error: model.path=\S+/symbolic.onnx: input 'input' has symbolic sizes \(3, h, w\): export the file with a "
     r"fixed channel count and image size", 2),
    (["model=onnx", "model.path={dir}/whole.onnx", "model.image_size=7"],
     r"error: model.path=\S+/whole.onnx: its input 'input' is fixed at 8x8 px, not model.image_size=7: leave "
     r"model.image_size out, or export the file at 7 px", 2),
    (["model=onnx", "model.path={dir}/whole.onnx", "batch=4"],
     r"error: model.path=\S+/whole.onnx: input 'input' has batch size 1 fixed in the file; run it with batch=1, or "
     r"export it with a dynamic batch dimension", 2),
    (["model=module", "model.target=tests.helpers:wrong_width_net"],
     r"error: model.target=tests.helpers:wrong_width_net: its module's forward fails on a \(1, 3, 224, 224\) "
     r"input: RuntimeError: .+", 2),
    (["model=module", "model.target=os:getcwd"], r"error: model.target=os:getcwd returned str, not a torch.nn.Module",
     2),
    (["model=module", "model.target=nope_pkg.nets:make"], r"error: .*no module 'nope_pkg.nets' on the Python path.*",
     2),
    (["model=torchvision", "model.arch=squeezenet1_0", "model.image_size=7"],
     r"error: model.image_size=7 is too small for squeezenet1_0: the smallest input it runs at is 21 px", 2),
    (["model=vgg"], r"error: Could not find 'model/vgg'; choose one of: .*", 2),
    (["backend=nope"], r"error: Could not find 'backend/nope'; choose one of: .*", 2),
    (["backend.mdoe=x"], r"error: Could not override 'backend.mdoe'.: Key 'mdoe' not in 'PyTorchConfig'; valid keys: "
                         r"mode, .*", 2),
    (["+backend.mdoe=x"], r"error: backend.mdoe is not an option of backend 'pytorch'; its options: mode, .*", 2),
    (["batch=0"], r"error: batch=0 is invalid: the batch size must be a positive integer", 2),
    (["precision=fp8"], r"error: Error merging override precision=fp8: Invalid value 'fp8', expected one of "
                        r"\[fp32, tf32, fp16, bf16\].*", 2),
    (["device=cuda"], r"error: device=cuda was asked for but no CUDA GPU is available .*", 2),
    (["tracking.results_dir=/proc/nope"], r"error: tracking.results_dir=/proc/nope cannot be written: .*; choose a "
                                          r"writable folder", 2),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """A valid ONNX file (its batch and size fixed), the same cut short, random bytes, a file of symbolic size, and
    a file with an operator the IR cannot take."""
    import torch

    from tests.helpers import cumsum_net

    folder = tmp_path_factory.mktemp("inputs")
    whole = folder / "whole.onnx"
    torch.onnx.export(torch.nn.Conv2d(3, 64, 3), (torch.zeros(1, 3, 8, 8),), str(whole), dynamo=False,
                      input_names=["input"])
    torch.onnx.export(torch.nn.Conv2d(3, 4, 3), (torch.zeros(1, 3, 8, 8),), str(folder / "symbolic.onnx"),
                      dynamo=False, input_names=["input"], dynamic_axes={"input": {0: "n", 2: "h", 3: "w"}})
    (folder / "trunc.onnx").write_bytes(whole.read_bytes()[:2000])
    (folder / "random.onnx").write_bytes(os.urandom(4096))
    torch.onnx.export(cumsum_net(), (torch.zeros(1, 3, 8, 8),), str(folder / "cum.onnx"), dynamo=False,
                      input_names=["input"], dynamic_axes={"input": {0: "n"}})
    return folder


@pytest.mark.parametrize(("args", "line", "code"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line_and_an_exit_code_before_any_work(files, tmp_path, args, line, code):
    if args == ["device=cuda"] and shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi"]).returncode == 0:
        pytest.skip("this machine has a GPU")
    results = tmp_path / "r"
    given = [a.replace("{dir}", str(files)) for a in args]
    if not any(a.startswith("tracking.results_dir=") for a in given):
        given.append(f"tracking.results_dir={results}")
    if not any(a.startswith("device=") for a in given):
        given.append("device=cpu")
    out = subprocess.run([sys.executable, "-m", "harness", "runner=quick", *given], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == code and len(lines) == 1 and re.fullmatch(line, lines[0]), out.stderr[-2000:]
    assert not (results / "records").exists() and not (results / "mlflow.db").exists()  # nothing ran or was recorded
