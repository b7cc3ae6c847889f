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


def test_an_ill_conditioned_model_passes_within_its_own_rounding_and_a_transposed_input_still_fails(bench_cfg):
    """The fixed fp32 tolerance fails every correct backend on a model whose own conditioning amplifies rounding;
    the check then allows a margin over the model evaluated in the precision on the CPU, and no more."""
    import harness
    from harness.measure.protocol import PRECISION_MARGIN

    model = {"name": "module", "target": "tests.helpers:cancelling_net", "image_size": 8}
    rec = harness.run(bench_cfg(model=model), quiet=True)
    assert rec.status == "FINISHED", rec.error
    m = rec.metrics
    assert m["max_rel_error"] > TOLERANCE["fp32"] and m["check_precision_error"] > TOLERANCE["fp32"]
    assert m["check_tolerance"] == pytest.approx(PRECISION_MARGIN * m["check_precision_error"])
    assert m["max_rel_error"] <= m["check_tolerance"] < 0.25
    bad = harness.run(bench_cfg(model=model, **{"backend.name": "test_transposed"}), quiet=True)
    assert bad.status == "FAILED"
    assert bad.error.startswith("CorrectnessError: output mismatch: relative error ")
    assert f"exceeds {PRECISION_MARGIN:g}x the error of the model evaluated in fp32 on the CPU" in bad.error


def test_a_well_conditioned_model_keeps_the_fixed_tolerance(bench_cfg):
    import harness

    rec = harness.run(bench_cfg(model={"name": "module", "target": "tests.helpers:tiny_net", "image_size": 8}),
                      quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["check_tolerance"] == TOLERANCE["fp32"] and "check_precision_error" not in rec.metrics
