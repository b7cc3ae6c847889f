"""Running stages of units with torch on a device.

A :class:`StreamProgram` is a static plan made once from the stages: which stream runs
each group, which cross-stream edges need an event, where barriers go. Modes:

* ``edges`` (CUDA): a unit waits only for the events of the producers it reads that
  ran on another stream; a stage whose ``barriers`` flag is set ends in a join/fork of
  all streams (the search decides per stage). Capturable in one CUDA graph.
* ``stages`` (CUDA): a barrier at every stage boundary that touches a multi-group
  stage (the original's rule, but with events, so capturable).
* ``faithful`` (CUDA): the original runtime's rule with host-blocking
  ``torch.cuda.synchronize()`` barriers; eager only.
* ``threads`` (CPU): the groups of a multi-group stage run concurrently on a thread pool.

Streams follow producer chains: a group goes to the stream its first unit's producer ran
on when that stream is free in the stage and the producer is the last unit issued there,
so a chain split over stages needs no event;
otherwise to a stream whose earlier work it depends on anyway (no false dependency).
Groups are issued longest-remaining-path first (``priority``), so the critical chain's
kernels enter the device queue before the side branches' (Nimble, Opara). Side streams
come from :mod:`.streams` and are distinct by construction.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import torch

from ..ir import Node
from ..schedule.schedule import rule_barriers
from .streams import check_distinct, side_streams

MODES = ("edges", "stages", "faithful", "threads")


class StreamProgram:
    def __init__(self, stages: list[list[list[Node]]], ops, mode: str = "edges",
                 barriers: list[bool] | None = None, priority: dict[str, float] | None = None,
                 follow_chains: bool = True):
        if mode not in MODES:
            raise ValueError(f"unknown runtime mode {mode!r}; choose one of: {', '.join(MODES)}")
        self.stages, self.ops, self.mode = stages, ops, mode
        self.width = max((len(st) for st in stages), default=1)
        widths = [len(st) for st in stages]
        if mode in ("stages", "faithful"):
            self.barriers = rule_barriers(widths)
        else:
            self.barriers = list(barriers) if barriers is not None else [False] * len(stages)
            if len(self.barriers) != len(stages):
                raise ValueError(f"{len(self.barriers)} barrier flags for {len(stages)} stages")
        self.pool = ThreadPoolExecutor(self.width) if mode == "threads" and self.width > 1 else None
        self.streams_needed = self.width - 1 if mode in ("edges", "stages", "faithful") else 0
        self._side: list | None = None
        self.priority = priority or {}
        self.follow_chains = follow_chains
        if mode in ("edges", "stages"):
            self._plan()

    # -- the static plan --------------------------------------------------------------
    def _assign(self) -> list[list[tuple[int, list[Node]]]]:
        """Per stage, (stream, group) in issue order.

        A stream runs its work in order, so putting a group behind work it does not
        depend on adds a false dependency. Each group (critical first) takes, among the
        streams not yet used in its stage: the stream whose last unit is the group's
        producer (the chain continues, no event needed); else one whose last unit is an
        ancestor of the group anyway (or an unused stream); else the stream whose last
        work was issued longest ago."""
        index = {name: i for i, name in enumerate(n.name for st in self.stages for g in st for n in g)}
        anc: dict[str, int] = {}  # ancestors inside the program, as a bit set
        stream_of: dict[str, int] = {}
        tail: list[str | None] = [None] * self.width
        tail_stage = [-1] * self.width
        out = []
        for si, st in enumerate(self.stages):
            order = sorted(st, key=lambda g: -self.priority.get(g[0].name, 0.0))
            free = set(range(self.width if self.follow_chains else len(st)))
            placed: list[tuple[int, list[Node]]] = []
            for g in order:
                for n in g:
                    a = 0
                    for t in n.inputs:
                        for v in t:
                            if v.node in index:
                                a |= (1 << index[v.node]) | anc.get(v.node, 0)
                    anc[n.name] = a
                first = g[0]
                prods = [v.node for t in first.inputs for v in t if v.node in stream_of]
                j = None
                if self.follow_chains:
                    j = next((stream_of[p] for p in prods if stream_of[p] in free and tail[stream_of[p]] == p), None)
                    if j is None:
                        j = next((k for k in sorted(free)
                                  if tail[k] is None or anc[first.name] >> index[cast(str, tail[k])] & 1), None)
                    if j is None:
                        j = min(free, key=lambda k: (tail_stage[k], k))
                else:
                    j = min(free)
                free.discard(j)
                placed.append((j, g))
                for n in g:
                    stream_of[n.name] = j
                tail[j], tail_stage[j] = g[-1].name, si
            out.append(placed)
        return out

    def _plan(self) -> None:
        """Flatten the schedule into instructions: (op, stream index, payload)."""
        placed = self._assign()
        stage_of = {n.name: i for i, st in enumerate(self.stages) for g in st for n in g}
        stream_of = {n.name: j for pl in placed for j, g in pl for n in g}
        waits: dict[str, list[str]] = {}
        recorded: set[str] = set()
        last_barrier = -1
        for i, pl in enumerate(placed):
            for j, g in pl:
                waited: set[str] = set()
                for n in g:
                    ws = []
                    for t in n.inputs:
                        for v in t:
                            p = v.node
                            if p in stream_of and stream_of[p] != j and stage_of[p] > last_barrier and p not in waited:
                                ws.append(p)
                                waited.add(p)
                    waits[n.name] = ws
                    recorded.update(ws)
            if self.barriers[i]:
                last_barrier = i
        self.recorded = recorded
        code: list[tuple[str, int, Any]] = []  # payload: a Node, a unit name, stream indices or None
        forked: set[int] = set()
        for i, pl in enumerate(placed):
            for j, g in pl:
                if j and j not in forked:
                    code.append(("fork", j, None))
                    forked.add(j)
                for n in g:
                    for p in waits[n.name]:
                        code.append(("wait", j, p))
                    code.append(("call", j, n))
                    if n.name in recorded:
                        code.append(("record", j, n.name))
            if self.barriers[i] and i + 1 < len(placed) and self.width > 1:
                if forked:
                    code.append(("join", 0, sorted(forked)))
                    forked = set()
                code.append(("refork", 0, None))  # after the main stream's own work, even with nothing to join
        if forked:
            code.append(("join", 0, sorted(forked)))
        self.code = code
        self.stream_index = stream_of

    # -- running ------------------------------------------------------------------------
    @property
    def side(self) -> list:
        """The side streams (made on first use, so a plan can be built and checked without a GPU)."""
        if self._side is None:
            self._side = side_streams(self.streams_needed) if self.streams_needed else []
            self.events = {name: torch.cuda.Event() for name in getattr(self, "recorded", ())}
            self.fork_event = torch.cuda.Event() if self._side else None
            self.join_events = [torch.cuda.Event() for _ in self._side]
        return self._side

    def run(self, env: dict) -> dict:
        if self.mode == "threads":
            return self._run_threads(env)
        if self.mode == "faithful":
            return self._run_faithful(env)
        return self._run_streams(env)

    def _group(self, group: list[Node], env: dict) -> None:
        call = self.ops.call
        for n in group:
            env[n.name] = call(n, env)

    def _run_threads(self, env: dict) -> dict:
        for st in self.stages:
            if len(st) == 1 or self.pool is None:
                for group in st:
                    self._group(group, env)
            else:
                for f in [self.pool.submit(self._group, g, env) for g in st]:
                    f.result()
        return env

    def _run_faithful(self, env: dict) -> dict:
        main = torch.cuda.current_stream()
        streams = [main, *self.side]
        if self.stages and len(self.stages[0]) > 1:
            torch.cuda.synchronize()
        for i, st in enumerate(self.stages):
            for j, group in enumerate(st):
                with torch.cuda.stream(streams[j]):
                    self._group(group, env)
            if self.barriers[i]:
                torch.cuda.synchronize()
        return env

    def _run_streams(self, env: dict) -> dict:
        main = torch.cuda.current_stream()
        side = self.side
        streams = [main, *side]
        if side:
            check_distinct(side, main)
            assert self.fork_event is not None  # made with the side streams
            self.fork_event.record(main)
        call, events = self.ops.call, self.events
        for op, j, x in self.code:
            if op == "call":
                if j:
                    with torch.cuda.stream(streams[j]):
                        env[x.name] = call(x, env)
                else:
                    env[x.name] = call(x, env)
            elif op == "wait":
                streams[j].wait_event(events[x])
            elif op == "record":
                events[x].record(streams[j])
            elif op == "fork":
                streams[j].wait_event(self.fork_event)
            elif op == "join":
                for k in x:
                    ev = self.join_events[k - 1]
                    ev.record(streams[k])
                    main.wait_event(ev)
            elif op == "refork":  # planned only with side streams, so the fork event exists
                assert self.fork_event is not None
                self.fork_event.record(main)
        return env


def remaining_path(graph) -> dict[str, float]:
    """Per unit, the multiply-accumulates on its longest path to the graph's output (plus a
    per-unit constant for launch cost): the issue priority of its group."""
    users: dict[str, list[str]] = {}
    order = [n for n in graph.nodes()]
    for n in order:
        for t in n.inputs:
            for v in t:
                users.setdefault(v.node, []).append(n.name)
    out: dict[str, float] = {}
    for n in reversed(order):
        try:
            own = float(n.macs(graph.input_shape_of(n))) + 1e5
        except Exception:  # the placeholder has no input shape
            own = 0.0
        out[n.name] = own + max((out[u] for u in users.get(n.name, [])), default=0.0)
    return out
