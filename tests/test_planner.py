"""ios_core's one call for a schedule (issue 28): a library user gets the searched, selected
schedule with its cost models, cache and saved files chosen inside ios_core, no harness."""

import json

import pytest

from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.models import build_model
from ios_core.planner import PlanError, Planner, PlanOptions, plan
from ios_core.runtime import ScheduledModel, TorchTarget
from ios_core.schedule import OptionError, Schedule, SearchOptions
from ios_core.workload import Workload

from .helpers import SMALL


def _work():
    return Workload(build_model("sample", **SMALL["sample"]), 2, "fp32", "cpu")


def test_plan_searches_selects_and_the_schedule_runs():
    work = _work()
    held = []

    class Guard:  # what a caller sharing the device passes: held around every timing
        def __enter__(self):
            held.append(1)

        def __exit__(self, *exc):
            return False

    sched, metrics = plan(work, TorchTarget("cpu", "fp32"), PlanOptions(part_size=8), guard=Guard)
    assert sched.algorithm == "ios-both" and sched.batch == 2 and sched.device == "cpu"
    assert metrics["search_reused"] == 0.0 and metrics["search_parts"] >= 1
    assert sched.stats["selection"]["final"] in ("selected", "dp", "greedy", "sequential")
    assert len(held) >= metrics["search_parts"]  # every in-situ timing under the guard
    x = seeded_input(work.graph, 2, 0)
    y = ScheduledModel(work.graph, sched).run(x)
    assert abs(y - reference_forward(work.graph, x)).max() < 1e-3


def test_a_saved_plan_is_reused_and_any_search_option_searches_again(tmp_path):
    work, target = _work(), TorchTarget("cpu", "fp32")
    options = PlanOptions(part_size=8, select=False)
    planner = Planner(options, tmp_path)
    first, metrics = planner.schedule(target, work)
    path = planner.save(first, work, channels_last=False)
    assert path is not None and path.is_relative_to(tmp_path / "schedules") and path.is_file()
    assert json.loads(path.read_text())["options"]["passes"] == options.passes
    again, metrics = Planner(options, tmp_path).schedule(target, work)
    assert metrics["search_reused"] == 1.0 and again.to_dict()["blocks"] == first.to_dict()["blocks"]
    _, metrics = Planner(PlanOptions(part_size=8, select=False, research=True), tmp_path).schedule(target, work)
    assert metrics["search_reused"] == 0.0
    other = Planner(PlanOptions(part_size=8, select=False, r=2), tmp_path)
    assert other.schedule_path(work, False) != path
    assert Planner(options).schedule_path(work, False) is None  # no store: nothing saved or reused


def test_baselines_need_no_search():
    work = _work()
    for name in ("sequential", "greedy"):
        sched, metrics = plan(work, TorchTarget("cpu", "fp32"), PlanOptions(schedule=name))
        assert sched.algorithm == name and metrics == {}


@pytest.mark.parametrize("options, message", [
    (PlanOptions(schedule="ios"), r"^schedule='ios' is invalid; choose one of: sequential, greedy, ios-merge"),
    (PlanOptions(cost_model="exact"), r"^cost_model='exact' is invalid"),
    (PlanOptions(s=17), r"^s=17 is more streams per stage than the runtime keeps \(16\)"),
    (PlanOptions(number=0), r"^number=0 must be >= 1"),
    (SearchOptions(search_workers=-1), r"^search_workers=-1 must be >= 0"),
    (PlanOptions(layout_screen=-0.1), r"^layout_screen=-0.1: a fraction from 0 \(always time the layouts with"),
])
def test_an_option_out_of_range_is_named_once(options, message):
    with pytest.raises(OptionError, match=message):
        options.check()


