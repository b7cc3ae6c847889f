"""Schedules, the merge rewrite and the IOS DP (against brute force), on the CPU."""

import itertools
import json

import numpy as np
import pytest

from ios_core.cost import AnalyticCostModel, CostCache, MeasuredCostModel, bounds
from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.ir import GraphBuilder
from ios_core.models import build_model
from ios_core.runtime import ScheduledModel, StageTimer, TorchTarget
from ios_core.schedule import (
    Schedule,
    ScheduleError,
    SearchOptions,
    Stage,
    apply_merges,
    can_merge,
    greedy,
    merge_convs,
    optimize,
    sequential,
)
from ios_core.schedule.optimizer import parts_of
from ios_core.workload import Workload

from .helpers import SMALL, rel_err


def random_dag(seed: int, n: int = 7):
    """A one-block graph of ``n`` convs; some read the input (so they can merge), others
    sum or concatenate earlier outputs. Every unit reaches the exit concat."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(f"rand{seed}", (4, 8, 8))
    b.block()
    vals = []
    for i in range(n):
        if i == 0 or rng.random() < 0.4:
            src = [[b.x]]
        else:
            picks = sorted(rng.choice(len(vals), size=min(len(vals), int(rng.integers(1, 3))), replace=False))
            src = [[vals[p]] for p in picks] if rng.random() < 0.5 else [[vals[p] for p in picks]]
        k = int(rng.choice([1, 3]))
        vals.append(b.conv2d(src, 4, kernel=k, padding=k // 2))
    users = {v.node for n in b._block.nodes for t in n.inputs for v in t}
    sinks = [v for v in vals if v.node not in users]
    b.identity([[v] for v in sinks])
    return b.build(seed)


def components(graph, names):
    """Weakly connected components of ``names`` (each in graph order)."""
    order = [n.name for n in graph.nodes()]
    left, comps = set(names), []
    while left:
        stack, comp = [min(left, key=order.index)], set()
        while stack:
            x = stack.pop()
            if x in comp:
                continue
            comp.add(x)
            nbrs = {v.node for t in graph.node(x).inputs for v in t}
            nbrs |= {n.name for n in graph.nodes() if any(v.node == x for t in n.inputs for v in t)}
            stack.extend(nbrs & left - comp)
        left -= comp
        comps.append(sorted(comp, key=order.index))
    return sorted(comps, key=lambda c: order.index(c[0]))


def stage_options(graph, names, preds, done, merge: bool, parallel: bool, r: int, s: int):
    """Every valid next stage after ``done``: (its units, the Stage)."""
    rest = [x for x in names if x not in done]
    for k in range(1, len(rest) + 1):
        for stage in itertools.combinations(rest, k):
            st = set(stage)
            if any(not preds[x] <= done | st for x in stage):
                continue
            if k == 1:
                yield st, Stage([list(stage)])
            if parallel and k > 1:
                comps = components(graph, stage)
                if len(comps) <= s and all(len(c) <= r for c in comps):
                    yield st, Stage(comps)
            independent = all(not (preds[x] & st) for x in stage)
            if merge and k > 1 and independent and can_merge(graph, [graph.node(x) for x in stage]):
                yield st, Stage([list(stage)], merge=True)


def brute_force(graph, cost, merge: bool, parallel: bool, r: int, s: int) -> float:
    """Least cost over every ordered partition of the units into valid stages."""
    names = [n.name for n in graph.blocks[0].nodes]
    preds = {x: {v.node for t in graph.node(x).inputs for v in t} & set(names) for x in names}
    memo = {}

    def best(done: frozenset) -> float:
        if len(done) == len(names):
            return 0.0
        if done in memo:
            return memo[done]
        out = float("inf")
        for st, opt in stage_options(graph, names, preds, done, merge, parallel, r, s):
            out = min(out, best(done | st) + cost.stage_latency(graph, opt))
        memo[done] = out
        return out
    return best(frozenset())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("variant,flags", [("ios-merge", (True, False)), ("ios-parallel", (False, True)),
                                           ("ios-both", (True, True))])
@pytest.mark.parametrize("r,s", [(3, 8), (2, 2)])
def test_dp_equals_brute_force(seed, variant, flags, r, s):
    g = random_dag(seed)
    cost = AnalyticCostModel(1, "gpu")
    sched = optimize(Workload(g), cost, SearchOptions(variant, r=r, s=s))
    want = brute_force(g, cost, *flags, r=r, s=s)
    assert sched.stats["predicted_ms"] == pytest.approx(want, rel=1e-12)
    total = sum(cost.stage_latency(g, st) for st in sched.stages())  # the schedule costs what the DP says
    assert total == pytest.approx(want, rel=1e-12)
    for st in sched.stages():
        assert len(st.groups) <= s and (st.merge or all(len(grp) <= r for grp in st.groups))


def test_merge_pays_in_brute_force_graph():
    # convs reading the input merge only if their geometry allows exact centring
    g = random_dag(3)
    convs = [n for n in g.blocks[0].nodes if n.kind == "conv" and n.inputs[0][0].node == g.input.name]
    assert len(convs) >= 2 and can_merge(g, convs)


def test_original_ending_is_a_subset_of_corrected():
    g = build_model("inception_v3", **SMALL["inception_v3"])
    a = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-parallel", ending="original"))
    b = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-parallel", ending="corrected"))
    assert b.stats["predicted_ms"] <= a.stats["predicted_ms"] + 1e-12
    assert b.stats["transitions"] >= a.stats["transitions"]


def test_dp_sizes_match_the_original_on_inception():
    # reference/ios_reference.md 4.6: IOS-Merge on Inception V3 visits 1,206 states, 3,852 transitions, 160 stages
    g = build_model("inception_v3", **SMALL["inception_v3"])
    options = SearchOptions("ios-merge", prune=False, share_parts=False)
    st = optimize(Workload(g), AnalyticCostModel(1, "gpu"), options).stats
    assert (st["states"], st["transitions"], st["stage_evaluations"]) == (1206, 3852, 160)


def test_nasnet_parts_are_cells():
    g = build_model("nasnet", **SMALL["nasnet"])
    assert len(parts_of(g.blocks[0], 50)) == 25


@pytest.mark.parametrize("pair", [((1, 1), (0, 0), (3, 3), (1, 1)), ((1, 3), (0, 1), (3, 1), (1, 0)),
                                  ((5, 5), (2, 2), (1, 1), (0, 0))])
def test_merged_conv_equals_the_unmerged_convs(pair):
    k1, p1, k2, p2 = pair
    b = GraphBuilder("m", (6, 9, 9))
    b.block()
    a = b.conv2d([[b.x]], 5, kernel=k1, padding=p1, act="relu")
    c = b.conv2d([[b.x]], 7, kernel=k2, padding=p2, act="relu")
    b.identity([[a], [c]])
    g = b.build(1)
    convs = [g.node(a.node), g.node(c.node)]
    assert can_merge(g, convs)
    m = merge_convs(convs)
    assert m.kernel == (max(k1[0], k2[0]), max(k1[1], k2[1])) and m.out_channels == 12
    sched = Schedule(g.name, g.hash(), [[Stage([[a.node, c.node]], merge=True), Stage([[g.output.name]])]])
    g2, s2 = apply_merges(g, sched)
    assert g2.num_units() == 2 and g2.output.inputs == [[type(a)(a.node, 0, 12)]]  # slices coalesced
    x = seeded_input(g, 2, 0)
    assert rel_err(reference_forward(g2, x), reference_forward(g, x)) < 1e-12


def test_merge_rejects_other_strides_and_inexact_centring():
    b = GraphBuilder("m", (4, 8, 8))
    b.block()
    a = b.conv2d([[b.x]], 4, kernel=3, padding=1)
    c = b.conv2d([[b.x]], 4, kernel=3, padding=1, stride=2)  # 4x4 output
    d = b.conv2d([[b.x]], 4, kernel=2, padding=0, stride=2)  # 4x4 output, but a 2x2 cannot be centred in 3x3
    e = b.conv2d([[b.x]], 4, kernel=3, padding=1, act="identity")
    f = b.pool([[a], [e]], "max", kernel=2, stride=2)
    b.identity([[f], [c], [d]])
    g = b.build(0)
    n = g.node
    assert not can_merge(g, [n(a.node), n(c.node)])  # stride
    assert not can_merge(g, [n(a.node), n(e.node)])  # activation
    assert not can_merge(g, [n(c.node), n(d.node)])  # same everything, but not exactly centrable


@pytest.mark.parametrize("model", ["sample", "inception_v3", "squeezenet", "randwire", "nasnet"])
def test_every_schedule_gives_the_reference_output(model):
    g = build_model(model, **SMALL[model])
    x = seeded_input(g, 2, 0)
    ref = reference_forward(g, x)
    cost = AnalyticCostModel(2, "gpu")
    scheds = [sequential(g), greedy(g, 3)]
    opts = {"randwire": dict(r=2, s=3, part_size=12)}.get(model, {})
    scheds += [optimize(Workload(g), cost, SearchOptions(v, **opts)) for v in ("ios-merge", "ios-parallel", "ios-both")]
    for sched in scheds:
        y = ScheduledModel(g, sched).run(x)
        assert rel_err(y, ref) < 1e-4, sched.algorithm


def test_greedy_caps_stage_width():
    g = build_model("randwire", **SMALL["randwire"])
    sched = greedy(g, 4)
    assert sched.max_groups() == 4
    assert greedy(g, 10).max_groups() > 4


def test_schedule_json_round_trip_and_wrong_graph(tmp_path):
    g = build_model("inception_v3", **SMALL["inception_v3"])
    sched = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-both"))
    p = tmp_path / "s.json"
    sched.to_json(p)
    back = Schedule.load(p)
    assert back.to_dict() == sched.to_dict()
    back.check(g)
    other = build_model("squeezenet", **SMALL["squeezenet"])
    with pytest.raises(ScheduleError, match="made for graph 'inception_v3'"):
        back.check(other)
    bigger = build_model("inception_v3", image_size=128)
    with pytest.raises(ScheduleError, match="hash"):
        back.check(bigger)
    p.write_text("{not json")
    with pytest.raises(ScheduleError, match="not valid JSON"):
        Schedule.load(p)
    p.write_text(json.dumps({"format": "something"}))
    with pytest.raises(ScheduleError, match="not an ios_core schedule"):
        Schedule.load(p)


def test_schedule_order_violation_is_named():
    g = build_model("sample", **SMALL["sample"])
    sched = sequential(g)
    stages = sched.blocks[0]
    stages.insert(0, stages.pop())  # the exit first: it reads units that run later
    with pytest.raises(ScheduleError, match="reads"):
        sched.check(g)


def test_measured_cost_cache_is_reused(tmp_path):
    g = build_model("sample", **SMALL["sample"])
    target = TorchTarget("cpu", "fp32")

    def model():
        timer = StageTimer(target, 1, number=1, repeat=1, warmup=0)
        return MeasuredCostModel(timer, CostCache(tmp_path / "c.json"), ("cpu", 1, "fp32"))
    first = model()
    s1 = optimize(Workload(g), first, SearchOptions("ios-both"))
    first.close()
    assert first.measurements > 0 and (tmp_path / "c.json").is_file()
    second = model()
    s2 = optimize(Workload(g), second, SearchOptions("ios-both"))
    assert second.measurements == 0 and second.cache_hits == first.measurements + first.cache_hits
    assert s2.stats["predicted_ms"] == pytest.approx(s1.stats["predicted_ms"])
    b = bounds(g, second)
    assert 0 < b["critical_path_ms"] <= b["sum_of_ops_ms"]


def test_corrupt_cost_cache_starts_over(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{broken")
    assert len(CostCache(p)) == 0


def test_bad_options_are_refused():
    g = build_model("sample", **SMALL["sample"])
    with pytest.raises(ValueError, match="schedule=.ios-all. is invalid"):
        optimize(Workload(g), AnalyticCostModel(), SearchOptions("ios-all"))
    with pytest.raises(ValueError, match="ending"):
        optimize(Workload(g), AnalyticCostModel(), SearchOptions("ios-both", ending="fixed"))
    with pytest.raises(ValueError, match=">= 1"):
        optimize(Workload(g), AnalyticCostModel(), SearchOptions("ios-both", r=0))


def all_stage_sets(graph, cost, merge: bool, parallel: bool, r: int, s: int) -> list[float]:
    """Costs of every distinct set of stages that schedules the graph (brute force)."""
    names = [n.name for n in graph.blocks[0].nodes]
    preds = {x: {v.node for t in graph.node(x).inputs for v in t} & set(names) for x in names}
    memo: dict[frozenset, dict[frozenset, float]] = {}

    def rest_sets(done: frozenset) -> dict[frozenset, float]:
        if len(done) == len(names):
            return {frozenset(): 0.0}
        if done in memo:
            return memo[done]
        out: dict[frozenset, float] = {}
        for st, opt in stage_options(graph, names, preds, done, merge, parallel, r, s):
            key = (tuple(tuple(g) for g in opt.groups), opt.merge)
            lat = cost.stage_latency(graph, opt)
            for sub, c in rest_sets(done | st).items():
                out[sub | {key}] = c + lat
        memo[done] = out
        return out
    return sorted(rest_sets(frozenset()).values())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("variant,flags", [("ios-parallel", (False, True)), ("ios-both", (True, True))])
def test_k_best_dp_equals_brute_force(seed, variant, flags):
    g = random_dag(seed, n=6)
    cost = AnalyticCostModel(1, "gpu")

    def fake(stages):  # "timing" a candidate returns its cost under the same model
        return sum(cost.stage_latency(g, st) for st in stages)
    sched = optimize(Workload(g), cost, SearchOptions(variant, r=3, s=8, keep=3), measure_part=fake)
    timings = sched.stats["selection"]["parts"][0]["timings_ms"]
    got = sorted(v for k, v in timings.items() if k.startswith("dp") and "+" not in k)
    want = all_stage_sets(g, cost, *flags, r=3, s=8)[:3]
    assert got == pytest.approx(want, rel=1e-12)


def test_pruning_keeps_the_optimum_and_skips_stages():
    g = build_model("inception_v3", **SMALL["inception_v3"])
    full = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-both", prune=False))
    pruned = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-both", prune=True))
    assert pruned.stats["predicted_ms"] == pytest.approx(full.stats["predicted_ms"], rel=1e-12)
    assert pruned.stats["stage_evaluations"] < 0.8 * full.stats["stage_evaluations"]
    assert pruned.stats["pruned"] > 0


def test_identical_parts_are_searched_once():
    g = build_model("nasnet", **SMALL["nasnet"])
    shared = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-merge"))
    alone = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-merge", share_parts=False))
    assert shared.stats["shared_parts"] > 0 and shared.stats["states"] < alone.stats["states"]
    assert shared.stats["predicted_ms"] == pytest.approx(alone.stats["predicted_ms"], rel=1e-12)
    assert [str(s) for s in shared.stages()] == [str(s) for s in alone.stages()]


def test_the_whole_model_timing_has_the_last_word():
    g = build_model("inception_v3", **SMALL["inception_v3"])
    want = [str(st) for st in greedy(g).stages()]

    def fake(stages):  # parts and DP answers look fast, but Greedy wins as a whole model
        if [str(st) for st in stages] == want:
            return 0.5
        return sum(len(st.groups) for st in stages) * 1e-3 + 1.0 * (len(stages) > 20)
    sched = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-both", keep=2), measure_part=fake)
    assert sched.stats["selection"]["final"] == "greedy"
    assert [str(st) for st in sched.stages()] == want
    assert sched.stats["insitu_ms"] == 0.5 and sched.stats["whole_selected_ms"] > 0.5
    sched.check(g)


def test_selection_never_picks_a_slower_candidate():
    g = random_dag(2, n=8)
    cost = AnalyticCostModel(1, "gpu")
    rng = np.random.default_rng(0)
    noise: dict[str, float] = {}

    def fake(stages):
        key = repr([(st.groups, st.merge, st.barrier) for st in stages])
        return noise.setdefault(key, float(rng.uniform(1, 2)))
    sched = optimize(Workload(g), cost, SearchOptions("ios-both", keep=3), measure_part=fake)
    sel = sched.stats["selection"]
    part = sel["parts"][0]
    assert min(part["timings_ms"].values()) == part["timings_ms"][part["chosen"]]
    assert sched.stats["insitu_ms"] == min(sel["whole_ms"].values())
    assert sched.stats["insitu_ms"] <= min(sel["whole_ms"]["greedy"], sel["whole_ms"]["sequential"])


class _FakeTimer:
    """Deterministic 'device': a stage costs its longest group's MACs plus a per-unit cost."""

    def __init__(self):
        self.batches: list[int] = []
        self.singles = 0
        self.seen: list[str] = []

    def _ms(self, graph, groups):
        def unit(n):
            return 0.002 + 1e-9 * n.macs(graph.input_shape_of(n)) if n.kind != "placeholder" else 0.0
        return max(sum(unit(n) for n in g) for g in groups) + 0.001 * (len(groups) - 1)

    def time(self, graph, groups):
        self.singles += 1
        return self._ms(graph, groups)

    def time_many(self, graph, stages):
        from ios_core.cost import signature
        self.batches.append(len(stages))
        self.seen += [signature(graph, g) for g in stages]
        return [self._ms(graph, g) for g in stages]


def test_batched_measurement_plan():
    from ios_core.cost import CalibratedCostModel

    g = build_model("inception_v3", **SMALL["inception_v3"])
    timer = _FakeTimer()
    measured = MeasuredCostModel(timer, CostCache(None), ("fake",))
    screen = CalibratedCostModel(measured, AnalyticCostModel(1, "gpu"))
    sched = optimize(Workload(g), measured, SearchOptions("ios-both", screen_limit=10**6), screen=screen)
    st = sched.stats
    assert timer.batches and max(timer.batches) <= 32
    assert len(set(timer.seen)) == len(timer.seen)  # deduplicated by signature, never timed twice
    assert st["prefetched"] == len(timer.seen) and st["parts_screened"] == 0
    # the screen's stages cover most of what the measured DP needs: few are timed one by one
    lazy = st["measurements"] - st["prefetched"]
    assert lazy < 0.3 * st["prefetched"]
    # the same answer as a DP that timed every stage lazily
    alone = optimize(Workload(g), MeasuredCostModel(_FakeTimer(), CostCache(None), ("fake",)), SearchOptions())
    assert st["predicted_ms"] == pytest.approx(alone.stats["predicted_ms"], rel=1e-12)
