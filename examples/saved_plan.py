"""IOS in your own program: plan a network once, save the plan, and load it in a service with nothing searched.

    python examples/saved_plan.py [--device cuda] [--model inception_v3] [--folder plans/] [--load-only]

On the CPU it runs a small squeezenet in seconds; on a GPU give --device cuda and a paper network. --load-only
loads the plan an earlier call saved, as a service's new process does, and times its first inference."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ios_core.inputs import seeded_input
from ios_core.interpreters.reference import reference_forward
from ios_core.models import build_model
from ios_core.planner import Planner, PlanOptions
from ios_core.runtime import TorchTarget
from ios_core.saved_plan import load_plan, save_plan
from ios_core.workload import Workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--image-size", type=int, default=32, help="0: the model's own")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--folder", default="plans")
    ap.add_argument("--load-only", action="store_true", help="load the plan saved by an earlier call, plan nothing")
    args = ap.parse_args()
    graph = build_model(args.model, **({"image_size": args.image_size} if args.image_size else {}))
    target = TorchTarget(args.device, args.precision)
    work = Workload(graph, 1, args.precision, target.device_name())
    options = PlanOptions()  # the IOS backend's options, by the same names
    if args.device == "cpu":  # nothing to overlap on a CPU worth timing for: the analytic cost model, no timing
        options = PlanOptions(cost_model="analytic", select=False)

    folder = Path(args.folder) / f"{args.model}.plan"
    if not args.load_only:
        t = time.perf_counter()  # once, where the model is developed: search, time, choose kernels
        plan = Planner(options, Path(args.folder) / "store").plan(work, args.device)
        save_plan(plan, work, options, folder)
        print(f"planned ({plan.source}) and saved to {folder} in {time.perf_counter() - t:.1f} s")

    t = time.perf_counter()  # in the service: load, nothing searched or timed
    ready = load_plan(folder, args.device)
    x = seeded_input(graph, 1, 0)
    y = ready.target.to_numpy(ready.infer(ready.load_input(x)))
    print(f"loaded ({ready.source}) and ran its first inference in {time.perf_counter() - t:.1f} s")
    err = float(np.abs(y - reference_forward(graph, x)).max() / np.abs(reference_forward(graph, x)).max())
    print(f"output {tuple(y.shape)}, relative error against the float64 reference {err:.1e}")


if __name__ == "__main__":
    main()
