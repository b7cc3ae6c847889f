"""IOS in your own program through torch.compile: a torch module compiled with backend="ios", its output checked
against eager, and the line saying what IOS runs and what fell back.

    python examples/compile.py [--device cuda] [--arch resnet18] [--image-size 224] [--precision fp16]

torchvision's classifiers by name (randomly initialised); on the CPU a small image and the analytic cost model keep it
to seconds, on a GPU IOS times its candidates as the IOS backend does. --store keeps the schedule for the next run."""

from __future__ import annotations

import argparse
import logging
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--store", default="", help="a folder for schedules and kernel choices (empty: none kept)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("torch").setLevel(logging.WARNING)

    from harness.models.zoos import import_torchvision  # torchvision, also beside a torch build it was not made for

    dtype = torch.float16 if args.precision == "fp16" else torch.float32
    model = getattr(import_torchvision().models, args.arch)().eval().to(args.device, dtype)
    x = torch.randn(1, 3, args.image_size, args.image_size, device=args.device, dtype=dtype)
    options: dict = {"store": args.store} if args.store else {}
    if args.device == "cpu":  # nothing to overlap on a CPU worth timing for
        options.update(cost_model="analytic", select=False)

    with torch.inference_mode():
        t = time.perf_counter()
        fast = torch.compile(model, backend="ios", options=options)  # found by name: nothing imported from ios_core
        y = fast(x)  # the first call traces, converts, plans and runs
        print(f"compiled and ran in {time.perf_counter() - t:.1f} s")
        want = model(x)
    err = float((y.float() - want.float()).abs().max() / want.float().abs().max())
    print(f"output {tuple(y.shape)}, relative difference from eager {err:.1e}")


if __name__ == "__main__":
    main()
