"""A plan as a folder a service loads at start-up: the graph with its weights, the schedule with the passes,
layout and kernel choices it was made with, the options the model runs under, and what it was made for (GPU,
batch size, precision, library versions). Loading it searches nothing and times nothing: the schedule is run as
a given file (:attr:`PlanOptions.schedule_file`). A plan made for another GPU, batch size, precision or library
version is refused in one line, since its kernel choices and schedule were timed there.

    plan = Planner(PlanOptions(), store).plan(work, "cuda")
    save_plan(plan, work, PlanOptions(), "inception.plan")
    ready = load_plan("inception.plan", "cuda")            # in another process
    y = ready.infer(ready.load_input(x))
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .ir import Graph, GraphError
from .options import PlanOptions
from .planner import Plan, PlanError, Planner, library_versions
from .runtime.target import TorchTarget
from .workload import Workload

FORMAT = "ios-plan-1"
#: options a plan is run with on loading as given (the rest: how a search or the store works, not the model)
RUN_OPTIONS = ("runtime", "streams", "fuse", "kernels", "triton_convs", "triton_depthwise", "depthwise_cudnn",
               "depthwise_start_margin", "cudnn_search", "compile_threads")


class SavedPlanError(PlanError):
    """A saved plan that cannot be loaded here: not one, damaged, or made for another GPU, batch size,
    precision or library version."""


@dataclasses.dataclass(frozen=True)
class MadeFor:
    """What a plan's timings hold for: its schedule and kernel choices were measured there."""

    device: str  # the device's own name (``NVIDIA H200``) or ``cpu``
    batch: int
    precision: str
    libraries: str  # :func:`ios_core.planner.library_versions`

    def mismatch(self, other: MadeFor) -> str | None:
        """How ``other`` (here) differs from what the plan was made for, or None."""
        for name in ("device", "batch", "precision", "libraries"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                return f"it was made for {name} {mine!r}, this is {theirs!r}"
        return None


def save_plan(plan: Plan, work: Workload, options: PlanOptions, path: str | Path) -> Path:
    """Write ``plan`` (made by :meth:`Planner.plan` for ``work`` under ``options``) to the folder ``path``:
    plan.json (what it is for, the options, the graph), schedule.json and weights.npz. ``work.graph`` is the graph
    before the passes: loading applies the schedule's passes again, as a schedule file is run."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    # the device's own name, as load_plan reads it there (a workload's device_name may be a caller's label)
    made = MadeFor(plan.target.device_name(), work.batch, work.precision, library_versions())
    run = {k: getattr(options, k) for k in RUN_OPTIONS}
    data = {"format": FORMAT, "made_for": dataclasses.asdict(made), "options": run, "graph": work.graph.to_dict()}
    plan.schedule.to_json(folder / "schedule.json")  # with the passes, layout and kernels it runs with
    work.graph.save_weights(folder / "weights.npz")
    (folder / "plan.json").write_text(json.dumps(data, indent=1))
    return folder


def load_plan(path: str | Path, device: str = "cuda", batch: int | None = None, precision: str | None = None
              ) -> Plan:
    """The plan saved in the folder ``path``, its model prepared on ``device`` ("cuda", "cpu") with nothing
    searched or timed; :class:`SavedPlanError` where it cannot be used here, or at the ``batch`` size and
    ``precision`` asked (None: the plan's own)."""
    folder = Path(path)
    data = _read(folder)
    try:
        made = MadeFor(**data["made_for"])
        graph = Graph.from_dict(data["graph"])
        graph.load_weights(folder / "weights.npz")
    except (KeyError, TypeError, ValueError, OSError, GraphError) as exc:
        raise SavedPlanError(f"{folder}: a damaged saved plan ({type(exc).__name__}: {exc})") from None
    here = MadeFor(TorchTarget(device, made.precision).device_name(), made.batch if batch is None else batch,
                   precision or made.precision, library_versions())
    wrong = made.mismatch(here)
    if wrong:
        raise SavedPlanError(f"{folder}: {wrong}; plan it again here (its kernels and schedule were timed there)")
    # run as a given schedule file: nothing searched, never saved over (the folder may be read-only); a plan made
    # with cudnn_search=benchmark lets cuDNN time its plans on their first calls, as it did when it was made
    try:
        options = PlanOptions(**data["options"], schedule_file=str(folder / "schedule.json"), progress=False)
    except TypeError as exc:  # an option this version does not have: saved by another one
        raise SavedPlanError(f"{folder}: a saved plan with options this ios_core does not know ({exc})") from None
    options.check()
    return Planner(options).plan(Workload(graph, made.batch, made.precision, made.device), device)


def _read(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "plan.json").read_text())
    except FileNotFoundError:
        raise SavedPlanError(f"{folder}: no saved plan there (no plan.json)") from None
    except (OSError, ValueError) as exc:
        raise SavedPlanError(f"{folder}: a damaged saved plan ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise SavedPlanError(f"{folder}: not a saved plan (format {found!r}, expected {FORMAT!r})")
    return data