def test_one_plan_call_gives_the_model_ready_and_says_where_its_schedule_came_from(tmp_path):
    """Planner.plan: passes, layout, schedule (searched, then saved; a given file; a bad file refused naming the
    option) and the prepared model, in one call (issue 38: the plugin is a thin adapter)."""
    work = _work()
    options = PlanOptions(part_size=8, select=False)
    first = Planner(options, tmp_path).plan(work, "cpu")
    assert first.source == "searched" and first.path is not None and first.path.is_file()
    assert first.passes == list(options.passes) and first.layout_how == "default" and not first.channels_last
    x = seeded_input(work.graph, 2, 0)
    y = first.target.to_numpy(first.infer(first.load_input(x)))
    assert abs(y - reference_forward(work.graph, x)).max() < 1e-3
    again = Planner(options, tmp_path).plan(work, "cpu")
    assert again.source == "saved" and again.path == first.path and again.metrics["search_reused"] == 1.0
    # where the optimization cost went, phase by phase (issue 42): the search is the cold plan's schedule phase
    phases = ("passes", "layout", "tables", "schedule", "prepare", "save", "release")
    for p in (first, again):
        assert all(p.metrics[f"plan_{k}_s"] >= 0 for k in phases), p.metrics
    assert first.metrics["plan_schedule_s"] > again.metrics["plan_schedule_s"]
    given = Planner(PlanOptions(schedule_file=str(first.path)), tmp_path).plan(work, "cpu")
    assert given.source == "schedule file" and given.schedule.to_dict()["blocks"] == first.schedule.to_dict()["blocks"]
    other = Workload(build_model("squeezenet", image_size=32), 1, "fp32", "cpu")
    with pytest.raises(PlanError, match="^schedule_file: .*made for graph") as err:
        Planner(PlanOptions(schedule_file=str(first.path)), tmp_path).plan(other, "cpu")
    assert err.value.named("backend.").startswith("backend.schedule_file: ")


def test_a_layout_choice_saved_for_one_batch_size_serves_the_others(tmp_path, monkeypatch):
    """Issue 42: a batch-size sweep times the layouts once; the nearest batch's choice is reused (read before any
    timing, so this runs without a GPU), a damaged file is passed over, and layout_any_batch=false asks for its own."""
    work = Workload(build_model("sample", **SMALL["sample"]), 16, "fp16", "NVIDIA H100")
    planner = Planner(PlanOptions(), tmp_path)
    own = planner._stem(work)
    name = own.name + "-layout-" + PlanOptions().digest("layout") + ".json"
    own.parent.mkdir(parents=True)
    for batch, nhwc in ((1, True), (64, False), (128, True)):
        (own.parent / name.replace("-bs16-", f"-bs{batch}-")).write_text(
            json.dumps({"channels_last": nhwc, "ms": {"nchw": 2.0, "nhwc": 1.0}}))
    assert planner.layout(work, "cuda") == (True, "reused (batch 1)", {"nchw": 2.0, "nhwc": 1.0})  # 15 from 16
    (own.parent / name.replace("-bs16-", "-bs1-")).write_text("{damaged")
    assert planner.layout(work, "cuda")[:2] == (False, "reused (batch 64)")
    (own.parent / name).write_text(json.dumps({"channels_last": True, "ms": {"nchw": 3.0, "nhwc": 1.0}}))
    assert planner.layout(work, "cuda")[:2] == (True, "reused")
    (own.parent / name).unlink()
    timed = []

    def time_layouts(*args, **kwargs):
        timed.append(kwargs["kernels"])
        return {"nchw": 1.0, "nhwc": 3.0}
    monkeypatch.setattr("ios_core.planner.time_layouts", time_layouts)
    assert Planner(PlanOptions(layout_any_batch=False), tmp_path).layout(work, "cuda") == (
        False, "measured (vendor kernels)", {"nchw": 1.0, "nhwc": 3.0})  # its own choice is timed, vendor first
    assert len(timed) == 1
    assert Planner(PlanOptions(layout_screen=0), tmp_path).layout(work, "cuda")[1] == "measured"  # its own file


def test_a_plan_leaves_no_timing_garbage_behind():
    """What the search's timing made (models, weights, buffers in reference cycles) is freed when plan() returns,
    not when the collector next runs: on CUDA it would count as the model's memory in the timed loop."""
    import gc

    import torch

    def tensors():
        return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))
    gc.disable()
    try:
        from ios_core.runtime import timer

        timer._FLUSH[0] = torch.zeros(4)  # a flush buffer the timing made (on CUDA: 1.5x L2)
        plan = Planner(PlanOptions(part_size=6), None).plan(_work(), "cpu")
        left = tensors()
        gc.collect()
        assert tensors() == left > 0 and plan.model is not None and not timer._FLUSH
    finally:
        gc.enable()


