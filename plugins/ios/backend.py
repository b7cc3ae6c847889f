"""The ios backend: search (or load) a schedule, then run it with the stream runtime."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from harness.backend import Backend, BackendError, Prepared, slug, store_dir
from ios_core.cost import AnalyticCostModel, CalibratedCostModel, CostCache, MeasuredCostModel, bounds
from ios_core.interpreters.reference import seeded_input
from ios_core.ir import Graph
from ios_core.runtime import RUNTIMES, ScheduledModel, StageTimer, TorchTarget
from ios_core.schedule import Schedule, ScheduleError, greedy, optimize, sequential

from .config import IosConfig, check

LABELS = {"sequential": "Sequential", "greedy": "Greedy", "ios-merge": "IOS-Merge", "ios-parallel": "IOS-Parallel",
          "ios-both": "IOS-Both"}


class IosBackend(Backend):
    name = "ios"
    display_name = "IOS"
    config_class = IosConfig
    devices = ("cpu", "cuda")
    requires = ("torch",)
    extra = ""

    @classmethod
    def check_config(cls, cfg) -> None:
        check(cfg)

    def label(self) -> str:
        if self.cfg["schedule_file"]:
            return "IOS-File"
        base = LABELS[str(self.cfg["schedule"])]
        return base + ("-faithful" if self.cfg["runtime"] == "ios-faithful" else "")

    @property
    def store(self) -> Path:
        return store_dir(str(self.cfg["store"]))

    def cost_model(self, target: TorchTarget, batch: int, precision: str, device_name: str):
        cfg = self.cfg
        kind = str(cfg["cost_model"])
        analytic = AnalyticCostModel(batch, "gpu" if target.device.type == "cuda" else "cpu",
                                     itemsize=2 if precision in ("fp16", "bf16") else 4)
        if kind == "analytic":
            return analytic, None
        mode, captured = RUNTIMES[str(cfg["runtime"])]
        timer = StageTimer(target, batch, mode, captured, int(cfg["warmup"]), int(cfg["number"]), int(cfg["repeat"]),
                           bool(cfg["fuse"]))
        import torch

        context = (device_name, torch.__version__, torch.backends.cudnn.version(), batch, precision, cfg["runtime"],
                   bool(cfg["channels_last"]), bool(cfg["fuse"]), int(cfg["number"]))
        cache = CostCache(self.store / "cache" / f"stage_costs-{slug(device_name)}.json")
        measured = MeasuredCostModel(timer, cache, context)
        if kind == "calibrated":
            return CalibratedCostModel(measured, analytic), measured
        return measured, measured

    def schedule_path(self, graph: Graph, device_name: str, batch: int, precision: str) -> Path:
        c = self.cfg
        algo = str(c["schedule"])
        extra = "" if algo in ("sequential", "greedy") else f"-r{c['r']}-s{c['s']}-{c['ending']}-{c['cost_model']}"
        return (self.store / "schedules" / f"{graph.name}-{graph.hash()}" /
                f"{slug(device_name)}-bs{batch}-{precision}-{algo}{extra}.json")

    def prepare(self, graph: Graph, batch: int, device: str, precision: str) -> Prepared:
        cfg = self.cfg
        target = TorchTarget(device, precision, bool(cfg["channels_last"]))
        device_name = target.device_name()
        metrics: dict[str, float] = {}
        cost, measured = None, None
        t = time.perf_counter()
        if cfg["schedule_file"]:
            try:
                sched = Schedule.load(cfg["schedule_file"])
                sched.check(graph)
            except ScheduleError as exc:
                raise BackendError(f"backend.schedule_file: {exc}") from None
        else:
            algo = str(cfg["schedule"])
            if algo == "sequential":
                sched = sequential(graph)
            elif algo == "greedy":
                sched = greedy(graph, int(cfg["greedy_streams"]))
            else:
                cost, measured = self.cost_model(target, batch, precision, device_name)
                try:
                    sched = optimize(graph, cost, algo, int(cfg["r"]), int(cfg["s"]), int(cfg["part_size"]),
                                     str(cfg["ending"]), bool(cfg["progress"]), batch, device_name, precision)
                finally:
                    if measured is not None:
                        measured.close()
                metrics.update({f"search_{k}": float(v) for k, v in sched.stats.items()
                                if isinstance(v, (int, float)) and k != "predicted_ms"})
                metrics["predicted_ms"] = float(sched.stats["predicted_ms"])
            sched.batch, sched.device, sched.precision = batch, device_name, precision
        metrics["search_cost_s"] = time.perf_counter() - t
        path = self.schedule_path(graph, device_name, batch, precision)
        sched.to_json(path)
        if cfg["bounds"]:  # under the configured cost model, so comparable with predicted_ms
            if cost is None:
                cost, measured = self.cost_model(target, batch, precision, device_name)
            metrics.update(bounds(graph, cost))
            if measured is not None:
                measured.close()
        model = ScheduledModel(graph, sched, device, precision, str(cfg["runtime"]), bool(cfg["channels_last"]),
                               bool(cfg["fuse"]))
        infer, load = model.prepare(batch)
        metrics.update(num_stages=float(sched.num_stages()), max_groups=float(sched.max_groups()))
        artifacts = {"schedule.json": sched.to_json()}
        if cfg["profile"]:
            from ios_core.runtime.profile import profile, profile_json, timeline_svg

            per_stage, spans = profile(model, seeded_input(graph, batch, 0))
            artifacts["stage_latencies.json"] = profile_json(per_stage, spans)
            svg = timeline_svg(spans, f"{graph.name} {self.label()} bs{batch} {precision}")
            if svg:
                artifacts["timeline.svg"] = svg
            metrics["profiled_stage_sum_ms"] = float(np.sum(per_stage))
        return Prepared(infer=infer, load_input=load, to_numpy=target.to_numpy, synchronize=target.synchronize,
                        cuda_stream=target.stream, device_name=device_name, display_name=self.label(),
                        artifacts=artifacts, metrics=metrics,
                        params={"schedule_path": str(path), "runtime_mode": model.mode, "captured": model.captured})
