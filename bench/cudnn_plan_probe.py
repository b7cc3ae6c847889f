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
    """The frontend, bound to the libcudnn PyTorch already loaded (one cuDNN per process)."""
    torch.backends.cudnn.version()
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "libcudnn.so" in line}
    for lib in sorted(libs):
        ctypes.CDLL(lib)
    if libs:
        os.environ["LD_LIBRARY_PATH"] = ":".join(sorted({os.path.dirname(p) for p in libs}))
    import cudnn
    return cudnn, sorted(libs)


def shapes(model: str):
    graph, _ = apply_passes(build_model(model), list(DEFAULT_PASSES))
    seen = {}
    for node, (c, h, w) in convs(graph):
        if kind(node, c) != "depthwise":
            continue
        key = (c, h, w, node.kernel, node.stride, node.padding, node.dilation)
        seen.setdefault(key, node)
    return seen


def replay_us(fn, reps: int = 50) -> float:
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


def build_candidates(cudnn, g, engines: int) -> dict[int, float]:
    """The plans to time: heuristics A and fallback's list, all built at once (``engines`` 0), or every engine
    id below ``engines`` with its default knobs, each built alone (the ms each took, by plan index): whether
    the kernel PyTorch runs, which those heuristics did not list, is among them and how long it takes to build."""
    if not engines:
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans(cudnn.build_plan_policy.ALL)
        return {}
    for engine in range(engines):
        try:
            g.create_execution_plan(engine, None)
        except Exception:  # noqa: BLE001 - an engine that does not take this graph
            continue
    built = {}
    for j in range(g.get_execution_plan_count()):
        t0 = time.perf_counter()
        try:
            g.select_plan(j)
            g.build_plans()
        except Exception:  # noqa: BLE001 - a plan that does not build; timing it fails and says so
            continue
        built[j] = 1e3 * (time.perf_counter() - t0)
    return built


def torch_first_calls(model: str, dtype: torch.dtype, only: set[int]) -> None:
    """PyTorch's own cuDNN convolution of each shape, once: run with cuDNN's log on (CUDNN_LOGLEVEL_DBG=2,
    CUDNN_LOGDEST_DBG=file) it names the engine PyTorch's path built, which the frontend's heuristics did not list."""
    for i, (c, h, w, k, s, p, d) in enumerate(shapes(model)):
        if only and i not in only:
            continue
        x = torch.randn(1, c, h, w, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
        wt = torch.randn(c, 1, *k, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        F.conv2d(x, wt, None, s, p, d, c)
        torch.cuda.synchronize()
        first_ms = 1e3 * (time.perf_counter() - t0)
        us = replay_us(lambda x=x, wt=wt, s=s, p=p, d=d, c=c: F.conv2d(x, wt, None, s, p, d, c))
        print(f"{i} c{c} {h}x{w} k{k} s{s}\ttorch first {first_ms:.1f} ms\t{us:.2f} us", flush=True)


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
    t0 = time.perf_counter()
    cudnn, libs = import_cudnn()
    handle = cudnn.create_handle()
    io = cudnn.data_type.HALF if dtype == torch.float16 else cudnn.data_type.FLOAT
    print(f"import+handle {time.perf_counter() - t0:.2f} s; cudnn frontend {getattr(cudnn, '__version__', '?')} "
          f"backend {cudnn.backend_version() if hasattr(cudnn, 'backend_version') else '?'} torch cudnn "
          f"{torch.backends.cudnn.version()} libs {libs}")
    store = pathlib.Path(a.store)
    store.mkdir(parents=True, exist_ok=True)
    work = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    totals = {"plan_s": 0.0, "first_s": 0.0, "torch_first_s": 0.0, "fe_us": 0.0, "torch_us": 0.0}
    n_ok = 0
    for i, (c, h, w, k, s, p, d) in enumerate(shapes(a.model)):
        if only and i not in only:
            continue
        x = torch.randn(1, c, h, w, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
        wt = torch.randn(c, 1, *k, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
        ref = F.conv2d(x.double(), wt.double(), None, s, p, d, c)
        y = torch.empty_like(ref, dtype=dtype).contiguous(memory_format=torch.channels_last)
        what = f"{i} c{c} {h}x{w} k{k} s{s}"
        try:
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            if a.phase == "build":
                g = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                                  compute_data_type=cudnn.data_type.FLOAT, handle=handle)
                X = g.tensor(name="X", dim=list(x.shape), stride=list(x.stride()), data_type=io, uid=1)
                W = g.tensor(name="W", dim=list(wt.shape), stride=list(wt.stride()), data_type=io, uid=2)
                Y = g.conv_fprop(image=X, weight=W, padding=list(p), stride=list(s), dilation=list(d),
                                 compute_data_type=cudnn.data_type.FLOAT, name="conv")
                Y.set_output(True).set_data_type(io).set_uid(3)
                g.validate()
                g.build_operation_graph()
                built_ms = build_candidates(cudnn, g, a.engines)
                plan_s = time.perf_counter() - t1
                pack = {1: x, 2: wt, 3: y}
                timed = []
                for j in range(g.get_execution_plan_count()):
                    try:
                        us = replay_us(lambda g=g, j=j, pack=pack: (
                            cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream),
                            g.execute_plan_at_index(pack, work, j, handle=handle)), reps=20)
                        timed.append((us, j, g.get_plan_name_at_index(j)))
                    except Exception as exc:  # noqa: BLE001 - a plan that did not build or run
                        timed.append((float("inf"), j, f"{type(exc).__name__}"))
                timed.sort()
                print(f"{what}\tplans {len(timed)}: " + ", ".join(
                    f"{n} {u:.1f} us" + (f" (built in {built_ms[j]:.0f} ms)" if j in built_ms else "")
                    for u, j, n in timed[:5]), flush=True)
                t1b = time.perf_counter()
                g.select_plan(timed[0][1])
                g.build_plans()
                plan_s += time.perf_counter() - t1b
                blob = g.serialize(as_bytes=True)
                (store / f"{i}.bin").write_bytes(bytes(blob))
            else:
                g = cudnn.pygraph(handle=handle)
                g.deserialize(handle, (store / f"{i}.bin").read_bytes())
                plan_s = time.perf_counter() - t1
            ws = g.get_workspace_size()
            pack = {1: x, 2: wt, 3: y}
            t2 = time.perf_counter()
            cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
            g.execute(pack, work, handle=handle)
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t2
            err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
            t3 = time.perf_counter()
            F.conv2d(x, wt, None, s, p, d, c)
            torch.cuda.synchronize()
            torch_first = time.perf_counter() - t3

            def fe(g=g, pack=pack):
                cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
                g.execute(pack, work, handle=handle)
            fe_us = replay_us(fe)
            torch_us = replay_us(lambda x=x, wt=wt, s=s, p=p, d=d, c=c: F.conv2d(x, wt, None, s, p, d, c))
            n_ok += 1
            for key, v in zip(totals, (plan_s, first_s, torch_first, fe_us, torch_us)):
                totals[key] += v
            print(f"{what}\tplan {1e3 * plan_s:.1f} ms\tfirst {1e3 * first_s:.1f} ms\ttorch first "
                  f"{1e3 * torch_first:.1f} ms\tfe {fe_us:.2f} us\ttorch {torch_us:.2f} us\terr {err:.1e}\tws {ws}",
                  flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe: say what failed where, go on
            print(f"{what}\tFAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    print(f"{a.phase} {a.model} {a.precision}: {n_ok} shapes ok; " +
          "; ".join(f"{k} {v:.3f}" for k, v in totals.items()))


if __name__ == "__main__":
    main()
