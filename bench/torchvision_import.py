"""Which torchvision classifiers ios_core's IR imports (issue 38: "any torchvision classification model exported
by torch.onnx imports"), on the CPU:

    python bench/torchvision_import.py                 # every classifier at its weights' size
    python bench/torchvision_import.py --size 64 vit_b_16 alexnet
    python bench/torchvision_import.py --check maxvit_t      # and the IR against the module, in float64

Each is built as ``model=torchvision`` builds it (random init), exported as the harness exports it (torch.onnx,
MultiheadAttention batch-first) and imported; one line per model (OK with its operator count, or the first
error), then the counts. ``--check`` builds each as a run does (``model=torchvision``, BatchNorm calibrated) and
also compares the IR's float64 reference with the module's on one seeded input (the suite's tests do that for the
models they name; the largest are too slow for it)."""

from __future__ import annotations

import argparse
import sys
import time


def checked(arch: str, size: int) -> str:
    """Import ``arch`` as a run builds it and compare the IR's float64 reference with the module's."""
    import numpy as np

    from harness.config import ModelConfig
    from harness.models.model import Model
    from harness.models.source import resolve
    from ios_core.interpreters.reference import reference_forward

    model = Model(resolve(ModelConfig(name="torchvision", arch=arch, image_size=size)), 1)
    graph = model.graph()
    x = np.random.default_rng(0).standard_normal((1, *model.input_shape))
    want = model.reference(x)
    err = float(np.abs(reference_forward(graph, x).reshape(want.shape) - want).max() / np.abs(want).max())
    return f"{sum(1 for _ in graph.nodes())} operators, float64 rel. error {err:.1e}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=0, help="input size (0: each model's own)")
    ap.add_argument("--check", action="store_true", help="compare the IR with the module in float64")
    ap.add_argument("archs", nargs="*", help="torchvision names (default: every classifier)")
    args = ap.parse_args(argv)
    import torch

    from harness.models import zoos
    from harness.models.onnx_io import export_module
    from ios_core.onnx import import_onnx

    tv = zoos.import_zoo("torchvision")
    archs = args.archs or tv.models.list_models(module=tv.models)
    failed = 0
    for arch in archs:
        t = time.perf_counter()
        try:
            if args.check:
                print(f"{arch}\tOK\t{checked(arch, args.size)}\t{time.perf_counter() - t:.0f} s", flush=True)
                continue
            net, shape = zoos.build("torchvision", arch, args.size, 0)
            graph = import_onnx(export_module(net.eval(), torch.zeros(1, *shape)), name=arch)
            print(f"{arch}\tOK\t{sum(1 for _ in graph.nodes())} operators\t{time.perf_counter() - t:.0f} s", flush=True)
        except Exception as exc:  # noqa: BLE001 - each model's first error, in one line
            failed += 1
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(f"{arch}\tFAIL\t{type(exc).__name__}: {line[:300]}\t{time.perf_counter() - t:.0f} s", flush=True)
    print(f"{len(archs) - failed} of {len(archs)} import")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
