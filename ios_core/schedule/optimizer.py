"""The IOS dynamic program.

Per block and per part (``block.parts`` or slices of ``part_size`` units), a state is the
bitmask of units executed so far (closed under predecessors); ``cost(s) = min over
endings S' of cost(s - S') + latency(S')`` where an ending is a last stage: no unit
left in ``s - S'`` reads from it.

Endings (reference/ios_reference.md 4.3):

* merge: a subset of the sinks of ``s`` that :func:`can_merge` accepts (single units too);
* parallel: the part's transitive closure is decomposed into chains by repeatedly
  peeling the longest chain; each chain gives at most one root among the last ``r``
  units of its prefix inside ``s``; a root's group is the root plus its descendants in
  ``s``; at most ``s`` groups of at most ``r`` units. ``ending="original"`` rejects
  roots whose groups overlap (the paper's code); ``"corrected"`` (default) unites
  overlapping groups into one (the fix of upstream issue #10), so every
  successor-closed set with small enough connected components is an ending.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import accumulate
from typing import NamedTuple, Protocol, TypedDict

from ..ir import Block, Graph, Node
from ..ir.signature import signature
from ..progress import Progress
from ..workload import Workload
from . import native
from .merge import merge_key, merged_geometry
from .options import ENDINGS, VARIANTS, OptionError, SearchOptions
from .schedule import Schedule, Stage, greedy_stages, rule_barriers, sequential_stages

__all__ = ["ENDINGS", "VARIANTS", "CostModel", "SearchStats", "optimize"]


class CostModel(Protocol):
    name: str

    def stage_latency(self, graph: Graph, stage: Stage) -> float: ...

    def stats(self) -> dict[str, float]: ...


@dataclass
class SearchStats:
    states: int = 0
    transitions: int = 0
    stage_evaluations: int = 0
    search_s: float = 0.0
    parts: int = 0
    pruned: int = 0
    shared_parts: int = 0
    parts_screened: int = 0
    cost: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        return {"states": self.states, "transitions": self.transitions, "stage_evaluations": self.stage_evaluations,
                "search_s": round(self.search_s, 3), "parts": self.parts, "pruned": self.pruned,
                "shared_parts": self.shared_parts, "parts_screened": self.parts_screened, **self.cost}


def popcount(x: int) -> int:
    return x.bit_count()


def bits(x: int) -> Iterator[int]:
    i = 0
    while x:
        if x & 1:
            yield i
        x >>= 1
        i += 1


class PartDAG:
    """The units of one part as bit indices, with in-part edges, descendants and chains."""

    def __init__(self, graph: Graph, nodes: list[Node]):
        self.nodes = nodes
        self.n = len(nodes)
        index = {nd.name: i for i, nd in enumerate(nodes)}
        self.preds = [0] * self.n
        self.succs = [0] * self.n
        for i, nd in enumerate(nodes):
            for t in nd.inputs:
                for v in t:
                    j = index.get(v.node)
                    if j is not None:
                        self.preds[i] |= 1 << j
                        self.succs[j] |= 1 << i
        self.desc = [0] * self.n  # strict descendants
        for i in reversed(range(self.n)):
            d = 0
            for j in bits(self.succs[i]):
                d |= (1 << j) | self.desc[j]
            self.desc[i] = d
        self.keys = [merge_key(graph, nd) for nd in nodes]
        self.chains = self._chains()

    def _chains(self) -> list[list[int]]:
        """Peel the longest chain of the transitive closure until no unit is left."""
        left = (1 << self.n) - 1
        chains = []
        while left:
            best: dict[int, tuple[int, int]] = {}  # i -> (length, previous)
            for i in range(self.n):
                if not left >> i & 1:
                    continue
                length, prev = 1, -1
                for j in range(i):
                    if left >> j & 1 and self.desc[j] >> i & 1 and best[j][0] + 1 > length:
                        length, prev = best[j][0] + 1, j
                best[i] = (length, prev)
            end = max(best, key=lambda i: (best[i][0], -i))
            chain = []
            while end != -1:
                chain.append(end)
                end = best[end][1]
            chain.reverse()
            chains.append(chain)
            for i in chain:
                left &= ~(1 << i)
        return chains

    def stage(self, groups: tuple[int, ...], merge: bool) -> Stage:
        """The stage of unit masks ``groups``: groups ordered by their lowest unit, units ascending
        (the compiled core's parts use it too, so it lives with the DAG rather than the search)."""
        names = [[self.nodes[i].name for i in bits(g)] for g in sorted(groups, key=lambda g: (g & -g))]
        return Stage(names, merge=merge and popcount(groups[0]) > 1)


class _Entry(NamedTuple):
    cost: float
    key: int  # order-free hash of the stage set, so permutations of one schedule count once
    groups: tuple[int, ...] | None
    merge: bool
    prev: int  # rank of the predecessor state's entry


class _SearchOpts(TypedDict):
    """The keyword options ``optimize`` passes to every :class:`_PartSearch`."""

    keep: int
    slack: float | None


class _PartSearch:
    """The k-best DP over one part, with lower-bound pruning.

    Each state keeps the ``keep`` cheapest distinct stage sets that reach it. Before a
    candidate ending is timed, its lower bound (its longest group, each unit at its
    stand-alone latency, times ``slack``) is added to the cheapest way to the rest of the
    state; endings are tried in that order and the first whose bound cannot beat the
    k-th best so far stops the loop, so most multi-unit stages are never measured.
    """

    def __init__(self, graph: Graph, dag: PartDAG, cost: CostModel, merge: bool, parallel: bool,
                 r: int, s: int, ending: str, stats: SearchStats, tick, keep: int = 1, slack: float | None = 0.9):
        self.graph, self.dag, self.cost = graph, dag, cost
        self.merge, self.parallel, self.r, self.s, self.ending = merge, parallel, r, s, ending
        self.stats, self.tick = stats, tick
        self.keep, self.slack = max(1, keep), slack
        self.memo: dict[int, list[_Entry]] = {0: [_Entry(0.0, 0, None, False, -1)]}
        self.latency: dict[tuple, float] = {}
        self.unit: list[float | None] = [None] * dag.n
        self.group_sum: dict[int, float] = {}

    # -- candidate endings -----------------------------------------------------------
    def endings(self, s: int) -> Iterator[tuple[tuple[int, ...], bool]]:
        """(group masks, is_merge) for every candidate last stage of state ``s``."""
        dag = self.dag
        sinks = [i for i in bits(s) if not dag.succs[i] & s]
        seen: set[tuple[int, ...]] = set()
        for i in sinks:  # single units (both flavours produce them)
            seen.add((1 << i,))
            yield (1 << i,), False
        if self.merge:
            by_key: dict[tuple, list[int]] = {}
            for i in sinks:
                mkey = dag.keys[i]
                if mkey is not None:
                    by_key.setdefault(mkey, []).append(i)
            for members in by_key.values():
                m = len(members)
                for sub in range(1, 1 << m):
                    if popcount(sub) < 2:
                        continue
                    chosen = [members[k] for k in range(m) if sub >> k & 1]
                    if merged_geometry([dag.nodes[k] for k in chosen]) is not None:  # type: ignore[misc]
                        yield (sum(1 << k for k in chosen),), True
        if self.parallel:
            for groups in self._parallel(s):
                if len(groups) == 1 and popcount(groups[0]) == 1:
                    continue  # a single unit, already yielded
                key = tuple(sorted(groups))
                if key in seen:
                    continue
                seen.add(key)
                yield key, False

    def _parallel(self, s: int) -> Iterator[list[int]]:
        dag, r, smax = self.dag, self.r, self.s
        cands: list[list[int]] = []
        for chain in dag.chains:
            end = 0
            while end < len(chain) and s >> chain[end] & 1:
                end += 1
            roots = []
            for p in range(max(0, end - r), end):
                u = chain[p]
                g = (1 << u) | (dag.desc[u] & s)
                if popcount(g) <= r:
                    roots.append(g)
            if roots:
                cands.append(roots)
        corrected = self.ending == "corrected"
        n = len(cands)
        # depth-first over "skip chain ci, or take one of its roots", iteratively (nested
        # generators cost a frame switch per level per result); the order is the recursion's
        stack: list[tuple[int, tuple[int, ...]]] = [(0, ())]
        while stack:
            ci, groups = stack.pop()
            if ci == n:
                if groups and len(groups) <= smax:
                    yield list(groups)
                continue
            for g in reversed(cands[ci]):
                if corrected:
                    merged, rest = g, []
                    for h in groups:
                        if h & merged:
                            merged |= h
                        else:
                            rest.append(h)
                    if merged.bit_count() > r:
                        continue
                    stack.append((ci + 1, (*rest, merged)))
                else:
                    if len(groups) >= smax or any(g & h for h in groups):
                        continue
                    stack.append((ci + 1, (*groups, g)))
            stack.append((ci + 1, groups))

    # -- the recursion -------------------------------------------------------------------
    def stage_of(self, groups: tuple[int, ...], merge: bool) -> Stage:
        return self.dag.stage(groups, merge)

    def stage_latency(self, groups: tuple[int, ...], merge: bool) -> float:
        key = (groups, merge)
        lat = self.latency.get(key)
        if lat is None:
            lat = self.cost.stage_latency(self.graph, self.stage_of(groups, merge))
            self.latency[key] = lat
            self.stats.stage_evaluations += 1
            self.tick()
        return lat

    def unit_latency(self, i: int) -> float:
        lat = self.unit[i]
        if lat is None:
            lat = self.unit[i] = self.stage_latency((1 << i,), False)
        return lat

    def lower_bound(self, groups: tuple[int, ...], merge: bool) -> float:
        """No stage is faster than its slowest group run alone (a merged conv than its
        largest member), up to ``slack`` for measurement noise."""
        g0 = groups[0]
        if len(groups) == 1 and not g0 & (g0 - 1):  # a single unit: its own latency, exactly
            return self.unit_latency(g0.bit_length() - 1)
        if merge:
            return max(self.unit_latency(i) for i in bits(g0)) * self.slack  # type: ignore[operator]
        gsum = self.group_sum
        best = 0.0
        for g in groups:
            t = gsum.get(g)
            if t is None:
                t = gsum[g] = sum(self.unit_latency(i) for i in bits(g))
            if t > best:
                best = t
        return best * self.slack  # type: ignore[operator]

    def solve(self, s: int) -> list[_Entry]:
        hit = self.memo.get(s)
        if hit is not None:
            return hit
        self.stats.states += 1
        cands = []
        for groups, merge in self.endings(s):
            self.stats.transitions += 1
            used = 0
            for g in groups:
                used |= g
            sub = self.solve(s & ~used)
            lb = self.lower_bound(groups, merge) if self.slack is not None else 0.0
            cands.append((sub[0].cost + lb, groups, merge, sub))
        cands.sort(key=lambda c: c[0])
        top: list[_Entry] = []
        for i, (bound, groups, merge, sub) in enumerate(cands):
            if self.slack is not None and len(top) >= self.keep and bound >= top[-1].cost:
                self.stats.pruned += len(cands) - i  # sorted by bound: every later one is pruned too
                break
            lat = self.stage_latency(groups, merge)
            h = hash((groups, merge))
            for rank, e in enumerate(sub):
                c = e.cost + lat
                if len(top) >= self.keep and c >= top[-1].cost:
                    break
                key = e.key ^ h
                if any(t.key == key for t in top):
                    continue
                top.append(_Entry(c, key, groups, merge, rank))
                top.sort(key=lambda t: t.cost)
                del top[self.keep:]
        self.memo[s] = top
        return top

    def solutions(self) -> list[tuple[float, list[tuple[tuple[int, ...], bool]]]]:
        """Up to ``keep`` (cost, stages as (group masks, merge)) of the whole part, best first."""
        full = (1 << self.dag.n) - 1
        out = []
        for rank, e in enumerate(self.solve(full)):
            stages, s, r = [], full, rank
            while s:
                entry = self.memo[s][r]
                assert entry.groups is not None  # only the sentinel entry of the empty state has none
                stages.append((entry.groups, entry.merge))
                for g in entry.groups:
                    s &= ~g
                r = entry.prev
            stages.reverse()
            out.append((e.cost, stages))
        return out

    def stages(self) -> tuple[float, list[Stage]]:
        cost, stages = self.solutions()[0]
        return cost, [self.stage_of(g, m) for g, m in stages]


def parts_of(block: Block, part_size: int, cuts: str = "live") -> list[list[Node]]:
    """The block's DP sub-problems: its marked parts, else runs of at most ``part_size`` units. ``cuts="live"``
    ends a run at the first place in reach where about the fewest tensors cross (the block's least, or one more:
    the end of a cell of a two-input cell network, which ``share_parts`` then searches once; where none is in reach,
    the fewest there) rather than every ``part_size`` units."""
    if block.parts:
        by_name = {n.name: n for n in block.nodes}
        return [[by_name[x] for x in p] for p in block.parts if p]
    nodes = block.nodes
    if cuts == "slice" or len(nodes) <= part_size:
        return [nodes[i:i + part_size] for i in range(0, len(nodes), part_size)]
    live = _crossing(block)
    floor, shortest = min(live[1:]), max(1, part_size // 5)
    parts: list[list[Node]] = []
    start = 0
    while True:
        reach = range(start + shortest, min(start + part_size, len(nodes) - shortest) + 1)
        cut = next((i for i in reach if live[i] <= floor + 1), None)
        if cut is None:
            if len(nodes) - start <= part_size:
                return parts + [nodes[start:]]
            cut = min(range(start + shortest, start + part_size + 1), key=lambda i: (live[i], -i))
        parts.append(nodes[start:cut])
        start = cut


def _crossing(block: Block) -> list[int]:
    """Per position i of the block's nodes: how many tensors made before node i (or entering) are read from i on."""
    nodes = block.nodes
    made = {block.enter: -1, **{n.name: i for i, n in enumerate(nodes)}}
    last: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for v in {v.node for t in n.inputs for v in t}:
            last[v] = i
    change = [0] * (len(nodes) + 1)  # each tensor crosses positions made+1 .. its last read
    for v, end in last.items():
        change[made.get(v, -1) + 1] += 1
        change[end + 1] -= 1
    return list(accumulate(change))[:-1]


#: a part's schedule by unit index: stages of (groups of unit indices, merge, barrier)
IndexStages = list[tuple[list[list[int]], bool, bool]]


@dataclass
class PartChoice:
    """What the search decided for one part: the chosen stages, where they came from
    ("dp", "dp#2"..., "greedy", "sequential", with "+barriers" when stages end in
    barriers), the DP's predicted cost and, after in-situ selection, every candidate's
    measured time."""

    stages: IndexStages
    source: str
    predicted_ms: float
    measured_ms: float | None = None
    timings: dict[str, float] = field(default_factory=dict)


def _to_index(nodes: list[Node], stages: list[Stage]) -> IndexStages:
    pos = {n.name: i for i, n in enumerate(nodes)}
    return [([[pos[x] for x in g] for g in st.groups], st.merge, st.barrier) for st in stages]


def _to_stages(nodes: list[Node], stages: IndexStages) -> list[Stage]:
    return [Stage([[nodes[i].name for i in g] for g in groups], merge=merge, barrier=barrier)
            for groups, merge, barrier in stages]


def _candidates(search: _PartSearch, nodes: list[Node], solutions, greedy_streams: int) -> dict[str, IndexStages]:
    """The part's candidates for in-situ timing: the DP's k best, Greedy's and
    Sequential's stages, each without barriers and with the original's barrier rule."""
    plain: dict[str, IndexStages] = {}
    for rank, (_, stages) in enumerate(solutions):
        st = [search.stage_of(g, m) for g, m in stages]
        plain["dp" if rank == 0 else f"dp#{rank + 1}"] = _to_index(nodes, st)
    plain["greedy"] = _to_index(nodes, greedy_stages(nodes, greedy_streams))
    plain["sequential"] = _to_index(nodes, sequential_stages(nodes))
    out: dict[str, IndexStages] = {}
    for name, stages in plain.items():
        flags = rule_barriers([len(g) for g, _, _ in stages])
        if flags:
            flags[-1] = False  # the part's end is joined by what follows
        out[name] = [(g, m, False) for g, m, _ in stages]
        if any(flags):
            out[name + "+barriers"] = [(g, m, b) for (g, m, _), b in zip(stages, flags)]
    return out


Timer = Callable[[list[Stage]], float]


def optimize(work: Workload, cost: CostModel, options: SearchOptions | None = None, *, screen: CostModel | None = None,
             measure_part: Timer | None = None, measure_whole: Timer | None = None) -> Schedule:
    """IOS's DP, then (with ``measure_part``) the choice of what actually runs fastest.

    Per part, the DP keeps the ``options.keep`` cheapest schedules under ``cost`` (pruning
    stages whose lower bound cannot win when ``options.prune``). Without ``measure_part`` the
    cheapest is the answer. With it, each part's candidates (the DP's k best, Greedy's and
    Sequential's stages for the part, each with and without stage barriers) are timed as
    they will run by ``measure_part(stages)`` and the fastest is kept, so the result is never
    slower than Greedy or Sequential beyond timing noise. Structurally identical parts
    (``share_parts``: NASNet's cells) are searched and selected once. ``measure_whole``
    (default ``measure_part``) times the whole model under each finalist at the end: the
    backend passes one that replays the model back to back, as the measurement protocol will,
    where parts are timed with cold weights. ``screen``: a cheaper model that plans each part
    first; parts whose DP times at most ``screen_limit`` stages are solved again under ``cost``.
    ``search_core``: "auto" (the compiled core where it is built and a part has at most 64
    units), "native" or "python" (the reference). ``search_workers``: threads that search
    distinct parts at once where the first cost model is thread-safe (0: one per CPU core);
    the result does not depend on it. :func:`ios_core.planner.plan` chooses the models and
    timers; this is the DP alone.
    """
    o = options or SearchOptions()
    o.check()
    if o.schedule not in VARIANTS:
        raise OptionError(f"schedule={o.schedule!r} is not searched by the DP; choose one of: {', '.join(VARIANTS)}")
    graph = work.graph
    t0 = time.perf_counter()
    search = _PartsSearch(graph, o, cost, screen, keep=o.keep if measure_part else 1)
    choices, pending = search.run(with_candidates=measure_part is not None)
    stats = search.stats
    stats.search_s = time.perf_counter() - t0
    dp_blocks = _assemble(graph, search.all_parts, [c.stages for c in choices])
    blocks = dp_blocks
    used = set(search.natives.values())
    extra: dict = {"predicted_ms": sum(c.predicted_ms for c in choices),
                   "search_core": "mixed" if len(used) > 1 else "compiled" if True in used else "python"}
    if measure_part is not None:
        final, more = _choose_in_situ(graph, o, search.all_parts, choices, pending, dp_blocks, measure_part,
                                      measure_whole or measure_part)
        blocks = more.pop("blocks")
        extra.update(more, select_s=round(time.perf_counter() - t0 - stats.search_s, 3))
    stats.cost = dict(cost.stats())
    opts = {"r": o.r, "s": o.s, "part_size": o.part_size, "ending": o.ending,
            "cost_model": getattr(cost, "name", "custom"), "keep": o.keep, "selected": measure_part is not None}
    sched = Schedule(graph.name, graph.hash(), blocks, algorithm=o.schedule, batch=work.batch,
                     device=work.device_name, precision=work.precision, options=opts,
                     stats={**stats.as_dict(), **extra})
    sched.check(graph)
    return sched


Pending = list[tuple[int, str, list[Node], dict[str, IndexStages]]]


class _PartsSearch:
    """The DP over every part of a graph: distinct parts searched once (in threads where the
    compiled core and the cost model allow), a screened part solved again under the measured
    model, each part's choice with its in-situ candidates."""

    def __init__(self, graph: Graph, o: SearchOptions, cost: CostModel, screen: CostModel | None, keep: int):
        self.graph, self.o, self.cost, self.screen = graph, o, cost, screen
        self.merge, self.parallel = VARIANTS[o.schedule]
        self.stats = SearchStats()
        self.all_parts = [(bi, p) for bi, b in enumerate(graph.blocks)
                          for p in parts_of(b, o.part_size, o.part_cuts)]
        self.sigs = [signature(graph, [nodes]) if o.share_parts else "" for _, nodes in self.all_parts]
        self.first: dict[str, int] = {}
        self.unique = [i for i, sig in enumerate(self.sigs) if not sig or self.first.setdefault(sig, i) == i]
        self.dags = {i: PartDAG(graph, self.all_parts[i][1]) for i in self.unique}
        self.natives = {i: native.use_native(o.search_core, self.dags[i].n) for i in self.unique}
        self.opts = _SearchOpts(keep=keep, slack=0.9 if o.prune else None)
        self.first_cost = screen if screen is not None else cost
        self.bar, self.advance = _search_progress(graph, o.schedule, self.all_parts, self.unique, self.dags, o.r,
                                                  screen is not None, o.progress, any(self.natives.values()))
        self.lock = threading.Lock()

    def tick(self) -> None:
        c = self.cost.stats()
        self.bar.set(timed=int(c.get("measurements", 0)), cached=int(c.get("cache_hits", 0)))

    def search(self, i: int, model: CostModel, part_stats: SearchStats, pass_: int):
        o = self.o
        args = (self.graph, self.dags[i], model, self.merge, self.parallel, o.r, o.s, o.ending, part_stats, self.tick)
        if self.natives[i]:
            return native.NativePartSearch(*args, **self.opts, lock=self.lock,
                                           on_work=lambda w: self.advance(i, pass_, w))
        return _PartSearch(*args, **self.opts)

    def first_pass(self, i: int):
        part_stats = SearchStats()  # per part: parts may be searched in parallel threads
        found = self.search(i, self.first_cost, part_stats, 0)
        return found, found.solutions(), part_stats

    def _in_threads(self) -> dict[int, tuple]:
        """First passes of distinct parts at once: the compiled core releases the GIL."""
        done: dict[int, tuple] = {}
        threads = _workers(self.o.search_workers, self.first_cost, [i for i in self.unique if self.natives[i]])
        if threads > 1:
            with ThreadPoolExecutor(threads) as pool:
                results = pool.map(lambda i: self.first_pass(i) if self.natives[i] else None, self.unique)
                for i, res in zip(self.unique, results):
                    if res is not None:
                        done[i] = res
                        self.advance(i, 0, None)
        return done

    def _solve(self, i: int, done: dict[int, tuple]):
        """Part ``i``'s search and solutions: the first pass's, or (screened) the measured model's."""
        if i not in done:
            done[i] = self.first_pass(i)
            self.advance(i, 0, None)
        found, sols, part_stats = done.pop(i)
        stats = self.stats
        if self.screen is None or part_stats.stage_evaluations > self.o.screen_limit:  # the first answer stands
            stats.parts_screened += int(self.screen is not None)
            for k in ("states", "transitions", "stage_evaluations", "pruned"):
                setattr(stats, k, getattr(stats, k) + getattr(part_stats, k))
        else:  # screened: solve again with the measured model
            if hasattr(self.cost, "prefetch"):  # time the stages the screen looked at in batches first
                self.cost.prefetch(self.graph, [found.stage_of(g, m) for g, m in found.latency],
                                   progress=lambda n: self.tick())
            found = self.search(i, self.cost, stats, 1)
            sols = found.solutions()
        self.advance(i, 1, None)  # a no-op without a screen
        return found, sols

    def run(self, with_candidates: bool) -> tuple[list[PartChoice], Pending]:
        """Each part's DP choice (shared parts share one), and the candidates to time in situ."""
        choices: list[PartChoice] = []
        solved: dict[str, PartChoice] = {}
        pending: Pending = []
        try:
            done = self._in_threads()
            for i, ((_, nodes), sig) in enumerate(zip(self.all_parts, self.sigs)):
                if sig and self.first[sig] != i:
                    self.stats.shared_parts += 1
                    choices.append(solved[sig])
                else:
                    found, sols = self._solve(i, done)
                    best = [found.stage_of(g, m) for g, m in sols[0][1]]
                    choice = PartChoice(_to_index(nodes, best), "dp", sols[0][0])
                    choices.append(choice)
                    if sig:
                        solved[sig] = choice
                    if with_candidates:
                        cands = _candidates(found, nodes, sols, self.o.greedy_streams)
                        pending.append((len(choices) - 1, sig, nodes, cands))
                self.stats.parts += 1
                self.tick()
        finally:
            self.bar.close()
        return choices, pending


def _choose_in_situ(graph: Graph, o: SearchOptions, all_parts, choices: list[PartChoice], pending: Pending,
                    dp_blocks: list[list[Stage]], measure_part: Timer, measure_whole: Timer) -> tuple[str, dict]:
    """Each part's candidates timed in situ, then the whole model under each finalist; the
    final schedule's name and blocks with the selection's statistics."""
    _select(graph, o.schedule, choices, pending, measure_part, o.progress)
    whole = {"selected": _assemble(graph, all_parts, [c.stages for c in choices]), "dp": dp_blocks,
             "greedy": [greedy_stages(b.nodes, o.greedy_streams) for b in graph.blocks],
             "sequential": [sequential_stages(b.nodes) for b in graph.blocks]}
    final, timings = _final(graph, o.schedule, whole, measure_whole, o.progress)
    selection = {"final": final, "whole_ms": timings,
                 "parts": [{"block": bi, "first": nodes[0].name, "units": len(nodes), "chosen": c.source,
                            "predicted_ms": c.predicted_ms, "timings_ms": c.timings}
                           for (bi, nodes), c in zip(all_parts, choices)]}
    return final, {"blocks": whole[final], **_selection_stats(choices), "insitu_ms": timings[final],
                   **{f"whole_{k}_ms": v for k, v in timings.items()}, "selection": selection}


def _workers(workers: int, model: CostModel, natives: list[int]) -> int:
    """Threads for the first search of distinct parts: only where the compiled core runs them
    and the cost model may be asked from several threads (the analytic model; the others
    time on the GPU)."""
    if len(natives) < 2 or not getattr(model, "thread_safe", False):
        return 1
    return max(1, min(workers or (os.cpu_count() or 1), len(natives)))


def _search_progress(graph: Graph, variant: str, all_parts, unique: list[int], dags: dict[int, PartDAG], r: int,
                      screened: bool, enabled: bool, compiled: bool):
    """The search's progress bar. Where the compiled core can size each part's DP up front,
    the bar counts estimated work (per state: its sinks and the root picks its parallel
    endings walk), so the time left follows the work left, not the share of units done;
    otherwise it counts units. Returns the bar and ``advance(part, pass, work or None)``
    (``None``: that pass of the part is done). With a screen every part has two passes
    (screen, then measured), the second skipped where the screen's answer is kept."""
    passes = 2 if screened else 1
    sized = {i: native.part_work(dags[i], r) if enabled else None for i in unique}  # no sizing for a hidden bar
    exact = all(v is not None for v in sized.values())
    weight = {i: sized[i][1] if exact else float(len(all_parts[i][1])) for i in unique}  # type: ignore[index]
    states = sum(v[0] for v in sized.values() if v is not None)
    core = "compiled core" if compiled else "python core"
    desc = f"ios {variant} {graph.name}: search ({core}{f', {states:,} states' if exact else ''})"
    bar = Progress(desc, passes * sum(weight.values()), "" if exact else "units", enabled=enabled, counts=not exact)
    got: dict[tuple[int, int], float] = {}
    lock = threading.Lock()

    def advance(i: int, pass_: int, work: float | None) -> None:
        with lock:
            if pass_ >= passes:
                return
            now = weight[i] if work is None or not exact else min(work, weight[i])
            before = got.get((i, pass_), 0.0)
            if now > before:
                got[(i, pass_)] = now
                bar.update(now - before)
    return bar, advance


def _assemble(graph: Graph, all_parts, stages: list[IndexStages]) -> list[list[Stage]]:
    blocks: list[list[Stage]] = [[] for _ in graph.blocks]
    for (bi, nodes), st in zip(all_parts, stages):
        blocks[bi].extend(_to_stages(nodes, st))
    return blocks


def _final(graph: Graph, variant: str, whole: dict[str, list[list[Stage]]], measure_part,
           progress: bool) -> tuple[str, dict[str, float]]:
    """Time the whole model under each finalist (the per-part choices put together, the
    DP's own answer, Greedy, Sequential): parts timed alone miss how consecutive parts
    overlap (a NASNet cell starts on its older input while the previous cell finishes),
    so the model as a whole has the last word."""
    timings: dict[str, float] = {}
    seen: dict[str, float] = {}
    with Progress(f"ios {variant} {graph.name}: time the whole model", len(whole), "schedules",
                  enabled=progress) as bar:
        for name, blocks in whole.items():
            flat = [st for b in blocks for st in b]
            key = repr([(st.groups, st.merge, st.barrier) for st in flat])
            if key not in seen:
                seen[key] = measure_part(flat)
            timings[name] = seen[key]
            bar.update(1)
    return min(timings, key=lambda k: (timings[k], k != "selected")), timings


def _select(graph: Graph, variant: str, choices: list[PartChoice], pending, measure_part, progress: bool) -> None:
    """Time every candidate of every distinct part in situ; keep the fastest."""
    total = sum(len(c) for _, _, _, c in pending)
    with Progress(f"ios {variant} {graph.name}: time candidates", total, "candidates", enabled=progress) as bar:
        for idx, _sig, nodes, cands in pending:
            choice = choices[idx]  # shared parts hold the same object, so they follow
            timed: dict[str, float] = {}  # equal candidates (Greedy's stages found by the DP...) are timed once
            for label, stages in cands.items():
                key = repr(stages)
                if key not in timed:
                    timed[key] = measure_part(_to_stages(nodes, stages))
                choice.timings[label] = timed[key]
                bar.update(1)
            label = min(choice.timings, key=lambda k: (choice.timings[k], k != "dp"))
            choice.stages, choice.source = cands[label], label
            choice.measured_ms = choice.timings[label]


def _selection_stats(choices: list[PartChoice]) -> dict[str, float]:
    """Sums over parts: what was chosen, and what the DP's own answer, Greedy and
    Sequential measured in situ (the per-model comparison the choice rests on)."""
    out: dict[str, float] = {"insitu_parts_ms": sum(c.measured_ms or 0.0 for c in choices)}
    for name in ("dp", "greedy", "sequential"):
        out[f"insitu_{name}_ms"] = sum(min(v for k, v in c.timings.items() if k.split("+")[0] == name)
                                       for c in choices if c.timings)
    won = [c.source.split("+")[0].split("#")[0] for c in choices]
    for name in ("dp", "greedy", "sequential"):
        out[f"parts_won_{name}"] = float(won.count(name))
    out["parts_with_barriers"] = float(sum("+barriers" in c.source for c in choices))
    return out
