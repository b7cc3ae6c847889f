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

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ..ir import Block, Graph, Node
from .merge import merge_key, merged_geometry
from .schedule import Schedule, Stage

VARIANTS = {"ios-merge": (True, False), "ios-parallel": (False, True), "ios-both": (True, True)}
ENDINGS = ("corrected", "original")


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
    cost: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, float]:
        return {"states": self.states, "transitions": self.transitions, "stage_evaluations": self.stage_evaluations,
                "search_s": round(self.search_s, 3), "parts": self.parts, **self.cost}


def popcount(x: int) -> int:
    return bin(x).count("1")


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


class _PartSearch:
    def __init__(self, graph: Graph, dag: PartDAG, cost: CostModel, merge: bool, parallel: bool,
                 r: int, s: int, ending: str, stats: SearchStats, tick):
        self.graph, self.dag, self.cost = graph, dag, cost
        self.merge, self.parallel, self.r, self.s, self.ending = merge, parallel, r, s, ending
        self.stats, self.tick = stats, tick
        self.memo: dict[int, tuple[float, tuple | None]] = {0: (0.0, None)}
        self.latency: dict[tuple, float] = {}

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
                if dag.keys[i] is not None:
                    by_key.setdefault(dag.keys[i], []).append(i)
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

        def rec(ci: int, groups: list[int]) -> Iterator[list[int]]:
            if ci == len(cands):
                if groups and len(groups) <= smax:
                    yield groups
                return
            yield from rec(ci + 1, groups)
            for g in cands[ci]:
                if corrected:
                    merged, rest = g, []
                    for h in groups:
                        if h & merged:
                            merged |= h
                        else:
                            rest.append(h)
                    if popcount(merged) > r:
                        continue
                    yield from rec(ci + 1, rest + [merged])
                else:
                    if len(groups) >= smax or any(g & h for h in groups):
                        continue
                    yield from rec(ci + 1, groups + [g])
        yield from rec(0, [])

    # -- the recursion -------------------------------------------------------------------
    def stage_of(self, groups: tuple[int, ...], merge: bool) -> Stage:
        names = [[self.dag.nodes[i].name for i in bits(g)] for g in sorted(groups, key=lambda g: (g & -g))]
        return Stage(names, merge=merge and popcount(groups[0]) > 1)

    def stage_latency(self, groups: tuple[int, ...], merge: bool) -> float:
        key = (groups, merge)
        lat = self.latency.get(key)
        if lat is None:
            lat = self.cost.stage_latency(self.graph, self.stage_of(groups, merge))
            self.latency[key] = lat
            self.stats.stage_evaluations += 1
            self.tick()
        return lat

    def solve(self, s: int) -> float:
        hit = self.memo.get(s)
        if hit is not None:
            return hit[0]
        self.stats.states += 1
        best, arg = float("inf"), None
        for groups, merge in self.endings(s):
            self.stats.transitions += 1
            used = 0
            for g in groups:
                used |= g
            c = self.solve(s & ~used) + self.stage_latency(groups, merge)
            if c < best:
                best, arg = c, (groups, merge)
        self.memo[s] = (best, arg)
        return best

    def stages(self) -> tuple[float, list[Stage]]:
        full = (1 << self.dag.n) - 1
        total = self.solve(full)
        out, s = [], full
        while s:
            groups, merge = self.memo[s][1]  # type: ignore[misc]
            out.append(self.stage_of(groups, merge))
            for g in groups:
                s &= ~g
        out.reverse()
        return total, out


def parts_of(block: Block, part_size: int) -> list[list[Node]]:
    if block.parts:
        by_name = {n.name: n for n in block.nodes}
        return [[by_name[x] for x in p] for p in block.parts]
    return [block.nodes[i:i + part_size] for i in range(0, len(block.nodes), part_size)]


def optimize(graph: Graph, cost: CostModel, variant: str = "ios-both", r: int = 3, s: int = 8,
             part_size: int = 50, ending: str = "corrected", progress: bool = False,
             batch: int = 1, device: str = "", precision: str = "fp32") -> Schedule:
    """Find the schedule of least total stage latency under ``cost`` (IOS's DP)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of: {', '.join(VARIANTS)}")
    if ending not in ENDINGS:
        raise ValueError(f"unknown ending enumeration {ending!r}; choose one of: {', '.join(ENDINGS)}")
    if r < 1 or s < 1 or part_size < 1:
        raise ValueError(f"r, s and part_size must be >= 1 (got r={r}, s={s}, part_size={part_size})")
    merge, parallel = VARIANTS[variant]
    stats = SearchStats()
    t0 = time.perf_counter()
    all_parts = [(bi, p) for bi, b in enumerate(graph.blocks) for p in parts_of(b, part_size)]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(all_parts), desc=f"{variant} {graph.name}", unit="part", leave=False, dynamic_ncols=True,
                   disable=None)  # silent when stderr is not a terminal
    last = [0.0]

    def tick() -> None:
        if bar is not None and time.perf_counter() - last[0] > 0.5:
            last[0] = time.perf_counter()
            c = cost.stats()
            bar.set_postfix(states=stats.states, measured=int(c.get("measurements", 0)),
                            cache_hits=int(c.get("cache_hits", 0)), refresh=True)

    blocks: list[list[Stage]] = [[] for _ in graph.blocks]
    total = 0.0
    try:
        for bi, nodes in all_parts:
            search = _PartSearch(graph, PartDAG(graph, nodes), cost, merge, parallel, r, s, ending, stats, tick)
            lat, stages = search.stages()
            total += lat
            blocks[bi].extend(stages)
            stats.parts += 1
            if bar is not None:
                bar.update(1)
                tick()
    finally:
        if bar is not None:
            bar.close()
    stats.search_s = time.perf_counter() - t0
    stats.cost = dict(cost.stats())
    sched = Schedule(graph.name, graph.hash(), blocks, algorithm=variant, batch=batch, device=device,
                     precision=precision, options={"r": r, "s": s, "part_size": part_size, "ending": ending,
                                                   "cost_model": cost.name},
                     stats={**stats.as_dict(), "predicted_ms": total})
    sched.check(graph)
    return sched