def test_a_batch_sweep_reuses_the_schedule_searched_within_the_factor_and_never_chains(tmp_path):
    """Issue 42: with schedule_any_batch=F a batch reuses the schedule searched for the nearest batch (by ratio)
    at most F times away, its record naming that batch; past F it searches. A reused schedule saved under its new
    batch keeps its origin: batch 32 does not take batch 1's through batch 4's copy, batch 8 takes batch 32's
    search (4x, through batch 16's file) rather than batch 1's (8x, through batch 4's file, nearer by name), and
    without the option a copy is not reused."""
    graph = build_model("sample", **SMALL["sample"])
    options = PlanOptions(schedule="ios-both", schedule_any_batch=8)

    def planned(batch, opts=options):
        plan = Planner(opts, tmp_path).plan(Workload(graph, batch, "fp32", "cpu"), "cpu")
        return plan.source, plan.schedule.batch, "predicted_ms" in plan.metrics

    assert [planned(b) for b in (1, 4, 32, 64, 16, 8)] == [
        ("searched", 1, True), ("saved", 1, False), ("searched", 32, True), ("saved", 32, False),
        ("saved", 32, False), ("saved", 32, False)]
    saved = Schedule.load(Planner(options, tmp_path).schedule_path(Workload(graph, 4, "fp32", "cpu"), False))
    assert saved.batch == 1  # batch 4's file holds batch 1's search
    own = PlanOptions(schedule="ios-both")
    assert planned(4, own)[:2] == ("searched", 4)  # the default: a copy from another batch is not this batch's own
    assert planned(2, own)[:2] == ("searched", 2)
    with pytest.raises(OptionError, match="schedule_any_batch=-1 must be >= 0"):
        PlanOptions(schedule_any_batch=-1).check()


def test_another_batchs_schedule_that_does_not_fit_is_passed_over(tmp_path):
    graph = build_model("sample", **SMALL["sample"])
    options = PlanOptions(schedule="ios-both", schedule_any_batch=8)
    planner = Planner(options, tmp_path)
    first = planner.plan(Workload(graph, 1, "fp32", "cpu"), "cpu")
    other = build_model("squeezenet", image_size=32)
    stranger = first.schedule.to_dict()
    stranger["graph_hash"] = other.hash()  # a schedule made for another graph, in this one's place
    first.path.write_text(json.dumps(stranger))
    plan = Planner(options, tmp_path).plan(Workload(graph, 2, "fp32", "cpu"), "cpu")
    assert plan.source == "searched" and plan.schedule.batch == 2


def test_kernel_choices_saved_among_other_candidates_are_not_replayed_and_cudnn_search_is_the_plans_own(tmp_path):
    """A saved schedule's kernel choices seed the next plan only where they were made among today's candidates
    (``kernel_candidates``: older files chose pools against Inductor's kernel); a plan's cudnn_search is set for
    its own targets and put back when it ends."""
    import torch

    from ios_core.runtime import target as target_module
    from ios_core.runtime.kernels import CANDIDATES_VERSION

    work = _work()
    options = PlanOptions(part_size=8, select=False, cudnn_search="heuristic")
    benchmark = torch.backends.cudnn.benchmark
    first = Planner(options, tmp_path).plan(work, "cpu")
    assert first.schedule.stats["kernel_candidates"] == CANDIDATES_VERSION
    assert target_module._cudnn["benchmark"] and torch.backends.cudnn.benchmark == benchmark
    saved = json.loads(first.path.read_text())
    saved["stats"]["kernels"] = {"('pool', 'made against Inductor')": "triton"}
    for version, seeded in ((CANDIDATES_VERSION, True), (2, False)):
        saved["stats"]["kernel_candidates"] = version
        first.path.write_text(json.dumps(saved))
        again = Planner(options, tmp_path).plan(work, "cpu")
        assert again.source == "saved" and ("('pool', 'made against Inductor')" in again.kernels.choices) == seeded


