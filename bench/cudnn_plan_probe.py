"""Whether cuDNN's depthwise plans can be kept across processes (issue 42: a warm rerun of nasnet spends 5-7 s
in cuDNN building its depthwise plans at run time, 180-400 ms a shape, in every new process).

    python bench/cudnn_plan_probe.py build --model nasnet --store DIR   # plans built, timed, serialized
    python bench/cudnn_plan_probe.py load --model nasnet --store DIR    # a fresh process: plans deserialized
    python bench/cudnn_plan_probe.py build --engines 80 --shapes 0,2 ...  # every engine id, not heuristics' list
    CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=log python bench/cudnn_plan_probe.py torch --shapes 0  # PyTorch's engine

Through cuDNN's frontend (the ``nvidia-cudnn-frontend`` wheel, ``import cudnn``) on the cuDNN that PyTorch
loaded: each distinct depthwise convolution of the network (IOS's default passes, NHWC, batch 1) as a one-node
graph, every plan of heuristics A and fallback built and timed (20 calls in a CUDA graph), the fastest kept; its
output compared with ``F.conv2d``'s; its steady-state time against PyTorch's cuDNN convolution (plan search on),
each replayed 50 times in a CUDA graph; the plan serialized to DIR. ``load`` times each plan's deserialization
and first call in a new process and checks its output again."""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import pathlib
import time

import torch
import torch.nn.functional as F
from conv_first_call import convs, kind

from ios_core.models import build_model
from ios_core.passes import apply_passes
from ios_core.planner import DEFAULT_PASSES


def import_cudnn():
    """The frontend, bound to the libcudnn PyTorch already loaded (one cuDNN per process): the frontend looks for
    libcudnn in ``os.environ["LD_LIBRARY_PATH"]`` when it is imported, so the variable is set in this process."""
    torch.backends.cudnn.version()
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "libcudnn.so" in line}
    for lib in sorted(libs):
        ctypes.CDLL(lib)
    if libs:
        os.environ["LD_LIBRARY_PATH"] = ":".join(sorted({os.path.dirname(p) for p in libs}))
    import cudnn
    return cudnn, sorted(libs)


def shapes(model: str) -> list[tuple]:
    """(c, h, w, kernel, stride, padding, dilation) of each distinct depthwise convolution with one output per
    channel (the probes build (c, 1, kh, kw) weights; a channel multiplier above 1 is left out, said once)."""
    graph, _ = apply_passes(build_model(model), list(DEFAULT_PASSES))
    seen: dict[tuple, None] = {}
    for node, (c, h, w) in convs(graph):
        if kind(node, c) != "depthwise":
            continue
        if node.out_channels != c:
            print(f"left out: {node.name}, {node.out_channels // c} outputs per channel")
            continue
        seen.setdefault((c, h, w, node.kernel, node.stride, node.padding, node.dilation), None)
    return list(seen)


