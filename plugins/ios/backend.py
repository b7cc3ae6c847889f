"""The ios backend: an adapter from the harness's contract to ios_core's planner, whose one call
(:meth:`~ios_core.planner.Planner.plan`) applies the passes, chooses the layout, finds the schedule
(given, another GPU's, saved or searched) and prepares the model on the stream runtime."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.backend import Backend, BackendError, Model, Prepared, inductor_cache, store_dir
from harness.machine.leases import cpu_threads, exclusive
from ios_core.inputs import seeded_input
from ios_core.runtime.target import layout_name
from ios_core.schedule import native
from ios_core.workload import Workload

from .config import IosConfig

if TYPE_CHECKING:  # the planner and the runtime import torch: only when a run prepares (--help stays light)
    from ios_core.planner import Plan, Planner

LABELS = {"sequential": "Sequential", "greedy": "Greedy", "ios-merge": "IOS-Merge", "ios-parallel": "IOS-Parallel",
          "ios-both": "IOS-Both"}


class IosBackend(Backend[IosConfig]):
    name = "ios"
    runs = f"IOS: the searched schedule (or Sequential, Greedy) on CUDA streams; search core: {native.core_name()}"
    display_name = "IOS"
    config_class = IosConfig
    devices = ("cpu", "cuda")
    requires = ("torch",)
    extra = ""
    gpu_run = "H100 80GB HBM3, 2026-11-25"
    label_options = ("schedule",)
    metric_groups = {"schedule": ("search_", "plan_", "critical_path", "sum_of_ops", "num_stages", "max_groups",
                                  "profiled_stage")}
    shows_progress = True  # the search's own progress lines

    @classmethod
    def label_of(cls, cfg: IosConfig) -> str:
        if cfg.schedule_file:
            return "IOS-File"
        faithful = "-faithful" if cfg.runtime == "ios-faithful" else ""
        return LABELS[cfg.schedule] + faithful + (f"-opt{cfg.opt_batch}" if cfg.opt_batch else "")

    @property
    def store(self) -> Path:
        return store_dir(self.cfg.store)

    def planner(self) -> Planner:
        """ios_core's planner under this config (an IosConfig is a PlanOptions), saving under the
        store; its timings hold the load-aware launcher's device lease, its compiles the job's CPU threads."""
        from ios_core.planner import Planner

        if self._planner is None:  # Triton compiles on this job's CPU share under the load-aware launcher
            options = replace(self.cfg, compile_threads=self.cfg.compile_threads or cpu_threads())
            self._planner = Planner(options, self.store, guard=exclusive)
        return self._planner

    _planner: Planner | None = None

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        from ios_core.planner import PlanError
        from ios_core.runtime import TorchTarget

        graph = model.graph()  # the IR: ios_core's planner and runtime take it node by node
        work = Workload(graph, batch, precision, TorchTarget(device, precision).device_name())
        inductor_cache(self.store)  # the Triton pools and fused kernels it compiles: reused by later runs
        t = time.perf_counter()
        try:
            plan = self.planner().plan(work, device)
        except PlanError as exc:
            raise BackendError(exc.named("backend.")) from None
        metrics = {**plan.metrics, "search_cost_s": time.perf_counter() - t}
        sched = plan.schedule
        artifacts = self._artifacts(plan, batch, precision, metrics)
        return Prepared(infer=plan.infer, load_input=plan.load_input, to_numpy=plan.target.to_numpy,
                        synchronize=plan.target.synchronize, cuda_stream=plan.target.stream,
                        device_name=work.device_name, display_name=self.label(), artifacts=artifacts, metrics=metrics,
                        # a saved schedule: its search cost was paid before
                        notes=[_reuse_note(sched.batch, batch, self.cfg.opt_batch)] if plan.source == "saved" else [],
                        params={"schedule_path": str(plan.path), "schedule_source": plan.source,
                                "schedule_made_on": sched.device or work.device_name,
                                "schedule_batch": sched.batch or (self.cfg.opt_batch or batch),
                                "runtime_mode": plan.model.mode, "captured": plan.model.captured,
                                "layout": layout_name(plan.channels_last), "layout_chosen_by": plan.layout_how,
                                "passes": ",".join(plan.passes) or "none",
                                "ios_final": sched.stats.get("selection", {}).get("final", "")})

    def _artifacts(self, plan: Plan, batch: int, precision: str, metrics: dict[str, float]) -> dict[str, str]:
        """The schedule, its selection and kernel choices, and with ``backend.profile`` the stage timeline."""
        sched, kernels, graph = plan.schedule, plan.kernels, plan.graph
        artifacts = {"schedule.json": sched.to_json()}
        if "parts" in sched.stats.get("selection", {}):
            artifacts["selection.json"] = json.dumps(sched.stats["selection"], indent=1)
        if kernels.timings or kernels.failed:
            artifacts["kernel_choice.json"] = json.dumps({"ms": kernels.timings, "failed": kernels.failed}, indent=1)
        metrics["kernel_failed"] = float(len(kernels.failed))
        if self.cfg.profile:
            from ios_core.runtime.profile import profile, profile_json, timeline_svg

            per_stage, spans = profile(plan.model, seeded_input(graph, batch, 0))
            artifacts["stage_latencies.json"] = profile_json(per_stage, spans)
            svg = timeline_svg(spans, f"{graph.name} {self.label()} bs{batch} {precision}")
            if svg:
                artifacts["timeline.svg"] = svg
            metrics["profiled_stage_sum_ms"] = float(np.sum(per_stage))
        return artifacts


def _reuse_note(made_for: int, batch: int, opt_batch: int) -> str:
    """What a run that reused a saved schedule says about it."""
    if made_for != batch:
        why = "backend.opt_batch" if opt_batch and made_for == opt_batch else "backend.schedule_any_batch"
        return f"schedule reused from batch {made_for} ({why}; backend.research=true searches again)"
    return "schedule reused (backend.research=true searches again)"