def test_planning_again_times_the_layout_without_the_final_models_triton_templates(monkeypatch):
    """The tables offer the Triton depthwise kernel from the start (``triton_depthwise`` by default) and Inductor's
    templates (``triton_convs``) to the final model only: each table is made under its policy, the layout's and
    the search's under the final one's ``for_search``, whatever was planned before, and all share one set of
    choices. cuDNN's depthwise kernel is a candidate only with ``depthwise_cudnn``."""
    planner = Planner(PlanOptions(part_size=8, select=False, triton_convs=True, depthwise_cudnn=True,
                                  depthwise_start_margin=0.05, compile_threads=3))
    first = planner.plan(_work(), "cpu")
    table = first.kernels  # the final model's
    assert table.triton_depthwise and table.triton_convs and table.start_margin == 0.05 and table.depthwise_cudnn
    assert table.compile_threads == 3 and Planner(PlanOptions()).compile_threads >= 1
    search = planner.kernel_table(TorchTarget("cpu", "fp32", False))
    assert search.policy == table.policy.for_search() and not search.triton_convs and search.learned is table.learned
    seen, kernel_table = [], planner.kernel_table
    monkeypatch.setattr(planner, "kernel_table", lambda *a: seen.append(kernel_table(*a).policy) or kernel_table(*a))
    again = planner.plan(_work(), "cpu")
    assert seen == [table.policy] and again.kernels.triton_convs  # the CPU times no layout: the final table alone
    assert again.kernels.learned is first.kernels.learned and table.triton_convs  # nothing reset, nothing toggled
    assert again.metrics["plan_tables_s"] >= 0 and again.metrics["plan_release_s"] >= 0
    screen = Planner(PlanOptions()).screen_table()  # untimed: the Triton kernel for depthwise convolutions
    assert screen.timer is None and screen.triton_depthwise and not screen.depthwise_cudnn
    with pytest.raises(OptionError, match="depthwise_start_margin=0.05 has no effect.*set depthwise_cudnn=true"):
        PlanOptions(depthwise_start_margin=0.05).check()
    # a margin picks other kernels in every timing: it names the saved files and the store's kernel choices
    old = {"cudnn_search": "benchmark"}  # what files were saved with before these options: nothing named
    assert PlanOptions(**old).variant() == {}
    assert PlanOptions(**old, depthwise_start_margin=0.05).variant() == {"depthwise_start_margin": "start margin 0.05"}
    assert PlanOptions(**old, depthwise_cudnn=True).variant() == {"depthwise_cudnn": "depthwise cudnn"}
    assert PlanOptions(depthwise_start_margin=0.05).digest("layout") != PlanOptions().digest("layout")


def _changed(name: str, value):
    """Another valid value of the option ``name`` (whose default is ``value``)."""
    other = {"schedule": "greedy", "ending": "original", "part_cuts": "slice", "search_core": "python",
             "cost_model": "analytic", "runtime": "eager", "streams": "stage-order", "kernels": "cudnn",
             "cudnn_search": "benchmark",
             "channels_last": "true", "passes": ["fold_bias"], "schedule_file": "s.json", "schedule_device": "gpu-a"}
    if name in other:
        return other[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + (0.05 if isinstance(value, float) else 1)
    raise AssertionError(f"no other value for {name}={value!r}")


def test_every_kept_file_depends_on_exactly_the_options_declared_for_it():
    """One declaration (options.DEPENDS_ON) names what each kept file depends on; every option is either in it or
    declared as none's. Changing an option that matters changes that file's key (a miss); one that does not keeps
    every key (a hit). Options added later (variant) change every key only away from their default."""
    import dataclasses

    from ios_core.options import DEPENDS_ON, DEPENDS_ON_NONE

    def keys(o: PlanOptions) -> dict[str, str]:
        return {"schedule": o.schedule_name(False), "layout": o.digest("layout"),
                "stage_costs": o.key("stage_costs", "v", "gpu", 1, "fp16", False),
                "kernel_choices": o.key("kernel_choices", "torch x", "candidates 1")}

    base = PlanOptions()
    before = keys(base)
    variant = set(PlanOptions(depthwise_cudnn=True, depthwise_start_margin=0.05,
                              triton_depthwise=False, triton_convs=True).variant())
    for f in dataclasses.fields(PlanOptions):
        declared = {kind for kind, names in DEPENDS_ON.items() if f.name in names}
        assert bool(declared) + (f.name in DEPENDS_ON_NONE) + (f.name in variant) == 1, \
            f"option {f.name!r}: declare once which kept files depend on it (options.DEPENDS_ON)"
        after = keys(dataclasses.replace(base, **{f.name: _changed(f.name, getattr(base, f.name))}))
        changed = {kind for kind in before if before[kind] != after[kind]}
        assert changed == (set(DEPENDS_ON) if f.name in variant else declared), f.name
    assert keys(PlanOptions()) == before  # the defaults' keys are stable
