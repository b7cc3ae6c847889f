"""The compiled DP core against the Python reference: the same schedules, costs and counters."""

import io
import os

import pytest

from ios_core.cost import AnalyticCostModel
from ios_core.models import build_model
from ios_core.passes import apply_passes
from ios_core.progress import Progress
from ios_core.schedule import SearchOptions, native, optimize
from ios_core.schedule.optimizer import PartDAG, SearchStats, _PartSearch, parts_of
from ios_core.workload import Workload

from .helpers import SMALL
from .test_schedule import random_dag

needs_core = pytest.mark.skipif(not native.available(), reason="the compiled DP core is not built")


def test_the_install_built_the_compiled_core():
    """The README's install builds the core; a machine without a C++ compiler runs the Python core
    (set IOS_ALLOW_PYTHON_CORE=1 there to accept it)."""
    if os.environ.get("IOS_ALLOW_PYTHON_CORE"):
        pytest.skip("IOS_ALLOW_PYTHON_CORE is set")
    assert native.available(), f"the compiled DP core is not built ({native.MISSING}): rerun ./install.sh"
    assert native.core_name() == "compiled (C++)"


class Hidden:
    """A cost model without the per-unit composition: the core must call back for every stage
    (as it does for the measured model)."""

    name = "hidden"

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def stage_latency(self, graph, stage):
        self.calls += 1
        return self.inner.stage_latency(graph, stage)

    def stats(self):
        return {}


def _both(graph, nodes, cost, variant=(True, True), r=3, s=8, ending="corrected", keep=1, slack=0.9):
    out = []
    for cls in (_PartSearch, native.NativePartSearch):
        stats = SearchStats()
        search = cls(graph, PartDAG(graph, nodes), cost, *variant, r, s, ending, stats, lambda: None, keep=keep,
                     slack=slack)
        sols = search.solutions()
        evaluated = sorted(search.latency.items())
        out.append((sols, (stats.states, stats.transitions, stats.stage_evaluations, stats.pruned), evaluated))
    return out


@needs_core
@pytest.mark.parametrize("seed", range(12))
def test_random_dags_same_k_best_and_counters(seed):
    g = random_dag(seed, n=6 + seed % 7)
    nodes = g.blocks[0].nodes
    analytic = AnalyticCostModel(1, "gpu")
    configs = [dict(), dict(keep=3), dict(slack=None), dict(ending="original", s=2), dict(variant=(True, False)),
               dict(variant=(False, True), r=2, keep=2)]
    for cfg in configs:
        (ref_sols, ref_stats, ref_eval), (sols, stats, ev) = _both(g, nodes, analytic, **cfg)
        assert sols == ref_sols, cfg
        assert stats == ref_stats, cfg
        assert ev == ref_eval, cfg
    # every stage through the callback (the measured model's way): the same answer
    hidden = Hidden(analytic)
    (ref_sols, ref_stats, _), (sols, stats, _) = _both(g, nodes, hidden, keep=3)
    assert sols == ref_sols and stats == ref_stats
    assert hidden.calls == 2 * stats[2]  # each core asked each distinct stage once


@needs_core
@pytest.mark.parametrize("model, kw, part_size", [
    ("inception_v3", {}, 50), ("squeezenet", {}, 50), ("nasnet", SMALL["nasnet"], 50),
    ("randwire", SMALL["randwire"], 16)])
def test_zoo_identical_schedules(model, kw, part_size):
    """The four networks (randwire's parts cut at 16 units, so the Python reference stays quick
    here; BENCHMARKS.md times both cores on the full parts)."""
    g = apply_passes(build_model(model, **kw), ["fold_bias", "pool_conv"])[0]
    scheds = [optimize(Workload(g), AnalyticCostModel(1, "gpu"),
                       SearchOptions("ios-both", part_size=part_size, search_core=core))
              for core in ("python", "native")]
    ref, got = ([[(st.groups, st.merge) for st in b] for b in sc.blocks] for sc in scheds)
    assert got == ref
    keys = ("states", "transitions", "stage_evaluations", "pruned", "predicted_ms")
    assert {k: scheds[1].stats[k] for k in keys} == {k: scheds[0].stats[k] for k in keys}
    assert scheds[1].stats["states"] > 0


