"""The correctness check can fail: with the zoo's seeded weights the output depends on the
input, so a backend that mis-lays its input out (channels reversed, NHWC read as NCHW)
fails the check on every zoo model."""

import numpy as np
import pytest

from harness.measure.protocol import TOLERANCE, relative_error
from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.models import MODELS, build_model

from .helpers import SMALL

ZOO = [m for m in MODELS if m != "onnx"]


def mangled(x: np.ndarray) -> dict[str, np.ndarray]:
    n, c, h, w = x.shape
    return {"channels reversed": x[:, ::-1].copy(),
            "NHWC read as NCHW": np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(n, c, h, w),
            "zeros": np.zeros_like(x)}


@pytest.mark.parametrize("model", ZOO)
def test_a_mis_laid_out_input_fails_the_check(model):
    g = build_model(model, **SMALL[model])
    x = seeded_input(g, 2, 0)
    ref = reference_forward(g, x)
    for what, bad in mangled(x).items():
        _, rel = relative_error(reference_forward(g, bad), ref)
        assert rel > TOLERANCE["tf32"], f"{model}: {what} passes the check (relative error {rel:.2g})"
        assert rel > TOLERANCE["fp32"] * 10


def test_onnx_model_that_cannot_see_its_input_is_warned_about(bench_cfg, tmp_path):
    import harness
    from ios_core.onnx import export_onnx

    g = build_model("sample", **SMALL["sample"])
    for n in g.nodes():  # weights that wash the input out: all zero but the last bias
        if getattr(n, "weight", None) is not None:
            n.weight[...] = 0.0
    path = tmp_path / "blind.onnx"
    export_onnx(g, str(path))
    with pytest.warns(UserWarning, match="the correctness check cannot see the input"):
        rec = harness.run(bench_cfg(**{"model": {"name": "onnx", "params": {"path": str(path)}}}), quiet=True)
    assert rec.metrics["check_input_sensitivity"] == 0.0
