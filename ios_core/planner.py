"""IOS as one call: :func:`plan` (or a :class:`Planner` for several steps) gives the schedule
for a workload on a target, with everything the search policy decides kept here rather than
in a caller: which cost model ranks stages (and which screens them), what their cache is keyed
by, the kernel table shared by every timing, the in-situ choice among the DP's finalists,
Greedy and Sequential, the NCHW/NHWC choice, and where a schedule and a layout choice are saved
so that the same settings reuse them.

    from ios_core.planner import PlanOptions, plan
    sched, metrics = plan(Workload(graph, batch=1, device_name=...), TorchTarget("cuda", "fp32"),
                          PlanOptions(schedule="ios-both"), store=Path("results"))

A caller that shares its device with other work passes ``guard``: a context manager factory
held around every timing (the harness passes its device lease)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from .cost import AnalyticCostModel, CalibratedCostModel, CostCache, MeasuredCostModel, bounds
from .ir import Graph
from .options import COST_MODELS, DEFAULT_PASSES, PlanOptions
from .passes import apply_passes
from .runtime.insitu import PartTimer
from .runtime.kernels import CANDIDATES_VERSION, KernelChoices, KernelPolicy, KernelTable
from .runtime.layout import time_layouts
from .runtime.model import ScheduledModel
from .runtime.modes import RUNTIMES
from .runtime.target import TorchTarget, faster_layout, parse_channels_last, use_cudnn_search
from .runtime.timer import StageTimer, TimingConfig, kernel_timer, release_flush_buffers
from .schedule import Schedule, ScheduleError, greedy, optimize, sequential
from .schedule.options import OptionError
from .workload import Workload, slug

#: the stage-cost cache's version: bump it when what a cached stage time means changes (a change of the kernel
#: candidates a stage is timed with is in its key already: CANDIDATES_VERSION)
COST_CACHE_VERSION = "v4"  # v4: the key from options.DEPENDS_ON (facts first, then the options)

Guard = Callable[[], contextlib.AbstractContextManager[Any]] | None


def library_versions() -> str:
    """What a kernel's speed depends on besides its signature and GPU: PyTorch, cuDNN and Triton."""
    import importlib.metadata

    import torch

    triton = "none"
    for dist in ("triton", "pytorch-triton"):  # PyPI's name, and the nightly builds'
        try:
            triton = importlib.metadata.version(dist)
            break
        except importlib.metadata.PackageNotFoundError:
            pass
    return f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} triton {triton}"


class PlanError(ScheduleError):
    """A schedule the options point at cannot be used; ``option`` names the option ("" for a saved one)."""

    def __init__(self, message: str, option: str = ""):
        super().__init__(message)
        self.option = option

    def named(self, prefix: str) -> str:
        """The message with the option as a caller names it (the harness: ``backend.``)."""
        return f"{prefix}{self}" if self.option else str(self).replace("research=true", f"{prefix}research=true")


#: where a plan's schedule came from
SOURCES = ("baseline", "searched", "saved", "schedule file", "another GPU")


@dataclass
class Plan:
    """Everything :meth:`Planner.plan` decided for one workload, and the model ready to run: the graph the passes
    made, the layout and how it was chosen, the schedule and where it came from (:data:`SOURCES`) and its file,
    each convolution's and fused group's kernel, the captured model's calls, and the metrics of it all."""

    graph: Graph
    schedule: Schedule
    source: str
    path: Path | None
    passes: list[str]
    channels_last: bool
    layout_how: str
    target: TorchTarget
    kernels: KernelTable
    model: ScheduledModel
    infer: Callable[[Any], Any]
    load_input: Callable[[Any], Any]
    metrics: dict[str, float]


class CostModels(NamedTuple):
    rank: Any  # the DP's cost model
    screen: Any  # the model that screens parts first, or None
    measured: MeasuredCostModel | None  # the timing model to close after use, or None


