"""``torch.compile(model, backend="ios")``: IOS as a torch.compile backend, found through the package's
``torch_dynamo_backends`` entry point (no import needed).

Dynamo's graph is traced to ATen (:mod:`ios_core.fx.aten`), cut into the parts IOS takes (:mod:`ios_core.fx.split`),
each part converted to the IR and planned as the IOS backend plans a model (search, layout, kernels, CUDA graph);
what the IR cannot take runs in the fallback (Inductor, or eager), with IOS's parts inside its graph as one opaque
operator each. One line says what fell back and why. Options are the IOS backend's own names
(:class:`~ios_core.options.PlanOptions`: ``schedule``, ``cost_model``, ``runtime`` ...) plus ``precision`` (what
IOS computes in; default the input's dtype), ``store`` (a folder where schedules and kernel choices are kept and
reused) and ``fallback``::

    fast = torch.compile(model.eval(), backend="ios", options={"schedule": "ios-both", "store": "ios-store"})

The module's weights are folded into the plan when it is compiled (inference only; change them and compile again).
Each new input shape (a batch size) is traced and planned on its own, as a static torch.compile recompiles.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import fx

from .fx.aten import AtenGraph, is_weight, to_aten
from .fx.split import Part, Split, split
from .options import PlanOptions
from .runtime.target import DTYPES
from .schedule import OptionError
from .workload import Workload

log = logging.getLogger(__name__)

FALLBACKS = ("inductor", "eager")
#: options of this backend that are not the planner's
OWN_OPTIONS = ("precision", "store", "fallback")
PRECISIONS = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@dataclass(frozen=True)
class CompileOptions:
    plan: PlanOptions
    precision: str | None  # None: the input's dtype
    store: Path | None
    fallback: str


def parse_options(options: dict[str, Any] | None) -> CompileOptions:
    """``torch.compile``'s ``options`` dict as typed values; an unknown name or a bad value is one line."""
    options = dict(options or {})
    fields = {f.name for f in dataclasses.fields(PlanOptions)}
    unknown = sorted(k for k in options if k not in fields and k not in OWN_OPTIONS)
    if unknown:
        raise OptionError(f"torch.compile(backend='ios'): unknown option(s) {', '.join(unknown)}; valid: "
                          f"{', '.join(sorted(fields | set(OWN_OPTIONS)))}")
    own = {k: options.pop(k) for k in OWN_OPTIONS if k in options}
    plan = PlanOptions(**options)
    plan.check()
    precision = own.get("precision")
    if precision is not None and precision not in DTYPES:
        raise OptionError(f"torch.compile(backend='ios'): precision={precision!r}; choose one of {', '.join(DTYPES)}")
    fallback = own.get("fallback", "inductor")
    if fallback not in FALLBACKS:
        raise OptionError(f"torch.compile(backend='ios'): fallback={fallback!r}; choose one of {', '.join(FALLBACKS)}")
    store = Path(own["store"]) if own.get("store") else None
    return CompileOptions(plan, precision, store, fallback)


# -- one IOS part as an operator the fallback's graph can hold -----------------------------------------------
@dataclass
class Runner:
    """A planned part: runs its plan on a tensor and returns a fresh tensor of the part's ATen shape and dtype
    (the plan's own output buffer is reused by the next replay)."""

    infer: Callable[[Any], Any]
    load_input: Callable[[Any], Any]
    shape: tuple[int, ...]
    dtype: torch.dtype

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = self.infer(self.load_input(x)).reshape(self.shape)
        # a fresh, contiguous tensor: what the fallback's graph was traced with (a plan's NHWC output failed
        # Inductor's stride check)
        return torch.empty(self.shape, dtype=self.dtype, device=y.device).copy_(y)


RUNNERS: list[Runner] = []


@torch.library.custom_op("ios_core::run", mutates_args=())
def run_part(x: torch.Tensor, handle: int) -> torch.Tensor:
    """IOS's plan ``handle`` on ``x``: one opaque operator in the fallback's graph."""
    return RUNNERS[handle](x)


@run_part.register_fake
def _run_part_shape(x: torch.Tensor, handle: int) -> torch.Tensor:
    r = RUNNERS[handle]
    return x.new_empty(r.shape, dtype=r.dtype)


# -- the backend -------------------------------------------------------------------------------------------
def _plan_part(part: Part, opts: CompileOptions) -> Runner:
    from .planner import Planner
    from .runtime.target import TorchTarget

    val = part.data.meta["val"]
    device = "cuda" if val.device.type == "cuda" else "cpu"
    precision = opts.precision or PRECISIONS.get(val.dtype)
    if precision is None:
        raise OptionError(f"torch.compile(backend='ios'): inputs of dtype {val.dtype} are not taken; give "
                          f"options={{'precision': ...}} ({', '.join(DTYPES)})")
    work = Workload(part.graph, int(val.shape[0]), precision, TorchTarget(device, precision).device_name())
    plan = Planner(opts.plan, opts.store).plan(work, device)
    out = part.output.meta["val"]
    return Runner(plan.infer, plan.load_input, tuple(int(d) for d in out.shape), out.dtype)


