"""The CUDA runtimes against the reference (skipped without a GPU)."""

import pytest

from ios_core.cost import AnalyticCostModel
from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.models import build_model
from ios_core.runtime import RUNTIMES, ScheduledModel
from ios_core.schedule import SearchOptions, optimize
from ios_core.workload import Workload

from .helpers import SMALL, rel_err

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("runtime", list(RUNTIMES))
@pytest.mark.parametrize("model", ["inception_v3", "nasnet"])
def test_cuda_runtimes_match_the_reference(model, runtime):
    g = build_model(model, **SMALL[model])
    sched = optimize(Workload(g), AnalyticCostModel(2, "gpu"), SearchOptions("ios-both"))
    m = ScheduledModel(g, sched, "cuda", "fp32", runtime)
    x = seeded_input(g, 2, 0)
    infer, load = m.prepare(2)
    y = m.target.to_numpy(infer(load(x)))
    assert rel_err(y, reference_forward(g, x)) < 1e-4


def test_selected_schedule_with_barrier_flags_matches_the_reference():
    from ios_core.runtime import TorchTarget
    from ios_core.runtime.insitu import PartTimer

    g = build_model("inception_v3", **SMALL["inception_v3"])
    timer = PartTimer(g, TorchTarget("cuda", "fp32"), 2)
    sched = optimize(Workload(g), AnalyticCostModel(2, "gpu"), SearchOptions("ios-both", keep=2), measure_part=timer)
    st = sched.stats
    assert st["insitu_ms"] <= min(st["whole_greedy_ms"], st["whole_sequential_ms"]) + 1e-9
    assert 0 < st["insitu_ms"] < 100
    sched.blocks[1][0].barrier = True  # a barrier flag anywhere keeps the output exact
    m = ScheduledModel(g, sched, "cuda", "fp32", "graph")
    x = seeded_input(g, 2, 0)
    infer, load = m.prepare(2)
    assert rel_err(m.target.to_numpy(infer(load(x))), reference_forward(g, x)) < 1e-4


def test_streams_are_distinct_even_after_the_pool_wraps():
    import torch

    from ios_core.runtime.streams import capture_stream, check_distinct, side_streams

    for _ in range(70):  # draw the pool round twice: the old runtime could then get the capture stream
        torch.cuda.Stream()
    side = side_streams(15)
    handles = {s.cuda_stream for s in side}
    assert len(handles) == 15
    assert capture_stream().cuda_stream not in handles
    assert torch.cuda.current_stream().cuda_stream not in handles
    check_distinct(side, capture_stream())
    g = build_model("nasnet", **SMALL["nasnet"])
    sched = optimize(Workload(g), AnalyticCostModel(1, "gpu"), SearchOptions("ios-both"))
    m = ScheduledModel(g, sched, "cuda", "fp32", "graph")
    assert all(s.cuda_stream in handles for s in m.program.side)


def test_in_graph_timing_is_positive_and_cold_is_not_faster():
    import torch

    from ios_core.runtime import TorchTarget
    from ios_core.runtime.timer import TimingConfig, time_work

    target = TorchTarget("cuda", "fp32")
    w = torch.randn(2048, 2048, device="cuda")  # 16 MB of weights: hot in L2 unless flushed
    x = torch.randn(8, 2048, device="cuda")
    run = lambda: x @ w  # noqa: E731
    hot = time_work(target, run, [x], True, TimingConfig(2, 5, 5, cold=False))
    cold = time_work(target, run, [x], True, TimingConfig(2, 5, 5, cold=True))
    assert 0 < hot < 5 and 0 < cold < 5
    assert cold >= 0.9 * hot


