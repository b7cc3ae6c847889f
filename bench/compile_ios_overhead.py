"""Where torch.compile(backend="ios")'s time goes beyond the IOS plan's own: each layer of the call timed alone,
host-synchronous as the harness times (median of N calls, each followed by a device synchronize).

    python bench/compile_ios_overhead.py squeezenet inception_v3 [--device cuda] [--precision fp16]

Layers: the plan (load_input + infer), the runner (+ the output copy), the backend's callable (+ picking the plan),
the compiled module (+ Dynamo's guards and argument handling), the compiled module with guard evaluation
skipped (torch.compiler.set_stance(skip_guard_eval_unsafe=True)), and compiled again without the guards on the
module's attributes and weights (``options={"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}``:
IOS folds the weights into its plan when it compiles, so those guards protect nothing it reads). --no-inline:
Dynamo keeps the weights as the module's attributes instead of lifting them to inputs."""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ios_core.dynamo import RUNNERS, ios
from ios_core.interpreters.torch import to_torch
from ios_core.models import build_model


def timed(fn, sync, n: int) -> float:
    for _ in range(50):
        fn()
    sync()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--store", default="/tmp/compile-ios-store")
    ap.add_argument("--no-inline", action="store_true",
                    help="torch._dynamo.config.inline_inbuilt_nn_modules=False: weights as the module's attributes, "
                         "not graph inputs Dynamo guards one by one")
    args = ap.parse_args()
    if args.no_inline:
        torch._dynamo.config.inline_inbuilt_nn_modules = False
    dtype = {"fp16": torch.float16, "fp32": torch.float32}[args.precision]
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    print("model\tplan_ms\trunner_ms\tbackend_fn_ms\tcompiled_ms\tno_guards_ms\tno_module_guards_ms\targs")
    for name in args.models:
        row, n_inputs = probe(name, args.device, dtype, sync, args.n, args.store)
        print(name, *(f"{v:.4f}" for v in row), n_inputs, sep="\t", flush=True)


def probe(name: str, device: str, dtype: torch.dtype, sync, n: int, store: str) -> tuple[list[float], int]:
    torch._dynamo.reset()
    graph = build_model(name)
    module = to_torch(graph).eval().to(device, dtype)
    x = torch.randn(1, *graph.input_shape, device=device, dtype=dtype)
    seen: dict = {}

    def backend(gm, example_inputs, **kw):
        seen["fn"], seen["args"] = ios(gm, example_inputs, **kw), list(example_inputs)
        return seen["fn"]

    with torch.inference_mode():
        f = torch.compile(module, backend=backend, options={"store": store})
        f(x)
        r = RUNNERS[-1]
        fn, inputs = seen["fn"], seen["args"]
        inputs[fn.watched[0]] = x
        row = [timed(lambda: r.infer(r.load_input(x)), sync, n), timed(lambda: r(x), sync, n),
               timed(lambda: fn(*inputs), sync, n), timed(lambda: f(x), sync, n)]
        with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
            row.append(timed(lambda: f(x), sync, n))
        torch._dynamo.reset()  # else the first entry's guards pass first
        g = torch.compile(module, backend=backend, options={
            "store": store, "guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe})
        g(x)
        row.append(timed(lambda: g(x), sync, n))
    return row, len(inputs)

if __name__ == "__main__":
    main()