class _Phases:
    """``with phase("search"):`` adds the block's seconds to ``metrics["plan_search_s"]``."""

    def __init__(self, metrics: dict[str, float]):
        self.metrics = metrics

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            key = f"plan_{name}_s"
            self.metrics[key] = self.metrics.get(key, 0.0) + time.perf_counter() - t


class Planner:
    """One workload's planning: the kernel choices (:attr:`learned`) shared by the search's timings, the in-situ
    choice and the final model, each timing through a table under its own :class:`KernelPolicy`; the cost models
    and their cache; saved schedules and layout choices under ``store`` (nothing saved or reused without one)."""

    def __init__(self, options: PlanOptions, store: Path | None = None, guard: Guard = None):
        self.options, self.store, self.guard = options, store, guard
        self.learned = KernelChoices()  # every table's choices and counts, across this planner's plans
        self._remembered: dict[str, tuple[CostCache, str]] = {}  # per GPU: its kept kernel choices, their context

    @property
    def policy(self) -> KernelPolicy:
        """The final model's kernel policy, from the options (the search's: its :meth:`KernelPolicy.for_search`)."""
        o = self.options
        return KernelPolicy(o.kernels, triton_convs=o.triton_convs, triton_depthwise=o.triton_depthwise,
                            depthwise_cudnn=o.depthwise_cudnn, start_margin=o.depthwise_start_margin)

    def kernel_table(self, target: TorchTarget, policy: KernelPolicy | None = None) -> KernelTable:
        """A table timing on ``target`` under ``policy`` (the search's by default) with what this planner's
        tables learned so far; on CUDA with a store, its choices are also kept in the store's
        ``cache/kernel_choices-<gpu>.json`` for every later plan (flushed by :meth:`plan`)."""
        cuda = target.device.type == "cuda"
        timer = kernel_timer(target, guard=self.guard) if cuda else None
        remembered, context = self._kept(target) if cuda and self.store is not None else (None, "")
        return KernelTable(policy or self.policy.for_search(), timer, remembered=remembered, context=context,
                           compile_threads=self.compile_threads, learned=self.learned)

    def _kept(self, target: TorchTarget) -> tuple[CostCache, str]:
        """The store's kernel choices for ``target``'s GPU, and the context they are kept under (what else a
        choice depends on: the library versions, the candidates, the options that change a timing)."""
        gpu = slug(target.device_name())
        if gpu not in self._remembered:
            assert self.store is not None
            cache = CostCache(self.store / "cache" / f"kernel_choices-{gpu}.json", value=str)
            context = self.options.key("kernel_choices", library_versions(), f"candidates {CANDIDATES_VERSION}")
            self._remembered[gpu] = cache, context
        return self._remembered[gpu]

    @property
    def compile_threads(self) -> int:
        """Threads the kernel choice compiles Triton programs on (``compile_threads``, or every usable core)."""
        if self.options.compile_threads:
            return self.options.compile_threads
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    def cost_models(self, target: TorchTarget, work: Workload) -> CostModels:
        """``auto``: on CUDA, each part is screened with the calibrated model and solved with
        the measured one where that times at most ``screen_limit`` stages; on the CPU the
        analytic model ranks (timing thousands of stages there takes minutes) and the in-situ
        selection decides."""
        o = self.options
        cuda = target.device.type == "cuda"
        analytic = AnalyticCostModel(work.batch, "gpu" if cuda else "cpu",
                                     itemsize=2 if work.precision in ("fp16", "bf16") else 4)
        if o.cost_model == "analytic" or (o.cost_model == "auto" and not cuda):
            return CostModels(analytic, None, None)
        mode, captured = RUNTIMES[o.runtime]
        timer = StageTimer(target, work.batch, mode, captured, o.warmup, o.number, o.repeat, o.fuse, o.cold,
                           guard=self.guard, kernels=self.kernel_table(target))
        import torch

        context = (o.key("stage_costs", COST_CACHE_VERSION, CANDIDATES_VERSION, work.device_name, torch.__version__,
                         torch.backends.cudnn.version(), work.batch, work.precision, target.channels_last),)
        path = self.store / "cache" / f"stage_costs-{slug(work.device_name)}.json" if self.store else None
        measured = MeasuredCostModel(timer, CostCache(path), context)
        calibrated = CalibratedCostModel(measured, analytic)
        if o.cost_model == "calibrated":
            return CostModels(calibrated, None, measured)
        if o.cost_model == "auto":
            return CostModels(measured, calibrated, measured)
        return CostModels(measured, None, measured)

    def _timers(self, target: TorchTarget, work: Workload) -> tuple[PartTimer | None, PartTimer | None]:
        """In-situ timers: each part's candidates timed like stages (one more warmup replay, two
        more replays), and the finalists timed as the model will run, replayed back to back."""
        o = self.options
        if not o.select:
            return None, None
        mode, captured = RUNTIMES[o.runtime]
        timing = TimingConfig(o.warmup + 1, o.number, o.repeat + 2, o.cold and target.device.type == "cuda",
                              guard=self.guard)
        chains, kernels = o.streams == "chains", self.kernel_table(target)
        part = PartTimer(work.graph, target, work.batch, mode, captured, timing, fuse=o.fuse,
                         follow_chains=chains, kernels=kernels)
        warm = TimingConfig(timing.warmup, timing.number, timing.repeat, cold=False, guard=self.guard)
        whole = PartTimer(work.graph, target, work.batch, mode, captured, warm, fuse=o.fuse,
                          follow_chains=chains, kernels=kernels)
        return part, whole

    def search(self, target: TorchTarget, work: Workload) -> tuple[Schedule, dict[str, float]]:
        """The DP under the chosen cost models, then the in-situ choice; its statistics as metrics."""
        models = self.cost_models(target, work)
        part, whole = self._timers(target, work)
        try:
            sched = optimize(work, models.rank, self.options, screen=models.screen, measure_part=part,
                             measure_whole=whole)
        finally:
            if models.measured is not None:
                models.measured.close()
        metrics = {f"search_{k}": float(v) for k, v in sched.stats.items()
                   if isinstance(v, (int, float)) and k not in ("predicted_ms", "insitu_ms")}
        metrics["predicted_ms"] = float(sched.stats["predicted_ms"])
        if "insitu_ms" in sched.stats:
            metrics["predicted_insitu_ms"] = float(sched.stats["insitu_ms"])
        return sched, metrics

    def _stem(self, work: Workload, batch: int | str | None = None) -> Path | None:
        """Where this workload's files are saved, less their suffix (``batch``: another one's, or a glob)."""
        if self.store is None:
            return None
        return (self.store / "schedules" / f"{work.graph.name}-{work.graph.hash()}" /
                f"{slug(work.device_name)}-bs{work.batch if batch is None else batch}-{work.precision}")

    def schedule_path(self, work: Workload, channels_last: bool) -> Path | None:
        """Where these settings' schedule for this workload is saved (None without a store).
        Every option that can change the searched schedule is in the name, as a short hash."""
        stem = self._stem(work)
        if stem is None:
            return None
        return stem.with_name(f"{stem.name}-{self.options.schedule_name(bool(channels_last))}.json")

    def plan(self, work: Workload, device: str) -> Plan:
        """The whole plan for ``work`` on ``device`` ("cpu", "cuda"), its model prepared to run at
        ``work.batch``. The schedule is, in this order: the given ``schedule_file``; the one the same
        search saved on the GPU ``schedule_device`` names; this search's saved one (unless
        ``research``); a new search (or a baseline). It is made for ``opt_batch`` where set. A
        schedule searched here is saved after the model is prepared, with the kernels it settled.
        Raises :class:`PlanError` for a schedule that cannot be used."""
        import torch

        was = torch.backends.cudnn.benchmark, use_cudnn_search(self.options.cudnn_search)
        plan = None
        try:
            plan = self._plan(work, device)
            return plan
        finally:  # the option holds for this plan's targets only (a later backend in the process sets its own)
            t = time.perf_counter()
            torch.backends.cudnn.benchmark = was[0]
            use_cudnn_search(was[1])
            for cache, _ in self._remembered.values():
                with contextlib.suppress(OSError):  # a cache that cannot be written fails nothing
                    cache.flush()  # the kernels timed so far serve the next plan, even after a failure
            _release()
            if plan is not None:  # part of the cost: a warm rerun's phases left 1.6 of NASNet's 4.5 s unnamed
                plan.metrics["plan_release_s"] = time.perf_counter() - t

    def _plan(self, work: Workload, device: str) -> Plan:
        o = self.options
        metrics: dict[str, float] = {}
        phase = _Phases(metrics)  # where the optimization cost goes, phase by phase (plan_<phase>_s)
        given = self._load(o.schedule_file, None, "schedule_file") if o.schedule_file else None
        # a given schedule was made for the graph its passes produced: apply those, not today's defaults
        passes = list(given.options.get("passes", [])) if given is not None else list(o.passes)
        with phase("passes"):
            graph, rewrites = apply_passes(work.graph, passes)
        metrics.update({f"pass_{k}": float(v) for k, v in rewrites.items()})
        work = replace(work, graph=graph)
        searched = work.at_batch(o.opt_batch or work.batch)  # specialization: a schedule made for another batch
        if given is not None and "channels_last" in given.stats and parse_channels_last(o.channels_last) is None:
            channels_last, layout_how = bool(given.stats["channels_last"]), "schedule file"
        else:
            with phase("layout"):
                channels_last, layout_how, times = self.layout(searched, device, metrics)
            metrics.update({f"layout_{k}_ms": v for k, v in times.items()})
        with phase("tables"):  # the target, the final model's kernel table (the store's choices read), the schedule
            target = TorchTarget(device, work.precision, channels_last)
            kernels = self.kernel_table(target, self.policy)
            path = self.schedule_path(searched, channels_last)
            foreign = self.foreign_schedule(path, work.device_name) if given is None and path is not None else None
        with phase("schedule"):
            if given is not None:
                sched, source, path = self._check(given, graph, "schedule_file"), "schedule file", Path(o.schedule_file)
            elif foreign is not None:
                sched, source, path = self._load(str(foreign), graph, "schedule_device"), "another GPU", foreign
            else:
                try:
                    sched, found = self.schedule(target, searched)
                except ScheduleError as exc:
                    raise PlanError(f"saved schedule (set research=true to search again): {exc}") from None
                metrics.update(found)
                source = "baseline" if o.schedule in ("sequential", "greedy") else \
                    "saved" if found.get("search_reused") == 1.0 else "searched"
        # another batch's choices are for other shapes; choices made among other candidates are timed again
        if (source != "saved" or sched.batch == searched.batch) and \
                sched.stats.get("kernel_candidates", 1) == CANDIDATES_VERSION:
            kernels.choices.update({k: v for k, v in sched.stats.get("kernels", {}).items()
                                    if k not in kernels.choices})
        if o.bounds:  # under the configured cost model, so comparable with predicted_ms
            with phase("bounds"):
                metrics.update(self.bounds(target, work))
        with phase("build"):  # the merges applied, the weights on the device, the stream program
            model = ScheduledModel(graph, sched, device, work.precision, o.runtime, channels_last, o.fuse,
                                   follow_chains=o.streams == "chains", kernels=kernels)
        with phase("prepare"):  # the warm-up calls before capture settle every kernel choice
            infer, load = model.prepare(work.batch)
        with phase("save"):
            if source in ("schedule file", "another GPU"):
                self.annotate(sched, channels_last, passes)  # run as given, never saved
            else:
                self.save(sched, searched, channels_last)  # annotated, where plan() looks next time
        metrics.update(num_stages=float(sched.num_stages()), max_groups=float(sched.max_groups()), **kernels.counts())
        return Plan(graph, sched, source, path, passes, channels_last, layout_how, target, kernels, model, infer, load,
                    metrics)

    def foreign_schedule(self, path: Path, device_name: str) -> Path | None:
        """The schedule saved by the same search on the GPU ``schedule_device`` names (device
        specialization: made on one GPU kind, run on another); None for this GPU's own. Its file
        differs from ``path`` only in the device part of the name."""
        wanted = slug(self.options.schedule_device) if self.options.schedule_device else ""
        here = slug(device_name)
        if not wanted or here.startswith(wanted):
            return None
        rest = path.name[len(here):]
        saved = sorted(p for p in path.parent.glob(f"*{rest}") if p.name != path.name)
        found = [p for p in saved if p.name.startswith(wanted)]
        if len(found) == 1:
            return found[0]
        others = ", ".join(p.name[:-len(rest)] for p in saved) or "none"
        what = f"schedule_device={self.options.schedule_device!r}"
        if found:
            raise PlanError(f"{what} matches several GPUs ({others}): give more of the name", "schedule_device")
        raise PlanError(f"{what}: no schedule of this search saved by that GPU under {path.parent} (GPUs with one: "
                        f"{others}); run the same search there and copy its store's schedules/ folder here",
                        "schedule_device")

    @classmethod
    def _load(cls, path: str, graph: Graph | None, option: str) -> Schedule:
        try:
            sched = Schedule.load(path)
        except ScheduleError as exc:
            raise PlanError(f"{option}: {exc}", option) from None
        return sched if graph is None else cls._check(sched, graph, option)

    @staticmethod
    def _check(sched: Schedule, graph: Graph, option: str) -> Schedule:
        try:
            sched.check(graph)
        except ScheduleError as exc:
            raise PlanError(f"{option}: {exc}", option) from None
        return sched

    def schedule(self, target: TorchTarget, work: Workload) -> tuple[Schedule, dict[str, float]]:
        """The schedule ``options.schedule`` asks for, made for ``work``: a baseline, the one
        these settings saved before (unless ``research``; metric ``search_reused`` says which),
        or a new search. Raises :class:`ScheduleError` for a saved schedule that does not fit."""
        sched, metrics, made_for = self._find(target, work)
        sched.batch, sched.device, sched.precision = made_for, work.device_name, work.precision
        return sched, metrics

    def _find(self, target: TorchTarget, work: Workload) -> tuple[Schedule, dict[str, float], int]:
        """The schedule, its metrics and the batch size it was made for (another's with ``schedule_any_batch``)."""
        o, graph = self.options, work.graph
        if o.schedule == "sequential":
            return sequential(graph), {}, work.batch
        if o.schedule == "greedy":
            return greedy(graph, o.greedy_streams), {}, work.batch
        path = self.schedule_path(work, target.channels_last)
        saved = self._saved_schedule(work, path) if path is not None and not o.research else None
        if saved is not None:
            sched, made_for = saved
            metrics = {"search_reused": 1.0}
            if made_for == work.batch:  # another batch's predictions are not this batch's
                for k in ("predicted_ms", "insitu_ms"):
                    if k in sched.stats:
                        metrics["predicted_insitu_ms" if k == "insitu_ms" else k] = float(sched.stats[k])
            return sched, metrics, made_for
        sched, metrics = self.search(target, work)
        return sched, {**metrics, "search_reused": 0.0}, work.batch

    def _saved_schedule(self, work: Workload, path: Path) -> tuple[Schedule, int] | None:
        """This search's schedule saved for ``work`` with the batch size it was searched for: its own file, else,
        with ``schedule_any_batch``, the one searched for the batch nearest by ratio within that factor (a batch
        sweep searches once per factor: specialization cost 0.1% at 4-32x on Inception v3, BENCHMARKS.md
        experiment 4). A schedule reused at another batch and saved under this one keeps its origin's batch, so
        it is reused again only within the factor of its origin. Another batch's file that is damaged or made
        for another graph is passed over (this one's raises :class:`ScheduleError`)."""
        if path.is_file():
            sched = Schedule.load(path)
            sched.check(work.graph)
            if self._within(sched.batch, work.batch):
                return sched, sched.batch
        if not self.options.schedule_any_batch:
            return None
        stem, every = self._stem(work), self._stem(work, "*")
        assert stem is not None and every is not None
        found: list[tuple[float, int, Schedule]] = []
        for p in path.parent.glob(every.name + path.name[len(stem.name):]):
            if p == path:
                continue
            try:
                sched = Schedule.load(p)
                sched.check(work.graph)
            except ScheduleError:
                continue  # damaged, or for another graph: this plan searches instead
            if self._within(sched.batch, work.batch):
                found.append((abs(math.log(sched.batch / work.batch)), sched.batch, sched))
        if not found:
            return None
        _, made_for, sched = min(found, key=lambda f: (f[0], f[1]))  # the nearest; a tie to the smaller batch
        return sched, made_for

    def _within(self, made_for: int, batch: int) -> bool:
        """A schedule searched for batch ``made_for`` may run at ``batch``: its own, or within the factor."""
        factor = self.options.schedule_any_batch
        return made_for == batch or (factor > 0 and max(made_for, batch) <= factor * min(made_for, batch))

    def annotate(self, sched: Schedule, channels_last: bool, passes: list[str] | None = None) -> None:
        """Record in a schedule what it runs with (graph passes, layout, each conv's kernel), so
        that a saved or exported schedule runs the same way elsewhere."""
        sched.options["passes"] = list(self.options.passes if passes is None else passes)
        sched.stats.update(channels_last=channels_last, kernels=dict(sorted(self.learned.choices.items())),
                           kernel_candidates=CANDIDATES_VERSION)

    def save(self, sched: Schedule, work: Workload, channels_last: bool) -> Path | None:
        """Annotate and save a schedule where :meth:`plan` looks for it next time (None without
        a store)."""
        self.annotate(sched, channels_last)
        path = self.schedule_path(work, channels_last)
        if path is not None:
            sched.to_json(path)
        return path

    def layout(self, work: Workload, device: str,
               metrics: dict[str, float] | None = None) -> tuple[bool, str, dict[str, float]]:
        """(channels_last, how it was chosen, the layouts' times): forced by the option, NCHW on
        the CPU, or on CUDA the faster of both layouts under Greedy, saved beside the schedules
        so that a later plan with the same settings (at any batch size, with ``layout_any_batch``)
        reuses the choice without timing. Both layouts are timed first on the vendor's kernels
        alone (no candidates timed, nothing compiled); only where they are within ``layout_screen``
        of each other are they timed again with the kernel choice the model will run with. The screen's
        programs compiled ahead and their seconds go to ``metrics`` (``layout_ahead_programs``, ``_s``)."""
        o = self.options
        forced = parse_channels_last(o.channels_last)
        if forced is not None:
            return forced, "forced", {}
        if device != "cuda":
            return False, "default", {}
        stem = self._stem(work)
        name = f"layout-{o.digest('layout')}.json"
        path = stem.with_name(f"{stem.name}-{name}") if stem else None
        if path is not None and not o.research:
            # this batch's own file sorts first (distance 0); ties between other batches go to the smaller
            candidates = sorted(path.parent.glob(f"{self._stem(work, '*').name}-{name}"),  # type: ignore[union-attr]
                                key=lambda p: (abs(_batch_of(p) - work.batch), _batch_of(p))) \
                if o.layout_any_batch else [path]
            saved = _saved_layout(candidates, path)
            if saved is not None:
                return saved
        mode, captured = RUNTIMES[o.runtime]
        timing = TimingConfig(o.warmup + 1, o.number, o.repeat + 2, cold=False, guard=self.guard)

        def timed(kernels: Callable[[TorchTarget], KernelTable | None]) -> dict[str, float]:
            return time_layouts(work.graph, work.batch, device, work.precision, mode=mode, captured=captured,
                                fuse=o.fuse, follow_chains=o.streams == "chains", greedy_streams=o.greedy_streams,
                                kernels=kernels, timing=timing)
        how = "measured"
        if o.layout_screen > 0 and o.kernels == "auto":
            screen = self.screen_table()
            vendor = timed(lambda _: screen)
            if metrics is not None:
                metrics.update(layout_ahead_programs=float(screen.ahead_programs), layout_ahead_s=screen.ahead_s)
            fast, slow = sorted(vendor.values())
            if slow > fast * (1 + o.layout_screen):
                times, how = vendor, "measured (vendor kernels)"
        if how == "measured":
            times = timed(self.kernel_table)
        channels_last = faster_layout(times) == "nhwc"
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"channels_last": channels_last, "ms": times, "how": how,
                                        "batch": work.batch}, indent=1))
        return channels_last, how, times

    def screen_table(self) -> KernelTable:
        """The layout screen's kernels: nothing timed, the first candidate of each choice: cuDNN, ATen's pools
        and, with ``triton_depthwise`` (and not ``depthwise_cudnn``), the Triton depthwise kernel, which the
        model will run (cuDNN's would build a plan per shape and layout: most of NASNet's 25 s screen)."""
        o = self.options
        return KernelTable(KernelPolicy("auto", triton_depthwise=o.triton_depthwise, depthwise_cudnn=o.depthwise_cudnn),
                           compile_threads=self.compile_threads)

    def bounds(self, target: TorchTarget, work: Workload) -> dict[str, float]:
        """Critical path and sum of ops under the configured cost model (comparable with predicted_ms)."""
        models = self.cost_models(target, work)
        try:
            return bounds(work.graph, models.rank)
        finally:
            if models.measured is not None:
                models.measured.close()


