"""The ios backend: search (or load) a schedule, then run it with the stream runtime."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from harness.backend import Backend, BackendError, Prepared, slug, store_dir
from harness.leases import exclusive
from ios_core.cost import AnalyticCostModel, CalibratedCostModel, CostCache, MeasuredCostModel, bounds
from ios_core.inputs import seeded_input
from ios_core.ir import Graph
from ios_core.passes import apply_passes
from ios_core.runtime import RUNTIMES, ScheduledModel, StageTimer, TorchTarget
from ios_core.runtime.insitu import PartTimer
from ios_core.runtime.kernels import KernelTable
from ios_core.runtime.layout import time_layouts
from ios_core.runtime.target import faster_layout, layout_name, parse_channels_last
from ios_core.runtime.timer import TimingConfig, kernel_timer
from ios_core.schedule import Schedule, ScheduleError, greedy, native, optimize, sequential
from ios_core.workload import Workload

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

    def label(self) -> str:
        if self.cfg.schedule_file:
            return "IOS-File"
        base = LABELS[self.cfg.schedule]
        opt = self.cfg.opt_batch
        return base + ("-faithful" if self.cfg.runtime == "ios-faithful" else "") + (f"-opt{opt}" if opt else "")

    @property
    def store(self) -> Path:
        return store_dir(self.cfg.store)

    def kernel_table(self, target: TorchTarget, choices: dict[str, str] | None = None) -> KernelTable:
        """One table per run: the search's stage timings, the in-situ choice and the final model
        use the same kernel for the same convolution."""
        if self._kernels is None:
            timer = kernel_timer(target, guard=exclusive) if target.device.type == "cuda" else None
            self._kernels = KernelTable(self.cfg.kernels, timer, choices)
        return self._kernels

    _kernels: KernelTable | None = None

    def cost_model(self, target: TorchTarget, work: Workload):
        """(the DP's cost model, the screening model or None, the measured model to close or None).

        ``auto``: on CUDA, each part is screened with the calibrated model and solved with
        the measured one where that times at most ``screen_limit`` stages; on the CPU the
        analytic model ranks (timing thousands of stages there takes minutes) and the
        in-situ selection decides."""
        cfg = self.cfg
        batch, precision, device_name = work.batch, work.precision, work.device_name
        kind = cfg.cost_model
        cuda = target.device.type == "cuda"
        analytic = AnalyticCostModel(batch, "gpu" if cuda else "cpu",
                                     itemsize=2 if precision in ("fp16", "bf16") else 4)
        if kind == "analytic" or (kind == "auto" and not cuda):
            return analytic, None, None
        mode, captured = RUNTIMES[cfg.runtime]
        timer = StageTimer(target, batch, mode, captured, cfg.warmup, cfg.number, cfg.repeat,
                           cfg.fuse, cfg.cold, guard=exclusive, kernels=self.kernel_table(target))
        import torch

        context = ("v3", device_name, torch.__version__, torch.backends.cudnn.version(), batch, precision,
                   cfg.runtime, target.channels_last, cfg.fuse, cfg.number,
                   cfg.repeat, cfg.cold, cfg.kernels, *sorted(cfg.passes))
        cache = CostCache(self.store / "cache" / f"stage_costs-{slug(device_name)}.json")
        measured = MeasuredCostModel(timer, cache, context)
        calibrated = CalibratedCostModel(measured, analytic)
        if kind == "calibrated":
            return calibrated, None, measured
        if kind == "auto":
            return measured, calibrated, measured
        return measured, None, measured

    def _digest(self, keys: tuple[str, ...], **more) -> str:
        settings = json.dumps({**{k: getattr(self.cfg, k) for k in keys}, **more}, sort_keys=True, default=str)
        return hashlib.sha1(settings.encode()).hexdigest()[:10]

    def _stem(self, work: Workload) -> Path:
        return (self.store / "schedules" / f"{work.graph.name}-{work.graph.hash()}" /
                f"{slug(work.device_name)}-bs{work.batch}-{work.precision}")

    def schedule_path(self, work: Workload, channels_last: bool | None = None) -> Path:
        c = self.cfg
        algo = c.schedule
        # every setting that can change the searched schedule is in the name (a short hash),
        # so changing one of them searches again instead of reusing another setting's answer
        keys = ("r", "s", "part_size", "ending", "cost_model", "keep", "select", "prune", "runtime", "streams",
                "greedy_streams", "screen_limit", "cold", "number", "repeat", "warmup", "fuse", "kernels", "passes")
        layout = parse_channels_last(c.channels_last) if channels_last is None else channels_last
        digest = self._digest(keys, channels_last=bool(layout))
        extra = "" if algo in ("sequential", "greedy") else f"-r{c.r}-s{c.s}-k{c.keep}-{digest}"
        return self._stem(work).with_name(self._stem(work).name + f"-{algo}{extra}.json")

    def choose_layout(self, work: Workload, device: str, metrics: dict[str, float]) -> tuple[bool, str]:
        """(channels_last, how it was chosen): forced by the option, NCHW on the CPU, or on
        CUDA the faster of both layouts under Greedy (saved beside the schedules, so a later
        run of the same workload and settings reuses the choice without timing)."""
        cfg = self.cfg
        forced = parse_channels_last(cfg.channels_last)
        if forced is not None:
            return forced, "forced"
        if device != "cuda":
            return False, "default"
        digest = self._digest(("runtime", "streams", "greedy_streams", "fuse", "kernels", "passes"))
        path = self._stem(work).with_name(self._stem(work).name + f"-layout-{digest}.json")
        if path.is_file() and not cfg.research:
            try:
                saved = json.loads(path.read_text())
                times = {k: float(saved["ms"][k]) for k in ("nchw", "nhwc")}
                metrics.update({f"layout_{k}_ms": v for k, v in times.items()})
                return bool(saved["channels_last"]), "reused"
            except (ValueError, KeyError, TypeError):
                pass  # a damaged choice file is timed again
        mode, captured = RUNTIMES[cfg.runtime]
        timing = TimingConfig(cfg.warmup + 1, cfg.number, cfg.repeat + 2, cold=False, guard=exclusive)
        times = time_layouts(work.graph, work.batch, device, work.precision, mode=mode, captured=captured,
                             fuse=cfg.fuse, follow_chains=cfg.streams == "chains", greedy_streams=cfg.greedy_streams,
                             kernels=self.kernel_table, timing=timing)
        metrics.update({f"layout_{k}_ms": v for k, v in times.items()})
        channels_last = faster_layout(times) == "nhwc"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"channels_last": channels_last, "ms": times}, indent=1))
        return channels_last, "measured"

    def search(self, target: TorchTarget, work: Workload, metrics: dict[str, float]) -> Schedule:
        """The DP, then the in-situ choice among each part's candidates."""
        cfg = self.cfg
        algo = cfg.schedule
        cost, screen, measured = self.cost_model(target, work)
        measure_part = measure_whole = None
        if cfg.select:
            mode, captured = RUNTIMES[cfg.runtime]
            # candidates are timed like stages, with one more warmup replay and two more replays
            timing = TimingConfig(cfg.warmup + 1, cfg.number, cfg.repeat + 2,
                                  cfg.cold and target.device.type == "cuda", guard=exclusive)
            chains, kernels = cfg.streams == "chains", self.kernel_table(target)
            measure_part = PartTimer(work.graph, target, work.batch, mode, captured, timing, fuse=cfg.fuse,
                                     follow_chains=chains, kernels=kernels)
            # the finalists are timed as the protocol will run the model: replayed back to back
            warm = TimingConfig(timing.warmup, timing.number, timing.repeat, cold=False, guard=exclusive)
            measure_whole = PartTimer(work.graph, target, work.batch, mode, captured, warm, fuse=cfg.fuse,
                                      follow_chains=chains, kernels=kernels)
        try:
            sched = optimize(work, cost, algo, r=cfg.r, s=cfg.s, part_size=cfg.part_size, ending=cfg.ending,
                             progress=cfg.progress, keep=cfg.keep, prune=cfg.prune, measure_part=measure_part,
                             greedy_streams=cfg.greedy_streams, screen=screen,
                             screen_limit=cfg.screen_limit, measure_whole=measure_whole, core=cfg.search_core,
                             workers=cfg.search_workers)
        finally:
            if measured is not None:
                measured.close()
        metrics.update({f"search_{k}": float(v) for k, v in sched.stats.items()
                        if isinstance(v, (int, float)) and k not in ("predicted_ms", "insitu_ms")})
        metrics["predicted_ms"] = float(sched.stats["predicted_ms"])
        if "insitu_ms" in sched.stats:
            metrics["predicted_insitu_ms"] = float(sched.stats["insitu_ms"])
        return sched

    def prepare(self, graph: Graph, batch: int, device: str, precision: str) -> Prepared:
        cfg = self.cfg
        t = time.perf_counter()
        given = self._load(cfg.schedule_file, None, "backend.schedule_file") if cfg.schedule_file else None
        # a given schedule was made for the graph its passes produced: apply those, not today's defaults
        passes = given.options.get("passes", []) if given is not None else cfg.passes
        graph, rewrites = apply_passes(graph, passes)
        metrics: dict[str, float] = {f"pass_{k}": float(v) for k, v in rewrites.items()}
        probe = TorchTarget(device, precision)
        work = Workload(graph, batch, precision, probe.device_name())
        device_name = work.device_name
        searched = work.at_batch(cfg.opt_batch or batch)  # specialization: a schedule made for another batch size
        if given is not None and "channels_last" in given.stats and parse_channels_last(cfg.channels_last) is None:
            channels_last, layout_how = bool(given.stats["channels_last"]), "schedule file"
        else:
            channels_last, layout_how = self.choose_layout(searched, device, metrics)
        target = TorchTarget(device, precision, channels_last)
        kernels = self.kernel_table(target)
        path = self.schedule_path(searched, channels_last)
        foreign = None if given is not None else self.foreign_schedule(path, device_name)  # a given file wins
        if given is not None:
            sched = self._check(given, graph, "backend.schedule_file")
        elif foreign is not None:
            sched = self._load(str(foreign), graph, "backend.schedule_device")
        else:
            sched = self._own_schedule(graph, path, target, searched, metrics)
            sched.batch, sched.device, sched.precision = searched.batch, device_name, precision
        kernels.choices.update({k: v for k, v in sched.stats.get("kernels", {}).items() if k not in kernels.choices})
        if cfg.bounds:  # under the configured cost model, so comparable with predicted_ms
            cost, _, measured = self.cost_model(target, work)
            metrics.update(bounds(graph, cost))
            if measured is not None:
                measured.close()
        model = ScheduledModel(graph, sched, device, precision, cfg.runtime, channels_last,
                               cfg.fuse, follow_chains=cfg.streams == "chains", kernels=kernels)
        infer, load = model.prepare(batch)  # the warm-up calls before capture settle every conv's kernel
        metrics["search_cost_s"] = time.perf_counter() - t
        sched.options["passes"] = list(passes)
        sched.stats.update(channels_last=channels_last, kernels=dict(sorted(kernels.choices.items())))
        if cfg.schedule_file or foreign is not None:
            path = foreign or Path(cfg.schedule_file)  # run as given, never saved
        else:
            sched.to_json(path)
        metrics.update(num_stages=float(sched.num_stages()), max_groups=float(sched.max_groups()), **kernels.counts())
        artifacts = self._artifacts(sched, kernels, model, graph, batch, precision, metrics)
        return Prepared(infer=infer, load_input=load, to_numpy=target.to_numpy, synchronize=target.synchronize,
                        cuda_stream=target.stream, device_name=device_name, display_name=self.label(),
                        artifacts=artifacts, metrics=metrics,
                        # a saved schedule: its search cost was paid before
                        notes=["schedule reused (backend.research=true searches again)"]
                        if metrics.get("search_reused") == 1.0 else [],
                        params={"schedule_path": str(path), "schedule_made_on": sched.device or device_name,
                                "schedule_batch": sched.batch or searched.batch, "runtime_mode": model.mode,
                                "captured": model.captured, "layout": layout_name(channels_last),
                                "layout_chosen_by": layout_how, "passes": ",".join(passes) or "none",
                                "ios_final": sched.stats.get("selection", {}).get("final", "")})

    def _own_schedule(self, graph: Graph, path: Path, target: TorchTarget, searched: Workload,
                      metrics: dict[str, float]) -> Schedule:
        """The schedule ``backend.schedule`` asks for: a baseline, the one this search saved before
        (unless ``backend.research``), or a new search."""
        cfg = self.cfg
        if cfg.schedule == "sequential":
            return sequential(graph)
        if cfg.schedule == "greedy":
            return greedy(graph, cfg.greedy_streams)
        if path.is_file() and not cfg.research:
            sched = self._load(str(path), graph, "saved schedule (set backend.research=true to search again)")
            metrics["search_reused"] = 1.0
            for k in ("predicted_ms", "insitu_ms"):
                if k in sched.stats:
                    metrics["predicted_insitu_ms" if k == "insitu_ms" else k] = float(sched.stats[k])
            return sched
        sched = self.search(target, searched, metrics)
        metrics["search_reused"] = 0.0
        return sched

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