def tensors(c: int, h: int, w: int, k: tuple, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch-1 NHWC input and (c, 1, kh, kw) weights in NHWC memory, as IOS's NHWC model holds them."""
    x = torch.randn(1, c, h, w, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
    return x, torch.randn(c, 1, *k, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)


def first_ms(fn) -> float:
    """One call of ``fn``, to its end on the GPU, in ms."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - t0)


def replay_us(fn, reps: int = 50) -> float:
    """``fn``'s steady-state time: ``reps`` calls captured in a CUDA graph, the best of 5 replays, us a call."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    return best


class Probe:
    """One process's frontend, handle and workspace, and the shapes' sums."""

    def __init__(self, dtype: torch.dtype, store: pathlib.Path):
        t0 = time.perf_counter()
        self.cudnn, libs = import_cudnn()
        self.handle = self.cudnn.create_handle()
        self.io = self.cudnn.data_type.HALF if dtype == torch.float16 else self.cudnn.data_type.FLOAT
        self.dtype, self.store = dtype, store
        self.work = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        self.totals = {"plan_s": 0.0, "first_s": 0.0, "torch_first_s": 0.0, "fe_us": 0.0, "torch_us": 0.0}
        self.ok = 0
        print(f"import+handle {time.perf_counter() - t0:.2f} s; cudnn frontend {self.cudnn.__version__} backend "
              f"{self.cudnn.backend_version()} torch cudnn {torch.backends.cudnn.version()} libs {libs}")

    def workspace(self, size: int) -> torch.Tensor:
        """A workspace of at least ``size`` bytes (an engine may want more than the 64 MiB kept)."""
        if size > self.work.numel():
            self.work = torch.empty(size, dtype=torch.uint8, device="cuda")
        return self.work

    def stream(self) -> None:
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)

    def graph(self, x: torch.Tensor, wt: torch.Tensor, s: tuple, p: tuple, d: tuple):
        """The convolution as a one-node frontend graph, its tensors' uids 1 (x), 2 (w), 3 (y)."""
        cudnn = self.cudnn
        g = cudnn.pygraph(io_data_type=self.io, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=self.handle)
        X = g.tensor(name="X", dim=list(x.shape), stride=list(x.stride()), data_type=self.io, uid=1)
        W = g.tensor(name="W", dim=list(wt.shape), stride=list(wt.stride()), data_type=self.io, uid=2)
        Y = g.conv_fprop(image=X, weight=W, padding=list(p), stride=list(s), dilation=list(d),
                         compute_data_type=cudnn.data_type.FLOAT, name="conv")
        Y.set_output(True).set_data_type(self.io).set_uid(3)
        g.validate()
        g.build_operation_graph()
        return g

    def candidates(self, g, engines: int) -> dict[int, float]:
        """The plans to time: heuristics A and fallback's list, all built at once (``engines`` 0), or every engine
        id below ``engines`` with its default knobs, each built alone (the ms each took, by plan index): whether
        the kernel PyTorch runs, which those heuristics did not list, is among them and how long it builds."""
        if not engines:
            g.create_execution_plans([self.cudnn.heur_mode.A, self.cudnn.heur_mode.FALLBACK])
            g.check_support()
            g.build_plans(self.cudnn.build_plan_policy.ALL)
            return {}
        declined = []
        for engine in range(engines):
            try:
                g.create_execution_plan(engine, {})
            except Exception as exc:  # noqa: BLE001 - an engine that does not take this graph: said at the end
                declined.append(f"{engine}: {type(exc).__name__}: {str(exc)[:80]}")
        built = {}
        for j in range(g.get_execution_plan_count()):
            t0 = time.perf_counter()
            try:
                g.select_plan(j)
                g.build_plans()
            except Exception as exc:  # noqa: BLE001 - a plan that does not build: not timed, said at the end
                declined.append(f"plan {j}: {type(exc).__name__}: {str(exc)[:80]}")
                continue
            built[j] = 1e3 * (time.perf_counter() - t0)
        print(f"engines: {len(built)} plans built of {engines} ids; declined {len(declined)}, the first: "
              f"{declined[:2]}", flush=True)
        if not built:
            raise RuntimeError(f"no plan of {engines} engine ids built")
        return built

    def fastest(self, g, pack: dict, engines: int, what: str) -> None:
        """Every candidate plan timed (20 calls in a CUDA graph), the fastest selected and built."""
        built = self.candidates(g, engines)
        timed = []
        for j in range(g.get_execution_plan_count()):
            if engines and j not in built:
                continue
            try:
                work = self.workspace(g.get_workspace_size_plan_at_index(j))
                us = replay_us(lambda j=j, work=work: (self.stream(),
                                                      g.execute_plan_at_index(pack, work, j, handle=self.handle)),
                               reps=20)
                timed.append((us, j, g.get_plan_name_at_index(j)))
            except Exception as exc:  # noqa: BLE001 - a plan that did not build or run: counted, its reason kept
                timed.append((float("inf"), j, f"{type(exc).__name__}: {str(exc)[:60]}"))
        timed.sort()
        if not timed or timed[0][0] == float("inf"):
            raise RuntimeError(f"none of {len(timed)} plans ran; the first: {timed[:1]}")
        failed = [n for u, _, n in timed if u == float("inf")]
        best = ", ".join(f"{n} {u:.1f} us" + (f" (built in {built[j]:.0f} ms)" if j in built else "")
                         for u, j, n in timed[:5])
        print(f"{what}\tplans {len(timed)} ({len(failed)} did not run{': ' + failed[0] if failed else ''}): {best}",
              flush=True)
        g.select_plan(timed[0][1])
        g.build_plans()

    def shape(self, i: int, c: int, h: int, w: int, k: tuple, s: tuple, p: tuple, d: tuple, phase: str,
              engines: int) -> None:
        """One shape: its plan built and saved (``build``) or loaded (``load``), run once and checked against
        float64, then timed against PyTorch's convolution."""
        x, wt = tensors(c, h, w, k, self.dtype)
        ref = F.conv2d(x.double(), wt.double(), None, s, p, d, c)
        y = torch.empty_like(ref, dtype=self.dtype).contiguous(memory_format=torch.channels_last)
        pack = {1: x, 2: wt, 3: y}
        what = f"{i} c{c} {h}x{w} k{k} s{s}"
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if phase == "build":
            g = self.graph(x, wt, s, p, d)
            self.fastest(g, pack, engines, what)
            (self.store / f"{i}.bin").write_bytes(bytes(g.serialize(as_bytes=True)))
        else:
            g = self.cudnn.pygraph(handle=self.handle)
            g.deserialize(self.handle, (self.store / f"{i}.bin").read_bytes())
        plan_s = time.perf_counter() - t0
        ws = g.get_workspace_size()
        work = self.workspace(ws)

        def fe() -> None:
            self.stream()
            g.execute(pack, work, handle=self.handle)
        first_s = first_ms(fe) / 1e3
        err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
        torch_conv = functools.partial(F.conv2d, x, wt, None, s, p, d, c)
        torch_first = first_ms(torch_conv) / 1e3
        fe_us, torch_us = replay_us(fe), replay_us(torch_conv)
        self.ok += 1
        for key, v in zip(self.totals, (plan_s, first_s, torch_first, fe_us, torch_us)):
            self.totals[key] += v
        print(f"{what}\tplan {1e3 * plan_s:.1f} ms\tfirst {1e3 * first_s:.1f} ms\ttorch first "
              f"{1e3 * torch_first:.1f} ms\tfe {fe_us:.2f} us\ttorch {torch_us:.2f} us\terr {err:.1e}\tws {ws}",
              flush=True)


def torch_first_calls(model: str, dtype: torch.dtype, only: set[int]) -> None:
    """PyTorch's own cuDNN convolution of each shape, once: run with cuDNN's log on (CUDNN_LOGLEVEL_DBG=2,
    CUDNN_LOGDEST_DBG=file) it names the engine PyTorch's path built, which the frontend's heuristics did not list."""
    for i, (c, h, w, k, s, p, d) in enumerate(shapes(model)):
        if only and i not in only:
            continue
        x, wt = tensors(c, h, w, k, dtype)
        conv = functools.partial(F.conv2d, x, wt, None, s, p, d, c)
        print(f"{i} c{c} {h}x{w} k{k} s{s}\ttorch first {first_ms(conv):.1f} ms\t{replay_us(conv):.2f} us",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=("build", "load", "torch"))
    ap.add_argument("--model", default="nasnet")
    ap.add_argument("--store", default="/tmp/cudnn_plans")
    ap.add_argument("--precision", default="fp16", choices=("fp16", "fp32"))
    ap.add_argument("--engines", type=int, default=0,
                    help="build every engine id below this one (default knobs) instead of heuristics' list")
    ap.add_argument("--shapes", default="", help="comma-separated shape indices to probe (default all)")
    a = ap.parse_args()
    only = {int(i) for i in a.shapes.split(",") if i}
    torch.backends.cudnn.benchmark = True
    dtype = torch.float16 if a.precision == "fp16" else torch.float32
    if a.phase == "torch":
        torch_first_calls(a.model, dtype, only)
        return
    store = pathlib.Path(a.store)
    store.mkdir(parents=True, exist_ok=True)
    probe = Probe(dtype, store)
    for i, (c, h, w, k, s, p, d) in enumerate(shapes(a.model)):
        if only and i not in only:
            continue
        try:
            probe.shape(i, c, h, w, k, s, p, d, a.phase, a.engines)
        except Exception as exc:  # noqa: BLE001 - a probe: say what failed where, go on with the next shape
            print(f"{i} c{c} {h}x{w} k{k} s{s}\tFAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    print(f"{a.phase} {a.model} {a.precision}: {probe.ok} shapes ok; " +
          "; ".join(f"{k} {v:.3f}" for k, v in probe.totals.items()))


if __name__ == "__main__":
    main()
