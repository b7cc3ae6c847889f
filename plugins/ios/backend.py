"""The ios backend: search (or load) a schedule, then run it with the stream runtime."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from harness.backend import Backend, BackendError, Model, Prepared, store_dir
from harness.machine.leases import exclusive
from ios_core.inputs import seeded_input
from ios_core.ir import Graph
from ios_core.passes import apply_passes
from ios_core.planner import Planner
from ios_core.runtime import ScheduledModel, TorchTarget
from ios_core.runtime.kernels import KernelTable
from ios_core.runtime.target import layout_name, parse_channels_last
from ios_core.schedule import Schedule, ScheduleError, native
from ios_core.workload import Workload, slug

from .config import IosConfig

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
    metric_groups = {"schedule": ("search_", "critical_path", "sum_of_ops", "num_stages", "max_groups",
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
        store; its timings hold the load-aware launcher's device lease."""
        if self._planner is None:
            self._planner = Planner(self.cfg, self.store, guard=exclusive)
        return self._planner

    _planner: Planner | None = None

    def prepare(self, model: Model, batch: int, device: str, precision: str) -> Prepared:
        graph = model.graph()  # the IR: this backend converts it node by node
        cfg = self.cfg
        t = time.perf_counter()
        given = self._load(cfg.schedule_file, None, "backend.schedule_file") if cfg.schedule_file else None
        # a given schedule was made for the graph its passes produced: apply those, not today's defaults
        passes = given.options.get("passes", []) if given is not None else cfg.passes
        graph, rewrites = apply_passes(graph, passes)
        metrics: dict[str, float] = {f"pass_{k}": float(v) for k, v in rewrites.items()}
        planner = self.planner()
        work = Workload(graph, batch, precision, TorchTarget(device, precision).device_name())
        searched = work.at_batch(cfg.opt_batch or batch)  # specialization: a schedule made for another batch size
        if given is not None and "channels_last" in given.stats and parse_channels_last(cfg.channels_last) is None:
            channels_last, layout_how = bool(given.stats["channels_last"]), "schedule file"
        else:
            channels_last, layout_how, times = planner.layout(searched, device)
            metrics.update({f"layout_{k}_ms": v for k, v in times.items()})
        target = TorchTarget(device, precision, channels_last)
        kernels = planner.kernel_table(target)
        path = planner.schedule_path(searched, channels_last)
        assert path is not None  # the plugin's planner always has a store
        foreign = None if given is not None else self.foreign_schedule(path, work.device_name)  # a given file wins
        if given is not None:
            sched = self._check(given, graph, "backend.schedule_file")
        elif foreign is not None:
            sched = self._load(str(foreign), graph, "backend.schedule_device")
        else:
            try:
                sched, found = planner.plan(target, searched)
            except ScheduleError as exc:
                raise BackendError(f"saved schedule (set backend.research=true to search again): {exc}") from None
            metrics.update(found)
        kernels.choices.update({k: v for k, v in sched.stats.get("kernels", {}).items() if k not in kernels.choices})
        if cfg.bounds:  # under the configured cost model, so comparable with predicted_ms
            metrics.update(planner.bounds(target, work))
        scheduled = ScheduledModel(graph, sched, device, precision, cfg.runtime, channels_last,
                                   cfg.fuse, follow_chains=cfg.streams == "chains", kernels=kernels)
        infer, load = scheduled.prepare(batch)  # the warm-up calls before capture settle every conv's kernel
        metrics["search_cost_s"] = time.perf_counter() - t
        if cfg.schedule_file or foreign is not None:
            planner.annotate(sched, channels_last, passes)
            path = foreign or Path(cfg.schedule_file)  # run as given, never saved
        else:
            planner.save(sched, searched, channels_last)  # annotated, at `path`, where plan() looks next time
        metrics.update(num_stages=float(sched.num_stages()), max_groups=float(sched.max_groups()), **kernels.counts())
        artifacts = self._artifacts(sched, kernels, scheduled, graph, batch, precision, metrics)
        return Prepared(infer=infer, load_input=load, to_numpy=target.to_numpy, synchronize=target.synchronize,
                        cuda_stream=target.stream, device_name=work.device_name, display_name=self.label(),
                        artifacts=artifacts, metrics=metrics,
                        # a saved schedule: its search cost was paid before
                        notes=["schedule reused (backend.research=true searches again)"]
                        if metrics.get("search_reused") == 1.0 else [],
                        params={"schedule_path": str(path), "schedule_made_on": sched.device or work.device_name,
                                "schedule_batch": sched.batch or searched.batch, "runtime_mode": scheduled.mode,
                                "captured": scheduled.captured, "layout": layout_name(channels_last),
                                "layout_chosen_by": layout_how, "passes": ",".join(passes) or "none",
                                "ios_final": sched.stats.get("selection", {}).get("final", "")})

    def _artifacts(self, sched: Schedule, kernels: KernelTable, model: ScheduledModel, graph: Graph, batch: int,
                   precision: str, metrics: dict[str, float]) -> dict[str, str]:
        """The schedule, its selection and kernel choices, and with ``backend.profile`` the stage timeline."""
        artifacts = {"schedule.json": sched.to_json()}
        if "parts" in sched.stats.get("selection", {}):
            artifacts["selection.json"] = json.dumps(sched.stats["selection"], indent=1)
        if kernels.timings or kernels.failed:
            artifacts["kernel_choice.json"] = json.dumps({"ms": kernels.timings, "failed": kernels.failed}, indent=1)
        metrics["kernel_failed"] = float(len(kernels.failed))
        if self.cfg.profile:
            from ios_core.runtime.profile import profile, profile_json, timeline_svg

            per_stage, spans = profile(model, seeded_input(graph, batch, 0))
            artifacts["stage_latencies.json"] = profile_json(per_stage, spans)
            svg = timeline_svg(spans, f"{graph.name} {self.label()} bs{batch} {precision}")
            if svg:
                artifacts["timeline.svg"] = svg
            metrics["profiled_stage_sum_ms"] = float(np.sum(per_stage))
        return artifacts

    def foreign_schedule(self, path: Path, device_name: str) -> Path | None:
        """The schedule saved by the same search on the GPU ``backend.schedule_device`` names
        (device specialization: made on one GPU kind, run on another); None for this GPU's own.
        Its file differs from ``path`` only in the device part of the name."""
        wanted = slug(self.cfg.schedule_device) if self.cfg.schedule_device else ""
        here = slug(device_name)
        if not wanted or here.startswith(wanted):
            return None
        rest = path.name[len(here):]
        saved = sorted(p for p in path.parent.glob(f"*{rest}") if p.name != path.name)
        found = [p for p in saved if p.name.startswith(wanted)]
        if len(found) == 1:
            return found[0]
        others = ", ".join(p.name[:-len(rest)] for p in saved) or "none"
        if found:
            raise BackendError(f"backend.schedule_device={self.cfg.schedule_device!r} matches several GPUs ({others}): "
                               "give more of the name")
        raise BackendError(f"backend.schedule_device={self.cfg.schedule_device!r}: no schedule of this search saved "
                           f"by that GPU under {path.parent} (GPUs with one: {others}); run the same search there and "
                           "copy its store's schedules/ folder here")

    @classmethod
    def _load(cls, path: str, graph: Graph | None, what: str) -> Schedule:
        try:
            sched = Schedule.load(path)
        except ScheduleError as exc:
            raise BackendError(f"{what}: {exc}") from None
        return sched if graph is None else cls._check(sched, graph, what)

    @staticmethod
    def _check(sched: Schedule, graph: Graph, what: str) -> Schedule:
        try:
            sched.check(graph)
        except ScheduleError as exc:
            raise BackendError(f"{what}: {exc}") from None
        return sched
