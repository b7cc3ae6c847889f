"""The CUDA runtimes against the reference (skipped without a GPU)."""

import pytest

from ios_core.cost import AnalyticCostModel
from ios_core.interpreters.reference import reference_forward, seeded_input
from ios_core.models import build_model
from ios_core.runtime import RUNTIMES, ScheduledModel
from ios_core.schedule import optimize

from .helpers import SMALL, rel_err

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("model", ["inception_v3", "nasnet"])
def test_cuda_runtimes_match_the_reference(model, runtime):
    g = build_model(model, **SMALL[model])
    sched = optimize(g, AnalyticCostModel(2, "gpu"), "ios-both")
    m = ScheduledModel(g, sched, "cuda", "fp32", runtime)
    x = seeded_input(g, 2, 0)
    infer, load = m.prepare(2)
    y = m.target.to_numpy(infer(load(x)))
    assert rel_err(y, reference_forward(g, x)) < 1e-4