@needs_core
def test_parallel_workers_do_not_change_the_result():
    g = build_model("randwire", **SMALL["randwire"])
    work = Workload(g)
    one, two = (optimize(work, AnalyticCostModel(1, "cpu"), SearchOptions(part_size=20, search_workers=w))
                for w in (1, 2))
    assert one.to_dict()["blocks"] == two.to_dict()["blocks"]
    for k in ("states", "transitions", "stage_evaluations", "pruned", "predicted_ms"):
        assert one.stats[k] == two.stats[k], k
    with pytest.raises(ValueError, match="workers=-1 must be >= 0"):
        optimize(work, AnalyticCostModel(1, "cpu"), SearchOptions("ios-both", search_workers=-1))


@needs_core
def test_part_work_counts_the_states_the_dp_visits():
    g = build_model("randwire", **SMALL["randwire"])
    parts = parts_of(g.blocks[1], 50)
    dag = PartDAG(g, parts[0])
    states, work = native.part_work(dag, 3)
    stats = SearchStats()
    native.NativePartSearch(g, dag, AnalyticCostModel(1, "gpu"), True, True, 3, 8, "corrected", stats,
                            lambda: None).solutions()
    assert states == stats.states
    assert work >= states
    assert native.part_work(dag, 3, limit=10) is None


def test_core_option_errors(monkeypatch):
    with pytest.raises(ValueError, match="unknown search core 'fast'; choose one of: auto, native, python"):
        native.use_native("fast", 10)
    assert native.use_native("python", 10) is False
    monkeypatch.setattr(native, "_dpcore", None)
    assert native.use_native("auto", 10) is False
    with pytest.raises(RuntimeError, match="compiled core is not built.*rerun ./install.sh"):
        native.use_native("native", 10)
    assert native.core_name().startswith("python (the compiled core is not built")


@needs_core
def test_progress_line_names_the_core_and_counts_work(monkeypatch):
    """The bar's total is the work estimated before the search, so the line shows a share of the
    work (no unit counts) and the search's states."""
    lines = io.StringIO()
    real = Progress.__init__

    def init(self, *a, **kw):
        real(self, *a, **{**kw, "stream": lines, "interval": 0.0})
    monkeypatch.setattr(Progress, "__init__", init)
    g = build_model("nasnet", **SMALL["nasnet"])
    optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-both", progress=True))
    text = lines.getvalue()
    assert "search (compiled core, " in text and " states)]" in text
    assert "] 100%" in text


@needs_core
def test_a_compiled_search_lets_its_cost_model_go():
    """The compiled core holds the part search's callbacks (bound methods of the search, which holds the core): a
    cycle through C++ that the garbage collector cannot see. Unbroken it kept every cost model alive for the
    process, and with it the stage timer's weights and inputs (on the H100 about 600 MB on Inception v3, counted
    as the model's memory in the timed loop)."""
    import gc
    import weakref

    graph = build_model("inception_v3", **SMALL["inception_v3"])
    cost = AnalyticCostModel(1, "gpu")
    gone = weakref.ref(cost)
    optimize(Workload(graph), cost, SearchOptions("ios-both", search_core="native", part_size=8))
    del cost
    gc.collect()
    assert gone() is None


def test_a_long_block_is_cut_where_the_fewest_tensors_cross():
    """NASNet with its cells unmarked (as an imported or traced graph has it): the cuts fall on the zoo's cell
    boundaries, so the DP searches cells (torch.compile's NASNet searched 50-unit slices across cells for minutes);
    ``part_cuts="slice"`` keeps the paper's slices."""
    from itertools import accumulate

    from ios_core.ir.graph import Block

    marked = build_model("nasnet").blocks[0]
    bare = Block(marked.enter, marked.nodes)
    cells = set(accumulate(len(p) for p in marked.parts))
    cuts = set(accumulate(len(p) for p in parts_of(bare, 50, "live")))
    assert cuts <= cells and len(cuts) >= 20
    assert [len(p) for p in parts_of(bare, 50, "slice")] == [50] * 7 + [24]
