"""The compiled DP core (``_dpcore``, C++ through pybind11) behind :class:`_PartSearch`'s interface.

``optimizer._PartSearch`` stays the reference implementation; :class:`NativePartSearch` gives
the same schedules, costs and counters (tests/test_dpcore.py checks it on random DAGs and the
model zoo) tens of times faster. A cost model that composes a stage from per-unit numbers
(``unit_numbers(graph, name) -> (latency ms, device-busy ms)`` and ``sync_ms``: the analytic and
the calibrated models) is evaluated inside the core; any other (the measured model) and every
merged stage is asked through a callback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..ir import Graph
from .merge import merged_geometry
from .options import CORES
from .schedule import Stage

try:
    from . import _dpcore  # type: ignore[attr-defined]
except ImportError as exc:  # built by the install (setup.py); absent without a C++ compiler
    _dpcore = None
    MISSING = f"{exc}"
else:
    MISSING = ""

MAX_UNITS = 64  # a state is a 64-bit mask


def available() -> bool:
    return _dpcore is not None


def core_name() -> str:
    """One line for --list-backends and the search's first progress line."""
    if available():
        return "compiled (C++)"
    return "python (the compiled core is not built: rerun ./install.sh where a C++ compiler is installed)"


def use_native(core: str, units: int) -> bool:
    """Whether a part of ``units`` units is searched by the compiled core under option ``core``."""
    if core not in CORES:
        raise ValueError(f"unknown search core {core!r}; choose one of: {', '.join(CORES)}")
    if core == "python":
        return False
    if not available():
        if core == "native":
            raise RuntimeError(f"search core 'native' asked for, but the compiled core is not built ({MISSING}): "
                               "install a C++ compiler and rerun ./install.sh, or use the python core")
        return False
    return units <= MAX_UNITS


def part_work(dag, r: int, limit: int = 5_000_000) -> tuple[int, float] | None:
    """(states, estimated work) of a part's DP before it runs, None past ``limit`` states or
    without the compiled core: the progress bar's total."""
    if not available() or not 1 <= dag.n <= MAX_UNITS:
        return None
    states, work = _dpcore.part_work(dag.n, dag.succs, dag.desc, dag.chains, r, limit)
    return None if states < 0 else (int(states), float(work))


def composable(cost: Any) -> bool:
    return callable(getattr(cost, "unit_numbers", None)) and hasattr(cost, "sync_ms")


class NativePartSearch:
    """One part's DP in the compiled core. ``lock`` serialises the callbacks into Python cost
    models when several parts are searched in parallel threads."""

    def __init__(self, graph: Graph, dag, cost, merge: bool, parallel: bool, r: int, s: int, ending: str,
                 stats, tick: Callable[[], None], keep: int = 1, slack: float | None = 0.9,
                 lock: threading.Lock | None = None, on_work: Callable[[float], None] | None = None):
        self.graph, self.dag, self.cost, self.stats = graph, dag, cost, stats
        self._tick, self._on_work = tick, on_work
        self._lock = lock or threading.Lock()
        self.latency: dict[tuple, float] = {}
        key_ids: dict[Any, int] = {}
        keys = [-1 if k is None else key_ids.setdefault(k, len(key_ids)) for k in dag.keys]
        names = [nd.name for nd in dag.nodes]
        unit_fn = None
        if composable(cost):
            def unit_fn(i: int) -> tuple[float, float]:
                with self._lock:
                    return cost.unit_numbers(graph, names[i])
        self._solver: Any = _dpcore.PartSolver(
            dag.n, dag.preds, dag.succs, dag.desc, dag.chains, keys, r, s, ending == "corrected", merge, parallel,
            keep, slack, self._stage_fn, unit_fn, float(getattr(cost, "sync_ms", 0.0)), self._merge_ok,
            self._on_tick, 1 if unit_fn is None else 1024)

    def _stage_fn(self, groups: list[list[int]], merged: bool) -> float:
        names = [[self.dag.nodes[i].name for i in g] for g in groups]
        with self._lock:
            return float(self.cost.stage_latency(self.graph, Stage(names, merge=merged)))

    def _merge_ok(self, units: list[int]) -> bool:
        return merged_geometry([self.dag.nodes[i] for i in units]) is not None

    def _on_tick(self, work: float) -> None:
        with self._lock:
            if self._on_work is not None:
                self._on_work(work)
            self._tick()

    def solutions(self) -> list[tuple[float, list[tuple[tuple[int, ...], bool]]]]:
        """The part's best schedules (taken once: the core is released after). The core holds this object's
        bound methods, a cycle through C++ that the garbage collector cannot see: kept, it held the cost model,
        and the stage timer's weights and inputs with it, for the rest of the process (hundreds of MB)."""
        solver, self._solver = self._solver, None
        if solver is None:
            raise RuntimeError("a part's solutions are taken once")
        sols = solver.solutions()
        st = solver.stats()
        for k in ("states", "transitions", "stage_evaluations", "pruned"):
            setattr(self.stats, k, getattr(self.stats, k) + int(st[k]))
        self.latency = {(tuple(g), m): lat for g, m, lat in solver.evaluated()}
        return [(cost, [(tuple(g), m) for g, m in stages]) for cost, stages in sols]

    def stage_of(self, groups: tuple[int, ...], merge: bool) -> Stage:
        return self.dag.stage(groups, merge)
