"""Kernel choice and layout choice: the GEMM path equals cuDNN's conv, the table keeps what timed
faster, and the ios backend records (and reuses) the layout, the passes and the kernels it ran."""

import json
import os

import pytest
import torch
import torch.nn.functional as F

from harness.job import run
from ios_core.cost import CostCache
from ios_core.ir.nodes import Conv, Value
from ios_core.runtime.kernels import KernelPolicy, KernelTable, conv_gemm, gemm_ok
from ios_core.runtime.target import faster_layout, parse_channels_last
from ios_core.schedule import Schedule

from .helpers import SMALL


def _conv(kernel=(1, 1), stride=(1, 1), padding=(0, 0), groups=1, out=6):
    return Conv(name="c", inputs=[[Value("x", 0, 8)]], out_channels=out, kernel=kernel, stride=stride, padding=padding,
                groups=groups, act="identity")


def test_gemm_equals_conv_on_nhwc_memory_and_on_channel_slices():
    torch.manual_seed(0)
    whole = torch.randn(2, 12, 5, 7).to(memory_format=torch.channels_last)
    w, b = torch.randn(6, 8, 1, 1), torch.randn(6)
    for x in (whole[:, :8], whole[:, 4:]):  # slices of a concatenation's NHWC buffer, as IOS reads them
        assert gemm_ok(_conv(), x)
        y = conv_gemm(x, w, b)
        assert y.shape == (2, 6, 5, 7) and y.is_contiguous(memory_format=torch.channels_last)
        torch.testing.assert_close(y, F.conv2d(x, w, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("node,x", [
    (_conv(), torch.randn(2, 8, 5, 7)),  # NCHW memory
    (_conv(kernel=(3, 3), padding=(1, 1)), torch.randn(2, 8, 5, 7).to(memory_format=torch.channels_last)),
    (_conv(stride=(2, 2)), torch.randn(2, 8, 5, 7).to(memory_format=torch.channels_last)),
    (_conv(groups=2), torch.randn(2, 8, 5, 7).to(memory_format=torch.channels_last)),
    (_conv(), torch.randn(2, 8, 10, 7).to(memory_format=torch.channels_last)[:, :, ::2]),  # rows do not collapse
])
def test_gemm_is_refused_where_it_is_not_one_matrix_product(node, x):
    assert not gemm_ok(node, x)


def test_kernel_table_keeps_the_faster_and_times_each_shape_once():
    asked = []

    def timer(calls):
        asked.append(len(calls))
        return [2.0, 1.0]  # cudnn, gemm
    table = KernelTable("auto", timer)
    x = torch.randn(1, 8, 4, 4).to(memory_format=torch.channels_last)
    ran = []
    assert table.impl(_conv(), x, ran.append) == "gemm"
    assert table.impl(_conv(), x, ran.append) == "gemm"
    assert asked == [2] and table.counts() == {"kernel_ops_timed": 1.0, "kernel_reused": 0.0, "kernel_gemm": 1.0,
                                              "kernel_cudnn": 0.0, "kernel_conv_triton": 0.0,
                                              "kernel_depthwise_native": 0.0, "kernel_depthwise_cudnn": 0.0,
                                              "kernel_depthwise_triton": 0.0,
                                              "kernel_pool_triton": 0.0, "kernel_pool_aten": 0.0,
                                              "kernel_fused_triton": 0.0, "kernel_fused_aten": 0.0,
                                              "kernel_compiles": 0.0, "kernel_compile_s": 0.0,
                                              "kernel_ahead_programs": 0.0, "kernel_ahead_s": 0.0}
    key, = table.timings
    assert table.timings[key] == {"cudnn": 2.0, "gemm": 1.0} and table.choices == {key: "gemm"}
    tie = KernelTable("auto", lambda calls: [1.0, 1.0])
    assert tie.impl(_conv(), x, ran.append) == "cudnn"  # a tie keeps cuDNN
    seeded = KernelTable("auto", None, choices=table.choices)  # from a schedule file: nothing timed
    assert seeded.impl(_conv(), x, ran.append) == "gemm" and seeded.timed == 0


def test_kernel_choices_are_remembered_across_plans_by_versions_and_signature(tmp_path):
    """A choice timed by one run is taken by the next from the store's file, untimed, where the library
    versions match; a file another process wrote meanwhile is merged, not overwritten."""
    path = tmp_path / "kernel_choices.json"
    x = torch.randn(1, 8, 4, 4).to(memory_format=torch.channels_last)
    first = KernelTable("auto", lambda calls: [2.0, 1.0], remembered=CostCache(path, value=str), context="v1")
    other = CostCache(path, value=str)  # a second process, started at the same time
    assert first.impl(_conv(), x, lambda i: None) == "gemm"
    first.remembered.flush()
    other.put("v1|elsewhere", "cudnn")
    other.flush()
    saved = json.loads(path.read_text())
    assert set(saved) == {"v1|elsewhere", next(iter(first.choices)).join(["v1|", ""])}
    again = KernelTable("auto", lambda calls: pytest.fail("a remembered choice is not timed again"),
                        remembered=CostCache(path, value=str), context="v1")
    assert again.impl(_conv(), x, lambda i: None) == "gemm" and again.counts()["kernel_reused"] == 1.0
    newer = KernelTable("auto", lambda calls: [1.0, 3.0], remembered=CostCache(path, value=str), context="v2")
    assert newer.impl(_conv(), x, lambda i: None) == "cudnn" and newer.timed == 1  # other versions time again


def test_kernel_modes_and_the_untimed_default():
    x = torch.randn(1, 8, 4, 4).to(memory_format=torch.channels_last)
    never = KernelTable("cudnn", lambda calls: pytest.fail("cudnn mode times nothing"))
    assert never.impl(_conv(), x, lambda i: None) == "cudnn"
    assert KernelTable("gemm").impl(_conv(), x, lambda i: None) == "gemm"
    assert KernelTable("auto", None).impl(_conv(), x, lambda i: None) == "cudnn"
    with pytest.raises(ValueError, match="unknown kernel mode 'triton'"):
        KernelTable("triton")


def test_layout_choice_helpers():
    assert faster_layout({"nchw": 1.3, "nhwc": 1.1}) == "nhwc"
    assert faster_layout({"nchw": 0.9, "nhwc": 1.1}) == "nchw"
    assert faster_layout({"nhwc": 1.0, "nchw": 1.0}) == "nchw"
    assert [parse_channels_last(v) for v in ("auto", "True", "false", True)] == [None, True, False, True]
    with pytest.raises(ValueError, match="choose one of: auto, true, false"):
        parse_channels_last("sideways")


def _ios(bench_cfg, tmp_path, **over):
    return bench_cfg(**{"model": {"name": "nasnet", "params": {**SMALL["nasnet"], "num_normal": 1}},
                        "backend.name": "ios", "backend.store": str(tmp_path / "store"), "backend.progress": False,
                        "backend.schedule": "greedy", **over})


def test_ios_on_nhwc_with_gemm_kernels_matches_the_reference(bench_cfg, tmp_path):
    rec = run(_ios(bench_cfg, tmp_path, **{"backend.channels_last": "true", "backend.kernels": "gemm"}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.metrics["max_rel_error"] < 1e-4
    assert rec.metrics["kernel_gemm"] > 0 and rec.metrics["pass_fold_bias"] > 0
    assert rec.params["layout"] == "nhwc" and rec.params["layout_chosen_by"] == "forced"
    assert rec.params["passes"] == "fold_bias,pool_conv,attention,fuse_pointwise"
    sched = Schedule.from_dict(json.loads(rec.artifacts["schedule.json"]))
    assert sched.stats["channels_last"] is True
    assert sched.options["passes"] == ["fold_bias", "pool_conv", "attention", "fuse_pointwise"]
    assert set(sched.stats["kernels"].values()) == {"gemm"}


def test_ios_default_layout_on_the_cpu_and_a_schedule_file_keeps_its_passes(bench_cfg, tmp_path):
    rec = run(_ios(bench_cfg, tmp_path, **{"backend.passes": []}), quiet=True)
    assert rec.status == "FINISHED", rec.error
    assert rec.params["layout"] == "nchw" and rec.params["layout_chosen_by"] == "default"
    assert rec.params["passes"] == "none" and "pass_fold_bias" not in rec.metrics
    assert rec.metrics["kernel_gemm"] == 0  # NCHW memory: no 1x1 conv is a plain GEMM
    # the file was made without passes: run with today's default passes, it still runs its own graph
    again = run(_ios(bench_cfg, tmp_path, **{"backend.schedule_file": rec.params["schedule_path"]}), quiet=True)
    assert again.status == "FINISHED", again.error
    assert again.params["passes"] == "none" and again.metrics["max_rel_error"] < 1e-4


def test_pools_stay_on_aten_off_cuda_and_a_failing_candidate_is_not_chosen():
    from ios_core.ir.nodes import Pool

    pool = Pool(name="p", inputs=[[Value("x", 0, 8)]], pool_type="max", kernel=(3, 3), stride=(2, 2))
    x = torch.randn(1, 8, 9, 9).to(memory_format=torch.channels_last)
    table = KernelTable("auto", lambda calls: pytest.fail("nothing is timed on the CPU"))
    assert table.pool_impl(pool, x, lambda i: None) == "aten"

    def broken(calls):
        raise RuntimeError("inductor could not compile")
    key = "k"
    assert KernelTable("auto", broken)._choose(key, ("aten", "triton"), x, lambda i: None) == "aten"
    # a remembered Triton choice whose compile fails here is remembered as ATen's: later runs do not retry it
    kept = CostCache(None, value=str)
    kept.put("v|k", "triton")
    table = KernelTable("auto", broken, remembered=kept, context="v")
    assert table._choose(key, ("aten", "triton"), x, lambda i: None) == "triton"

    def fails():
        raise RuntimeError("Dynamo gave up")
    assert table.run_compiled(key, fails, (x,), lambda: x) is x and kept.get("v|k") == "aten"


def test_compiled_programs_are_counted_with_the_seconds_their_first_calls_took():
    """The prepare phase's compiles (Triton pools, fused groups) are one metric, so a warm rerun's time can be
    told apart from capture; a compile that fails falls back to ATen and is not counted."""
    import time

    table = KernelTable("auto")

    def make():
        time.sleep(0.05)  # Dynamo and Inductor at the first call, here in the maker
        return lambda t: t + 1

    x = torch.zeros(2)
    assert table.run_compiled("a", make, (x,), lambda: x)[0] == 1.0
    assert table.run_compiled("a", make, (x,), lambda: x)[0] == 1.0  # the second call compiles nothing
    assert table.run_compiled("b", lambda: (lambda t: t.nonexistent()), (x,), lambda: x - 1)[0] == -1.0
    counts = table.counts()
    assert counts["kernel_compiles"] == 1.0 and 0.05 <= counts["kernel_compile_s"] < 1.0
    assert table.choices["b"] == "aten" and "AttributeError" in table.failed["b"]


def _template_table(monkeypatch, timer, make, **kw):
    """A table with ``triton_convs`` on, where the template is offered off CUDA and ``make(node)`` is the
    'generated' conv; with ops that run each candidate as the runtime does."""
    import ios_core.runtime.kernels as kernels
    import ios_core.runtime.ops as ops

    monkeypatch.setattr(kernels, "template_ok", lambda node, x: True)
    monkeypatch.setattr(ops, "triton_conv", make)
    table = KernelTable(KernelPolicy(triton_convs=True), timer, **kw)
    torch.manual_seed(0)
    w, b = torch.randn(6, 8, 3, 3), torch.randn(6)
    return table, ops.RuntimeOps({"x": 8, "c": 6}, {"c": (w, b)}, fuse=False, kernels=table), w, b


_3X3 = _conv(kernel=(3, 3), padding=(1, 1))


def test_a_generated_conv_is_timed_against_cudnn_and_kept_where_faster(monkeypatch):
    """Issue 42, item 4: with triton_convs a convolution is timed as cuDNN against Inductor's template conv; the
    winner runs, is counted and is remembered under its own key; without the flag the table does as before."""
    made, asked = [], []

    def make(node):
        made.append(node.name)
        return lambda x, w, b: F.conv2d(x, w, b, padding=node.padding)

    def timer(calls):
        asked.append([c() is not None for c in calls])  # each candidate runs, as the real timer's warm-up does
        return [1.0, 0.5]  # cudnn, triton
    kept = CostCache(None, value=str)
    table, ops, w, b = _template_table(monkeypatch, timer, make, remembered=kept, context="v")
    x = torch.randn(1, 8, 4, 4).to(memory_format=torch.channels_last)
    torch.testing.assert_close(ops.visit_conv(_3X3, x), F.conv2d(x, w, b, padding=1))
    assert asked == [[True, True]] and made == ["c"]  # compiled once, on its first call
    key = KernelTable.template_key(_3X3, x)
    assert table.choices == {key: "triton"} and table.timings[key] == {"cudnn": 1.0, "triton": 0.5}
    assert kept.get(f"v|{key}") == "triton"
    counts = table.counts()
    assert counts["kernel_conv_triton"] == 1.0 and counts["kernel_cudnn"] == 0.0 and counts["kernel_ops_timed"] == 1.0
    search = table.under(table.policy.for_search())  # the search's tables: cuDNN, the template's choice not counted
    assert search.impl(_3X3, x, lambda i: None) == "cudnn" and search.counts()["kernel_conv_triton"] == 0.0
    assert search.choices is table.choices and table.policy.triton_convs  # one set of choices, two policies
    with pytest.raises(AttributeError, match="part of its policy: use table.under"):
        table.triton_convs = False


def test_only_convolutions_that_are_not_pointwise_on_cuda_get_the_template(monkeypatch):
    from ios_core.runtime.kernels import template_ok

    nhwc = torch.randn(1, 8, 4, 4).to(memory_format=torch.channels_last)
    assert not template_ok(_3X3, nhwc)  # on the CPU
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda t: True))  # as if on CUDA
    assert template_ok(_3X3, nhwc) and template_ok(_conv(stride=(2, 2)), nhwc)
    assert not template_ok(_conv(), nhwc) and not template_ok(_conv(), torch.randn(1, 8, 4, 4))  # 1x1: cuBLAS's
    assert not template_ok(_3X3, nhwc[:, :, :, ::2])  # a strided slice: one compile per slice


def test_a_generated_conv_that_fails_to_compile_falls_back_to_cudnn_and_is_not_compiled_again(monkeypatch):
    tries = []

    def make(node):
        def broken(x, w, b):
            tries.append(1)  # Dynamo compiles on the first call: here it fails
            raise RuntimeError("NoValidChoicesError: no template fits")
        return broken

    def timer(calls):
        for _ in range(3):  # the warm-up call, then the captured copies
            for c in calls:
                c()
        return [1.0, 0.1]  # what the failed candidate timed was the fallback
    kept = CostCache(None, value=str)
    table, ops, w, b = _template_table(monkeypatch, timer, make, remembered=kept, context="v")
    x = torch.randn(1, 8, 4, 4).to(memory_format=torch.channels_last)
    torch.testing.assert_close(ops.visit_conv(_3X3, x), F.conv2d(x, w, b, padding=1))  # the fallback's output
    key = KernelTable.template_key(_3X3, x)
    assert table.choices[key] == "cudnn" and kept.get(f"v|{key}") == "cudnn"
    assert "NoValidChoices" in table.failed[key] and len(tries) == 1 and key not in table.compiled
    assert table.counts()["kernel_conv_triton"] == 0.0


def test_triton_convs_needs_the_kernel_choice():
    from ios_core.planner import PlanOptions
    from ios_core.schedule import OptionError

    PlanOptions(triton_convs=True).check()
    PlanOptions(triton_depthwise=True, kernels="gemm").check()  # on by default: no effect without the choice
    with pytest.raises(OptionError, match="depthwise_start_margin=5.0: a fraction between 0 and 1"):
        PlanOptions(depthwise_start_margin=5.0).check()
    with pytest.raises(OptionError, match="triton_convs=true needs kernels=auto"):
        PlanOptions(triton_convs=True, kernels="cudnn").check()


_POOL_CASES = [  # (type, kernel, stride, padding, ceil_mode, count_include_pad): Inception's, NASNet's and edge ones
    ("max", 3, 2, 0, False, True), ("max", 3, 1, 1, False, True), ("max", 2, 2, 0, True, True),
    ("avg", 3, 1, 1, False, True), ("avg", 3, 1, 1, False, False), ("avg", 3, 2, 1, True, False),
    ("avg", 2, 2, 1, True, True), ("max", 3, 2, 1, True, True)]


def _pool(pool_type, k, s, p, ceil, include):
    from ios_core.ir.nodes import Pool

    return Pool(name="p", inputs=[[Value("x", 0, 5)]], pool_type=pool_type, kernel=k, stride=s, padding=p,
                ceil_mode=ceil, count_include_pad=include)


def _aten_pool(node, x):
    from ios_core.interpreters.torch import torch_pool

    return torch_pool(node, x)


def test_triton_pool_output_sizes_are_atens():
    from ios_core.runtime.triton_pool import out_size

    for size in range(4, 12):
        for k, s, p, ceil in [(3, 2, 0, False), (3, 2, 1, True), (2, 2, 0, True), (3, 1, 1, False), (2, 2, 1, True)]:
            aten = F.max_pool2d(torch.zeros(1, 1, size, size), k, s, p, ceil_mode=ceil).shape[-1]
            assert out_size(size, k, s, p, ceil) == aten, (size, k, s, p, ceil)


def test_triton_pool_refuses_what_it_has_no_kernel_for():
    from ios_core.ir.nodes import Pool
    from ios_core.runtime.triton_pool import triton_pool

    with pytest.raises(ValueError, match="no Triton kernel for a global_avg pool"):
        triton_pool(Pool(name="g", inputs=[[Value("x", 0, 5)]], pool_type="global_avg"))


def test_depthwise_tiles_are_powers_of_two_and_fill_the_gpu_where_the_map_allows():
    """Triton's tiles are powers of two; the channel tile pads the channels least (16 for 42 channels: 48, not
    64); a small map gets smaller pixel tiles (more programs), down to MIN_PIXELS."""
    from ios_core.runtime.triton_depthwise import MIN_PIXELS, MIN_PROGRAMS, PIXELS, tile

    assert tile(83 * 83, 42) == (32, 16) and tile(83 * 83, 96) == (32, 32) and tile(4, 5) == (8, 16)
    assert tile(121, 672) == (8, 32) and tile(441, 336) == (32, 16) and tile(1764, 84) == (16, 32)
    for pixels in (1, 49, 121, 1764, 6889, 27225):
        for channels in (5, 16, 42, 64, 70, 672, 1232):
            bp, bc = tile(pixels, channels)
            assert bp & (bp - 1) == 0 and bc in (16, 32) and MIN_PIXELS <= bp <= PIXELS
            assert bp == MIN_PIXELS or -(-pixels // bp) * -(-channels // bc) >= MIN_PROGRAMS


def test_triton_pools_and_depthwise_convs_equal_atens_under_tritons_interpreter():
    """The kernels' indexing, masks, divisors and channel multipliers (and a depthwise convolution over several
    channel tiles), run by Triton's CPU interpreter where
    Triton is installed (tests/test_ios_gpu.py runs them on the GPU in fp16). A process of its own: Triton reads
    TRITON_INTERPRET when its library is imported."""
    pytest.importorskip("triton")
    import subprocess
    import sys

    code = f"""
import torch
from tests.test_kernels import _aten_pool, _pool
from ios_core.runtime.triton_pool import triton_pool
torch.manual_seed(0)
for case in {_POOL_CASES!r}:
    node = _pool(*case)
    for x in (torch.randn(2, 5, 9, 8), torch.randn(2, 5, 9, 8).to(memory_format=torch.channels_last)):
        y, ref = triton_pool(node)(x), _aten_pool(node, x)
        assert y.shape == ref.shape and y.is_contiguous() == x.is_contiguous(), case
        assert torch.allclose(y, ref, atol=1e-6), (case, (y - ref).abs().max())
from ios_core.ir.nodes import Conv, Value
from ios_core.runtime.triton_depthwise import triton_depthwise
import torch.nn.functional as F
for k, s, p, mult, act in ((3, 1, 1, 1, "identity"), (5, 2, 2, 1, "relu"), (3, 2, 0, 2, "relu")):
    node = Conv(name="d", inputs=[[Value("x", 0, 5)]], out_channels=5 * mult, kernel=k, stride=s, padding=p,
                groups=5, act=act)
    w, b = torch.randn(5 * mult, 1, k, k), torch.randn(5 * mult)
    for x in (torch.randn(2, 5, 9, 8), torch.randn(2, 5, 9, 8).to(memory_format=torch.channels_last),
              torch.randn(2, 9, 9, 8).to(memory_format=torch.channels_last)[:, 2:7]):  # a channel slice
        ref = F.conv2d(x, w, b, s, p, groups=5)
        ref = ref.relu() if act == "relu" else ref
        y = triton_depthwise(node)(x, w, b)
        assert y.shape == ref.shape and torch.allclose(y, ref, atol=1e-5), (k, s, p, mult, act)
for mult in (1, 2):  # several channel tiles, the last partly masked
    wide = Conv(name="w", inputs=[[Value("x", 0, 70)]], out_channels=70 * mult, kernel=3, stride=1, padding=1,
                groups=70, act="identity")
    w70, b70, x70 = torch.randn(70 * mult, 1, 3, 3), torch.randn(70 * mult), torch.randn(3, 70, 6, 5)
    for x in (x70, x70.to(memory_format=torch.channels_last)):
        ref = F.conv2d(x, w70, b70, 1, 1, groups=70)
        assert torch.allclose(triton_depthwise(wide)(x, w70, b70), ref, atol=1e-5), mult
        for fixed in ((32, 32, 4), (16, 32, 2)):  # the larger tiles (a small map gets 8 x 16)
            assert torch.allclose(triton_depthwise(wide, fixed)(x, w70, b70), ref, atol=1e-5), (mult, fixed)
print("ok", len({_POOL_CASES!r}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.stdout.strip() == f"ok {len(_POOL_CASES)}", done.stderr[-2000:]


def test_the_cudnn_search_option_is_checked_and_names_files_only_where_not_what_older_files_were_made_with():
    """Heuristic is the default; benchmark, what files were saved with before the option, stays unnamed, so a
    schedule or layout timed with benchmark is found by it and never reused by the new default."""
    from ios_core.planner import PlanOptions
    from ios_core.runtime.target import use_cudnn_search
    from ios_core.schedule import OptionError

    default, benchmark = PlanOptions(), PlanOptions(cudnn_search="benchmark")
    default.check()
    assert default.cudnn_search == "heuristic"
    assert benchmark.variant() == {} and default.variant() == {"cudnn_search": "heuristic"}
    assert default.digest("layout") == PlanOptions(fuse=True).digest("layout") != benchmark.digest("layout")
    with pytest.raises(OptionError, match="cudnn_search.*'fastest'.*benchmark, heuristic"):
        PlanOptions(cudnn_search="fastest").check()
    with pytest.raises(ValueError, match="cudnn_search='find' is invalid; choose one of: benchmark, heuristic"):
        use_cudnn_search("find")


def test_depthwise_convs_time_atens_and_tritons_kernels_against_cudnns(monkeypatch):
    """Issue 42: a depthwise convolution on CUDA is timed as cuDNN against ATen's own kernel (``native``), and with
    triton_convs (or triton_depthwise alone) the Triton one, the fastest kept and counted; the runtime runs
    ATen's and Triton's with the weights copied to NCHW once, not per call."""
    import ios_core.runtime.kernels as kernels
    import ios_core.runtime.ops as ops

    node = _conv(kernel=(3, 3), padding=(1, 1), groups=8, out=8)
    x = torch.randn(1, 8, 5, 5).to(memory_format=torch.channels_last)
    assert not kernels.depthwise_ok(node, x)  # ATen's depthwise kernel is a CUDA one
    monkeypatch.setattr(kernels, "depthwise_ok", lambda node, x: node.groups == x.shape[1])
    monkeypatch.setattr(ops, "depthwise_ok", kernels.depthwise_ok)
    weights = []

    def native(node, x, w, b):
        weights.append(w)
        return F.conv2d(x, w, b, node.stride, node.padding, groups=node.groups)

    def triton(node):
        return lambda x, w, b: native(node, x, w, b) + 1  # told apart from the others
    monkeypatch.setattr(ops, "conv_native", native)
    monkeypatch.setattr(ops, "triton_depthwise", triton)
    w = torch.randn(8, 1, 3, 6)[..., ::2]  # weights not in NCHW memory
    ref = F.conv2d(x, w, None, 1, 1, groups=8)
    for times, impl, offset in (([3.0, 1.0, 2.0], "native", 0.0), ([3.0, 2.0, 1.0], "triton", 1.0)):
        policy = KernelPolicy(triton_depthwise=impl == "triton")
        table = KernelTable(policy, lambda runs, times=times: times[:len(runs)])
        run = ops.RuntimeOps({"x": 8, "c": 8}, {"c": (w, None)}, fuse=False, kernels=table)
        weights.clear()
        y1, y2 = run.visit_conv(node, x), run.visit_conv(node, x)
        assert table.choices == {table.depthwise_key(node, x): impl}
        assert table.counts()[f"kernel_depthwise_{impl}"] == 1.0 and table.counts()["kernel_cudnn"] == 0.0
        assert weights[-1] is weights[-2] and weights[-1].is_contiguous()  # one NCHW copy of the weights, reused
        torch.testing.assert_close(y1, ref + offset)
        assert torch.equal(y1, y2)
    # a Triton kernel that fails to compile: what it "timed" was cuDNN's fallback; the fastest of the others runs
    monkeypatch.setattr(ops, "triton_depthwise", lambda node: lambda x, w, b: x.nonexistent())
    failing = KernelTable(KernelPolicy(triton_convs=True),
                          lambda runs: [r() is None or [3.0, 2.0, 1.0][i] for i, r in enumerate(runs)])
    run = ops.RuntimeOps({"x": 8, "c": 8}, {"c": (w, None)}, fuse=False, kernels=failing)
    torch.testing.assert_close(run.visit_conv(node, x), ref)
    assert failing.choices == {failing.depthwise_key(node, x): "native"} and "AttributeError" in \
        failing.failed[failing.depthwise_key(node, x)]
    # the search's choice (no Triton candidate) and the final model's (with it) are counted once
    both = KernelTable("auto", lambda runs: [1.0, 2.0, 3.0][:len(runs)])
    both.impl(node, x, lambda i: None)
    final = both.under(KernelPolicy(triton_convs=True))
    final.impl(node, x, lambda i: None)
    assert len(both.choices) == 2 and final.counts()["kernel_depthwise_cudnn"] == 1.0
    asked = []
    slower = KernelTable("auto", lambda runs: asked.append(len(runs)) or [1.0, 3.0, 2.0][:len(runs)])
    assert slower.impl(node, x, lambda i: None) == "cudnn" and slower.counts()["kernel_depthwise_cudnn"] == 1.0
    assert asked == [2]  # the Triton kernel is a candidate with triton_convs or triton_depthwise only
    monkeypatch.setattr(kernels, "template_ok", lambda node, x: True)  # offered off CUDA
    conv3, timed = _conv(kernel=(3, 3), padding=(1, 1)), []
    dense = KernelTable(KernelPolicy(triton_depthwise=True),
                        lambda runs: timed.append(len(runs)) or [2.0, 1.0][:len(runs)])
    assert dense.impl(conv3, torch.randn(1, 8, 5, 5), lambda i: None) == "cudnn"  # no template: that is triton_convs
    assert timed == [] and not any(k.startswith("('triton_conv'") for k in dense.choices)
    assert KernelTable("cudnn").impl(node, x, lambda i: None) == "cudnn"  # the vendor baseline times nothing
    # cuDNN's kernel builds its plan in every process: with a margin it must win by more than that
    for margin, times, impl in ((0.0, [1.0, 1.5, 1.03], "cudnn"), (0.05, [1.0, 1.5, 1.03], "triton"),
                                (0.05, [1.0, 1.04, 1.5], "native"), (0.05, [1.0, 1.2, 1.06], "cudnn")):
        table = KernelTable(KernelPolicy(triton_depthwise=True, start_margin=margin),
                            lambda runs, times=times: times[:len(runs)])
        assert table.impl(node, x, lambda i: None) == impl, (margin, times)
        assert table.timings[table.depthwise_key(node, x)] == dict(zip(("cudnn", "native", "triton"), times))


def test_ahead_compiles_the_triton_programs_a_call_will_time_and_chooses_nothing(monkeypatch):
    """Issue 42: ``KernelTable.ahead`` calls the model once with each undecided depthwise convolution (and pool) on
    its Triton program, inside the compile-ahead block, without timing or keeping any choice; the call that
    follows times the candidates with the program made then. A decided convolution runs what was decided; the
    untimed screen's table runs its first candidate; without threads nothing happens."""
    import contextlib

    import ios_core.runtime.ahead as ahead
    import ios_core.runtime.kernels as kernels
    import ios_core.runtime.ops as ops

    node = _conv(kernel=(3, 3), padding=(1, 1), groups=8, out=8)
    x = torch.randn(1, 8, 5, 5).to(memory_format=torch.channels_last)
    monkeypatch.setattr(kernels, "depthwise_ok", lambda node, x: node.groups == x.shape[1])
    monkeypatch.setattr(ops, "depthwise_ok", kernels.depthwise_ok)
    monkeypatch.setattr(ops, "conv_native", lambda node, x, w, b: F.conv2d(x, w, b, 1, 1, groups=8))
    inside, calls, made = [False], [], []

    @contextlib.contextmanager
    def compiling(threads):
        calls.append(("block", threads))
        inside[0] = True
        yield
        inside[0] = False

    def triton(node):
        made.append(node.name)
        return lambda x, w, b: calls.append(("triton", inside[0])) or F.conv2d(x, w, b, 1, 1, groups=8) + 1
    monkeypatch.setattr(ahead, "supported", lambda: True)
    monkeypatch.setattr(ahead, "compiling", compiling)
    monkeypatch.setattr(ops, "triton_depthwise", triton)
    w = torch.randn(8, 1, 3, 3)
    timed = []
    table = KernelTable(KernelPolicy(triton_depthwise=True, depthwise_cudnn=False),
                        lambda runs: timed.append(len(runs)) or [1.0, 2.0][:len(runs)], compile_threads=4)
    run = ops.RuntimeOps({"x": 8, "c": 8}, {"c": (w, None)}, fuse=False, kernels=table)
    assert table.depthwise_impls(node, x) == ("triton", "native")  # cuDNN's kernel not tried
    assert table.depthwise_impls(node, x.contiguous()) == ("native", "triton")  # untimed: ATen's on NCHW
    table.ahead(lambda: run.visit_conv(node, x))
    assert calls == [("block", 4), ("triton", True)] and made == ["c"] and timed == []
    assert table.choices == {} and table.ahead_programs == 1 and table.compiles == 0 and table.ahead_s > 0
    torch.testing.assert_close(run.visit_conv(node, x), F.conv2d(x, w, None, 1, 1, groups=8) + 1)
    assert table.choices == {table.depthwise_key(node, x): "triton"} and timed == [2] and made == ["c"]
    assert "triton only" in table.depthwise_key(node, x) and table.counts()["kernel_ahead_programs"] == 1.0
    assert table.counts()["kernel_depthwise_triton"] == 1.0  # counted under its key without cuDNN's kernel
    calls.clear()
    table.choices[table.depthwise_key(node, x)] = "native"  # decided against: its program is not compiled
    table.ahead(lambda: run.visit_conv(node, x))
    assert calls == [("block", 4)]
    screen = KernelTable(KernelPolicy(triton_depthwise=True, depthwise_cudnn=False), None, compile_threads=2)
    calls.clear()
    screen.ahead(lambda: ops.RuntimeOps({"x": 8, "c": 8}, {"c": (w, None)}, fuse=False, kernels=screen)
                 .visit_conv(node, x))
    assert calls == [("block", 2), ("triton", True)]  # untimed: its first candidate, as the screen will run
    calls.clear()
    screen.ahead(lambda: ops.RuntimeOps({"x": 8, "c": 8}, {"c": (w, None)}, fuse=False, kernels=screen)
                 .visit_conv(node, x.contiguous()))
    assert calls == [("block", 2)]  # on NCHW memory ATen's kernel: no program to compile
    calls.clear()
    KernelTable(KernelPolicy(triton_depthwise=True), None, compile_threads=0).ahead(lambda: calls.append("ran"))
    assert calls == []  # no threads: the call is not made at all
