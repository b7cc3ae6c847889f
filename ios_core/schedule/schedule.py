"""Schedules: per block, a list of stages; a stage is a list of groups run concurrently
(one stream each); a group is a list of node names run one after another.

A *merge* stage holds one group of convolutions that read the same tensor; they run as
one wider convolution (:mod:`ios_core.schedule.merge` rewrites the graph). Unlike the
original, the merge is kept in the schedule (not only as a rewritten graph), so a
schedule file is readable and applies to the graph it was made for, which its hash
identifies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ir import Graph, GraphError

FORMAT = "ios_core.schedule/1"


class ScheduleError(GraphError):
    """A schedule is malformed or made for another graph; the message says which."""


@dataclass
class Stage:
    groups: list[list[str]]
    merge: bool = False
    barrier: bool = False  # the event-edge runtime joins all streams after this stage


    @property
    def names(self) -> list[str]:
        return [n for g in self.groups for n in g]

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"merge": self.groups[0]} if self.merge else {"groups": self.groups}
        if self.barrier:
            d["barrier"] = True
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Stage:
        barrier = bool(d.get("barrier", False))
        if "merge" in d:
            return cls([list(map(str, d["merge"]))], merge=True, barrier=barrier)
        return cls([list(map(str, g)) for g in d["groups"]], barrier=barrier)

    def __str__(self) -> str:
        end = " ||" if self.barrier else ""
        if self.merge:
            return "Merge(" + ", ".join(self.groups[0]) + ")" + end
        if len(self.groups) == 1:
            return "Seq(" + ", ".join(self.groups[0]) + ")" + end
        return "Parallel(" + " | ".join(", ".join(g) for g in self.groups) + ")" + end


@dataclass
class Schedule:
    """Stages per block, plus what the schedule was made for (graph hash, batch, device,
    precision, optimizer options) and what the optimizer found (latency, search stats)."""

    graph_name: str
    graph_hash: str
    blocks: list[list[Stage]]
    algorithm: str = "sequential"
    batch: int = 1
    device: str = ""
    precision: str = "fp32"
    options: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    # -- queries -------------------------------------------------------------------
    def stages(self) -> list[Stage]:
        return [s for b in self.blocks for s in b]

    def num_stages(self) -> int:
        return sum(len(b) for b in self.blocks)

    def max_groups(self) -> int:
        return max(len(s.groups) for s in self.stages())

    def check(self, graph: Graph) -> None:
        """Raise ScheduleError unless this schedule covers exactly ``graph``'s units in a
        dependency-respecting order."""
        if self.graph_hash != graph.hash():
            raise ScheduleError(f"the schedule was made for graph {self.graph_name!r} (hash {self.graph_hash}), "
                                f"not for {graph.name!r} (hash {graph.hash()}); optimize this graph instead")
        if len(self.blocks) != len(graph.blocks):
            raise ScheduleError(f"the schedule has {len(self.blocks)} blocks but the graph has {len(graph.blocks)}")
        done = {graph.input.name}
        for bi, (stages, block) in enumerate(zip(self.blocks, graph.blocks)):
            want = {n.name for n in block.nodes}
            got = [n for s in stages for n in s.names]
            if sorted(got) != sorted(want):
                extra, missing = set(got) - want, want - set(got)
                raise ScheduleError(f"block {bi}: the schedule's nodes differ from the graph's "
                                    f"(unknown: {sorted(extra)[:5]}, missing: {sorted(missing)[:5]}, "
                                    f"or a node appears twice)")
            for si, stage in enumerate(stages):
                inside = set(stage.names)
                for grp in stage.groups:
                    seen = set()
                    for name in grp:
                        for t in graph.node(name).inputs:
                            for v in t:
                                ok = v.node in done or (v.node in seen and not stage.merge)
                                if not ok:
                                    where = "in another group of the same stage" if v.node in inside else "later"
                                    raise ScheduleError(f"block {bi} stage {si}: node {name} reads {v.node}, "
                                                        f"which runs {where}")
                        seen.add(name)
                done |= inside
            if stages[-1].names[-1] != block.exit.name:
                raise ScheduleError(f"block {bi}: the exit node {block.exit.name} must end the last stage")

    # -- JSON ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "graph": self.graph_name, "graph_hash": self.graph_hash,
                "algorithm": self.algorithm, "batch": self.batch, "device": self.device,
                "precision": self.precision, "options": self.options, "stats": self.stats,
                "blocks": [[s.to_json() for s in b] for b in self.blocks]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schedule:
        if not isinstance(d, dict):
            raise ScheduleError(f"not an ios_core schedule: the file holds a JSON {type(d).__name__}, "
                                f"not an object with \"format\": {FORMAT!r}")
        if d.get("format") != FORMAT:
            raise ScheduleError(f"not an ios_core schedule (format {d.get('format')!r}, expected {FORMAT!r})")
        try:
            return cls(graph_name=d["graph"], graph_hash=d["graph_hash"],
                       blocks=[[Stage.from_json(s) for s in b] for b in d["blocks"]],
                       algorithm=d.get("algorithm", ""), batch=int(d.get("batch", 1)), device=d.get("device", ""),
                       precision=d.get("precision", "fp32"), options=d.get("options", {}), stats=d.get("stats", {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a field of the wrong JSON type
            raise ScheduleError(f"malformed schedule: {type(exc).__name__}: {exc}") from None

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
        return text

    @classmethod
    def load(cls, path: str | Path) -> Schedule:
        p = Path(path)
        if not p.is_file():
            raise ScheduleError(f"schedule file {str(p)!r} does not exist")
        try:
            data = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ScheduleError(f"schedule file {str(p)!r} is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def __str__(self) -> str:
        lines = [f"Schedule {self.algorithm} for {self.graph_name} (hash {self.graph_hash}, batch {self.batch}, "
                 f"{self.device or 'any device'}, {self.precision}): {self.num_stages()} stages"]
        for bi, b in enumerate(self.blocks):
            lines.append(f" block {bi}:")
            lines.extend(f"  {s}" for s in b)
        return "\n".join(lines)


def sequential(graph: Graph) -> Schedule:
    """One stage per unit in construction order (the original's sequential schedule)."""
    blocks = [sequential_stages(b.nodes) for b in graph.blocks]
    return Schedule(graph.name, graph.hash(), blocks, algorithm="sequential")


def sequential_stages(nodes: list) -> list[Stage]:
    return [Stage([[n.name]]) for n in nodes]


def greedy(graph: Graph, max_streams: int = 10) -> Schedule:
    """Wavefront levelling: each stage runs every ready unit (one per group), at most
    ``max_streams`` of them; the rest wait for the next stage. In-degrees count value
    references, as the original did."""
    blocks = [greedy_stages(b.nodes, max_streams) for b in graph.blocks]
    return Schedule(graph.name, graph.hash(), blocks, algorithm="greedy", options={"max_streams": max_streams})


def greedy_stages(nodes: list, max_streams: int = 10) -> list[Stage]:
    """Greedy's stages for a run of units (a block or a part of one); producers outside
    ``nodes`` count as done."""
    names = [n.name for n in nodes]
    inside = set(names)
    indeg = {n.name: sum(1 for t in n.inputs for v in t if v.node in inside) for n in nodes}
    users: dict[str, list[str]] = {x: [] for x in names}
    for n in nodes:
        for t in n.inputs:
            for v in t:
                if v.node in inside:
                    users[v.node].append(n.name)
    ready = [x for x in names if indeg[x] == 0]
    stages = []
    while ready:
        now, ready = ready[:max_streams], ready[max_streams:]
        stages.append(Stage([[x] for x in now]))
        for x in now:
            for u in users[x]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
    return stages


def rule_barriers(widths: list[int]) -> list[bool]:
    """The original's rule: a barrier after stage i unless it and the next are single-group."""
    return [i + 1 < len(widths) and (widths[i] > 1 or widths[i + 1] > 1) for i in range(len(widths))]