def _release() -> None:
    """Free what the timing left: its models, weights and buffers hold each other in cycles (closures over
    their owners), so they would wait for the garbage collector, and on CUDA count as the model's memory in
    the timed loop that follows (IOS read 160-920 MB there on TIMM models where torch.compile held 11-30), and
    the L2 flush buffer. (What the collector could not free, a cycle through the compiled search core, is broken
    where it is made: :meth:`ios_core.schedule.native.NativePartSearch.solutions`.)"""
    import gc

    release_flush_buffers()
    gc.collect()
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()  # back to the device, for whatever runs beside


def _batch_of(path: Path) -> int:
    found = re.search(r"-bs(\d+)-", path.name)
    return int(found.group(1)) if found else 0


def _saved_layout(candidates: list[Path], own: Path) -> tuple[bool, str, dict[str, float]] | None:
    """The first readable layout choice among ``candidates`` (``own``: this workload's; the others were saved
    for other batch sizes of it); None where there is none (a damaged file counts as none)."""
    for p in candidates:
        if not p.is_file():
            continue
        try:
            saved = json.loads(p.read_text())
            times = {k: float(saved["ms"][k]) for k in ("nchw", "nhwc")}
        except (ValueError, KeyError, TypeError):
            continue  # a damaged choice file is timed again
        return bool(saved["channels_last"]), "reused" if p == own else f"reused (batch {_batch_of(p)})", times
    return None


def plan(work: Workload, target: TorchTarget, options: PlanOptions | None = None, *, store: Path | None = None,
         guard: Guard = None) -> tuple[Schedule, dict[str, float]]:
    """The schedule for ``work`` on ``target`` under ``options`` (checked first), and the
    search's metrics; see :class:`Planner` (:meth:`Planner.plan` also applies the passes, chooses
    the layout and prepares the model)."""
    options = options or PlanOptions()
    options.check()
    return Planner(options, store, guard).schedule(target, work)


__all__ = ["COST_MODELS", "DEFAULT_PASSES", "SOURCES", "CostModels", "OptionError", "Plan", "PlanError", "PlanOptions",
           "Planner", "plan"]