def test_batched_stage_timing_agrees_with_one_at_a_time():
    from ios_core.runtime import StageTimer, TorchTarget

    g = build_model("inception_v3", **SMALL["inception_v3"])
    timer = StageTimer(TorchTarget("cuda", "fp32"), 1)
    convs = [n for n in g.nodes() if n.kind == "conv"][:12]
    stages = [[[n]] for n in convs]
    many = timer.time_many(g, stages)
    one = [timer.time(g, st) for st in stages]
    assert len(many) == len(stages) and all(0 < t < 5 for t in many)
    ratios = sorted(a / b for a, b in zip(many, one))
    assert 0.7 < ratios[len(ratios) // 2] < 1.4  # same instrument: medians agree within noise


@pytest.mark.parametrize("kernels", ["auto", "gemm", "second"])  # second: GEMM convs and Triton pools wherever offered
@pytest.mark.parametrize("model", ["inception_v3", "nasnet", "randwire", "squeezenet"])
def test_passes_and_kernel_choice_on_nhwc_match_the_reference(model, kernels):
    from ios_core.passes import PASSES, apply_passes
    from ios_core.runtime import TorchTarget
    from ios_core.runtime.kernels import KernelTable
    from ios_core.runtime.timer import kernel_timer

    g0 = build_model(model, **SMALL[model])
    g, _ = apply_passes(g0, list(PASSES))
    timer = kernel_timer(TorchTarget("cuda", "fp32", True))
    table = KernelTable("auto", lambda calls: [2.0, 1.0]) if kernels == "second" else KernelTable(kernels, timer)
    sched = optimize(Workload(g), AnalyticCostModel(2, "gpu"), SearchOptions("ios-both"))
    m = ScheduledModel(g, sched, "cuda", "fp32", "graph", channels_last=True, kernels=table)
    x = seeded_input(g0, 2, 0)
    infer, load = m.prepare(2)
    assert rel_err(m.target.to_numpy(infer(load(x))), reference_forward(g0, x)) < 1e-4
    used = table.counts()
    assert used["kernel_gemm"] > 0 if kernels == "gemm" else used["kernel_ops_timed"] > 0
    if kernels == "second" and model != "randwire":  # randwire has no max or avg pool
        assert used["kernel_pool_triton"] > 0 and table.compiled and not table.failed


def test_a_second_plan_reuses_the_layout_across_batch_and_every_kernel_choice(tmp_path):
    """Issue 42 on the GPU: the layout screened on vendor kernels (or timed with the choice where close), then
    reused by another batch size; a re-search of the first workload times no kernel candidate again."""
    from ios_core.planner import Planner, PlanOptions

    work = Workload(build_model("inception_v3", **SMALL["inception_v3"]), 1, "fp32", "gpu-test")
    options = PlanOptions(schedule="ios-both", part_size=6)
    first = Planner(options, tmp_path).plan(work, "cuda")
    assert first.layout_how in ("measured", "measured (vendor kernels)") and first.metrics["kernel_ops_timed"] > 0
    assert list((tmp_path / "cache").glob("kernel_choices-*.json"))
    other = Planner(options, tmp_path).plan(work.at_batch(4), "cuda")
    assert other.layout_how == "reused (batch 1)" and other.channels_last == first.channels_last
    again = Planner(PlanOptions(schedule="ios-both", part_size=6, research=True,
                                channels_last=str(first.channels_last)), tmp_path).plan(work, "cuda")
    # the same operators are taken from the store (a re-search that settles elsewhere may meet a few new strides)
    assert again.metrics["kernel_reused"] > again.metrics["kernel_ops_timed"], again.metrics
    x = seeded_input(work.graph, 1, 0)
    assert rel_err(again.target.to_numpy(again.infer(again.load_input(x))), reference_forward(work.graph, x)) < 1e-3


def test_generated_convs_match_cudnn_and_a_plan_keeps_them_where_faster(tmp_path):
    """Issue 42, item 4: Inductor's Triton convolution (its template, autotuned) equals cuDNN's in fp16 on
    Inception's odd shapes, and a plan with triton_convs times it for the final model's convs only and still
    matches the reference."""
    import torch
    import torch.nn.functional as F

    from ios_core.ir.nodes import Conv, Value
    from ios_core.planner import Planner, PlanOptions
    from ios_core.runtime.kernels import triton_conv

    torch.manual_seed(0)
    for kernel, padding in (((3, 3), (1, 1)), ((1, 7), (0, 3))):
        node = Conv(name="c", inputs=[[Value("x", 0, 32)]], out_channels=48, kernel=kernel, padding=padding,
                    act="relu")
        x = torch.randn(1, 32, 17, 17, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
        w = torch.randn(48, 32, *kernel, device="cuda", dtype=torch.half) / 16
        b = torch.randn(48, device="cuda", dtype=torch.half)
        torch.testing.assert_close(triton_conv(node)(x, w, b), F.relu(F.conv2d(x, w, b, padding=padding)),
                                   rtol=2e-2, atol=2e-2)
    work = Workload(build_model("sample", **SMALL["sample"]), 1, "fp16", "gpu-test")
    plan = Planner(PlanOptions(schedule="greedy", triton_convs=True, channels_last="true"), tmp_path).plan(work,
                                                                                                            "cuda")
    keys = [k for k in plan.kernels.timings if k.startswith("('triton_conv'")]
    assert keys and not [k for k in plan.kernels.failed if k in keys], plan.kernels.failed
    assert set(plan.kernels.timings[keys[0]]) == {"cudnn", "triton"}
    xin = seeded_input(work.graph, 1, 0)
    assert rel_err(plan.target.to_numpy(plan.infer(plan.load_input(xin))), reference_forward(work.graph, xin)) < 2e-2


def test_triton_pools_equal_atens_in_fp16_and_a_heuristic_cudnn_plan_matches_the_reference(tmp_path):
    """Issue 42: the hand-written Triton pools (no Dynamo) on Inception's and NASNet's pool shapes in both
    layouts, and a whole plan with cuDNN's heuristic plans (nothing searched) against the reference."""
    import torch

    from ios_core.planner import Planner, PlanOptions
    from ios_core.runtime.triton_pool import triton_pool

    from .test_kernels import _POOL_CASES, _aten_pool, _pool

    torch.manual_seed(0)
    for case in _POOL_CASES:
        node = _pool(*case)
        for shape in ((1, 288, 35, 35), (2, 40, 83, 83)):
            nchw = torch.randn(shape, device="cuda", dtype=torch.half)
            for x in (nchw, nchw.contiguous(memory_format=torch.channels_last)):
                y, ref = triton_pool(node)(x), _aten_pool(node, x)
                assert y.shape == ref.shape and y.is_contiguous() == x.is_contiguous()
                torch.testing.assert_close(y, ref, rtol=1e-3, atol=1e-3)
    from ios_core.runtime.target import use_cudnn_search

    work = Workload(build_model("inception_v3", **SMALL["inception_v3"]), 1, "fp16", "gpu-test")
    was, torch.backends.cudnn.benchmark = torch.backends.cudnn.benchmark, True
    try:
        plan = Planner(PlanOptions(schedule="ios-both", part_size=6, cudnn_search="heuristic"), tmp_path).plan(
            work, "cuda")
        # the option held for the plan only: the process's setting and the next plan's default are back
        assert torch.backends.cudnn.benchmark and use_cudnn_search("benchmark") == "benchmark"
    finally:
        torch.backends.cudnn.benchmark = was
    assert plan.metrics["kernel_pool_triton"] + plan.metrics["kernel_pool_aten"] > 0
    xin = seeded_input(work.graph, 1, 0)
    assert rel_err(plan.target.to_numpy(plan.infer(plan.load_input(xin))), reference_forward(work.graph, xin)) < 2e-2


def test_atens_and_tritons_depthwise_kernels_equal_cudnns_in_both_layouts_and_keep_the_layout():
    """Issue 42: the depthwise candidates (ATen's own kernel, NCHW; the Triton one) on NASNet's and RandWire's
    shapes in fp16, and the kernel choice among the three."""
    import torch
    import torch.nn.functional as F

    from ios_core.ir.nodes import Conv, Value
    from ios_core.runtime.kernels import KernelPolicy, KernelTable, conv_native, depthwise_ok
    from ios_core.runtime.triton_depthwise import triton_depthwise

    torch.manual_seed(0)
    for c, size, k, s in ((42, 83, 5, 2), (154, 56, 3, 1), (672, 11, 7, 1)):
        node = Conv(name="d", inputs=[[Value("x", 0, c)]], out_channels=c, kernel=k, stride=s, padding=k // 2,
                    groups=c, act="identity")
        nchw = torch.randn(1, c, size, size, device="cuda", dtype=torch.half)
        w = torch.randn(c, 1, k, k, device="cuda", dtype=torch.half) / k
        b = torch.randn(c, device="cuda", dtype=torch.half)
        relu = Conv(name="r", inputs=[[Value("x", 0, c)]], out_channels=c, kernel=k, stride=s, padding=k // 2,
                    groups=c, act="relu")
        for x in (nchw, nchw.contiguous(memory_format=torch.channels_last)):
            assert depthwise_ok(node, x)
            ref = F.conv2d(x, w, b, s, k // 2, groups=c)
            for y in (conv_native(node, x, w, b), triton_depthwise(node)(x, w, b)):
                assert y.is_contiguous() == x.is_contiguous()
                torch.testing.assert_close(y, ref, rtol=1e-2, atol=1e-2)
            torch.testing.assert_close(triton_depthwise(relu)(x, w, b), ref.relu(), rtol=1e-2, atol=1e-2)
    sliced = torch.randn(2, 2 * c, 11, 11, device="cuda", dtype=torch.half)[:, :c]  # NCHW, not dense
    assert not depthwise_ok(node, sliced)  # its output layout would be a guess: cuDNN's kernel, no choice
    table = KernelTable(KernelPolicy(triton_convs=True), lambda calls: [float(i) for i in range(len(calls), 0, -1)])
    assert table.impl(node, x, lambda i: None) == "triton" and table.counts()["kernel_depthwise_triton"] == 1.0


def test_triton_programs_compile_ahead_on_threads_under_the_keys_their_launches_use(tmp_path, monkeypatch):
    """Issue 42: ``KernelTable.ahead`` compiles the Triton depthwise and pool programs a call will time on a
    thread pool (Triton's asynchronous compile mode), in a fresh Triton cache; the timed calls that follow find
    each program in memory (no new compile, the program caches no larger) and equal the reference."""
    import torch
    import torch.nn.functional as F

    from ios_core.ir.nodes import Conv, Pool, Value
    from ios_core.runtime import ahead
    from ios_core.runtime.kernels import KernelPolicy, KernelTable
    from ios_core.runtime.ops import RuntimeOps

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    assert ahead.supported()
    from ios_core.runtime.triton_programs import depthwise2d, pool2d

    torch.manual_seed(0)
    c = 40
    convs = [Conv(name=f"d{k}", inputs=[[Value("x", 0, c)]], out_channels=c, kernel=k, stride=1, padding=k // 2,
                  groups=c, act="relu") for k in (3, 5, 7)]
    pool = Pool(name="p", inputs=[[Value("x", 0, c)]], pool_type="max", kernel=3, stride=2, padding=1)
    params = {n.name: (torch.randn(c, 1, *n.kernel, device="cuda", dtype=torch.half) / 9,
                       torch.randn(c, device="cuda", dtype=torch.half)) for n in convs}
    x = torch.randn(1, c, 19, 19, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
    table = KernelTable(KernelPolicy(triton_depthwise=True, depthwise_cudnn=False),
                        lambda calls: [float(i) for i, f in enumerate(calls) if f() is not None or True],
                        compile_threads=4)
    ops = RuntimeOps({"x": c, **{n.name: c for n in convs}, "p": c}, params, fuse=False, kernels=table)

    def call():
        return [ops.visit_conv(n, x) for n in convs] + [ops.visit_pool(pool, x)]

    def programs():
        return sum(len(caches[0]) for f in (depthwise2d, pool2d) for caches in f.device_caches.values())
    before = programs()
    with torch.inference_mode():
        table.ahead(call)
        assert table.ahead_programs == 4 and table.compiles == 0 and table.choices == {}
        made = programs()
        assert made > before  # (an earlier test of the process may have made some of the four)
        ys = call()
    assert programs() == made and table.compiles == 0  # the launches found the programs made ahead
    assert table.counts()["kernel_depthwise_triton"] == 3.0 and table.counts()["kernel_pool_triton"] == 0.0
    for n, y in zip(convs, ys):
        w, b = params[n.name]
        torch.testing.assert_close(y, F.conv2d(x, w, b, 1, n.kernel[0] // 2, groups=c).relu(), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(ys[-1], F.max_pool2d(x, 3, 2, 1))