class Compiled:
    """What the backend returns: per input shapes (a batch size) the graph traced, split and planned, once."""

    def __init__(self, gm: fx.GraphModule, opts: CompileOptions, example_inputs: Sequence[Any]):
        self.gm, self.opts = gm, opts
        self.built: dict[tuple, Callable[..., Any]] = {}
        self.report = ""
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        #: the inputs that are not the module's weights: their shapes pick the plan (Dynamo guards the weights',
        #: and reading hundreds of shapes on every call cost more than a small network's GPU time)
        self.watched = [i for i, (name, v) in enumerate(zip(names, example_inputs)) if not is_weight(name, v)]

    def key(self, args: Sequence[Any]) -> tuple:
        return tuple(args[i].shape if isinstance(args[i], torch.Tensor) else args[i] for i in self.watched)

    def __call__(self, *args: Any) -> Any:
        key = self.key(args)
        fn = self.built.get(key)
        if fn is None:
            fn = self.built[key] = self.build(list(args))
        return fn(*args)

    def build(self, args: list[Any]) -> Callable[..., Any]:
        try:
            ag = to_aten(self.gm, args)
        except RuntimeError as exc:  # data-dependent Python (a tensor's .item()) cannot be traced to ATen here
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            self.report = f"IOS takes none of this graph: tracing it to ATen failed ({why}); the fallback runs it"
            log.warning("torch.compile(backend='ios'): %s", self.report)
            return self._fallback(self.gm, args)
        sp = split(ag, self.gm.__class__.__name__)
        self.report = sp.report()
        (log.warning if sp.refused else log.info)("torch.compile(backend='ios'): %s", self.report)
        handles = {id(p): self._register(_plan_part(p, self.opts)) for p in sp.parts}
        whole = self._whole(ag, sp)
        if whole is not None:
            runner, index, many = RUNNERS[handles[id(whole[0])]], whole[1], whole[2]
            return (lambda *a: (runner(a[index]),)) if many else (lambda *a: runner(a[index]))
        rewritten = _with_parts(ag, sp, handles)
        return self._fallback(rewritten, args) if sp.refused else rewritten

    def _fallback(self, gm: fx.GraphModule, args: list[Any]) -> Callable[..., Any]:
        """``gm`` as the fallback runs it: compiled by Inductor, or as it is (eager)."""
        if self.opts.fallback == "eager":
            return gm
        from torch._inductor.compile_fx import compile_fx

        compiled: Callable[..., Any] = compile_fx(gm, args)  # type: ignore[assignment]
        return compiled

    @staticmethod
    def _register(runner: Runner) -> int:
        RUNNERS.append(runner)
        return len(RUNNERS) - 1

    @staticmethod
    def _whole(ag: AtenGraph, sp: Split) -> tuple[Part, int, bool] | None:
        """The one part when it is the whole graph: its input a graph input, its output the graph's (then the
        plan is called directly, with no graph around it)."""
        if len(sp.parts) != 1 or sp.refused:
            return None
        part, places = sp.parts[0], ag.placeholders()
        out = [n for n in ag.module.graph.nodes if n.op == "output"][0].args[0]
        many = isinstance(out, (list, tuple))
        outs = list(out) if many else [out]
        if part.data not in places or outs != [part.output]:
            return None
        return part, places.index(part.data), many


def _with_parts(ag: AtenGraph, sp: Split, handles: dict[int, int]) -> fx.GraphModule:
    """The ATen graph with each part replaced by one ``ios_core::run`` call (the fallback runs the rest)."""
    gm = ag.module
    graph = gm.graph
    for part in sp.parts:
        with graph.inserting_after(part.output):
            call = graph.call_function(torch.ops.ios_core.run.default, (part.data, handles[id(part)]))
        call.meta["val"] = part.output.meta.get("val")
        part.output.replace_all_uses_with(call, delete_user_cb=_other_than(call))
    graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _other_than(made: fx.Node) -> Callable[[fx.Node], bool]:
    return lambda user: user is not made


def ios(gm: fx.GraphModule, example_inputs: Sequence[Any], options: dict[str, Any] | None = None,
        mode: str | None = None) -> Callable[..., Any]:
    """The ``ios`` backend of ``torch.compile``: plans ``gm`` for ``example_inputs`` now, other shapes as they
    come."""
    if mode is not None:
        raise OptionError(f"torch.compile(backend='ios') takes no mode ({mode!r}); give IOS's options instead, "
                          f"e.g. options={{'schedule': 'ios-both'}}")
    compiled = Compiled(gm, parse_options(options), example_inputs)
    if not any(_symbolic(a) for a in example_inputs):  # a graph Dynamo made dynamic: planned at each shape's call
        compiled.built[compiled.key(example_inputs)] = compiled.build(list(example_inputs))
    return compiled


def _symbolic(a: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return any(isinstance(d, torch.SymInt) for d in a.shape)
    return isinstance(a, (torch.SymInt, torch.SymFloat))


__all__ = ["FALLBACKS", "CompileOptions", "Compiled", "ios", "parse_options"]
