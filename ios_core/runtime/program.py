"""Running stages of units with torch on a device.

A :class:`StreamProgram` is a static plan made once from the stages: which stream runs
each group, which cross-stream edges need an event, where barriers go. Modes:

* ``edges`` (CUDA): group j of a stage runs on stream j; a unit waits only for the
  events of the producers it reads that ran on another stream (no stage barriers).
  Capturable in one CUDA graph.
* ``stages`` (CUDA): a join/fork barrier of all streams at every stage boundary that
  touches a multi-group stage (the original's rule, but with events, so capturable).
* ``faithful`` (CUDA): the original runtime's rule with host-blocking
  ``torch.cuda.synchronize()`` barriers; eager only.
* ``threads`` (CPU): the groups of a multi-group stage run concurrently on a thread pool.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from ..ir import Node

MODES = ("edges", "stages", "faithful", "threads")


class StreamProgram:
    def __init__(self, stages: list[list[list[Node]]], ops, mode: str = "edges",
                 streams: list | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown runtime mode {mode!r}; choose one of: {', '.join(MODES)}")
        self.stages, self.ops, self.mode = stages, ops, mode
        self.width = max((len(st) for st in stages), default=1)
        self.pool = ThreadPoolExecutor(self.width) if mode == "threads" and self.width > 1 else None
        self.side = []
        if mode in ("edges", "stages", "faithful"):
            self.side = streams[: self.width - 1] if streams is not None else \
                [torch.cuda.Stream() for _ in range(self.width - 1)]
        self._plan()

    # -- the static plan --------------------------------------------------------------
    def _plan(self) -> None:
        stream_of: dict[str, int] = {}
        for st in self.stages:
            for j, group in enumerate(st):
                for n in group:
                    stream_of[n.name] = j
        self.stream_of = stream_of
        self.recorded: set[str] = set()  # units whose completion another stream waits for
        self.waits: dict[str, list[str]] = {}
        for st in self.stages:
            for j, group in enumerate(st):
                for n in group:
                    ws = []
                    for t in n.inputs:
                        for v in t:
                            pj = stream_of.get(v.node, 0)  # external inputs: on the main stream
                            if pj != j and v.node in stream_of and v.node not in ws:
                                ws.append(v.node)
                    self.waits[n.name] = ws
                    self.recorded.update(ws)
        if self.mode == "edges":
            self.events = {name: torch.cuda.Event() for name in self.recorded}
        self.fork_event = torch.cuda.Event() if self.side else None
        self.join_events = [torch.cuda.Event() for _ in self.side]

    def barrier_after(self, i: int) -> bool:
        """The original's rule: none between two single-group stages, else a barrier."""
        return i + 1 < len(self.stages) and (len(self.stages[i]) > 1 or len(self.stages[i + 1]) > 1)

    # -- running ------------------------------------------------------------------------
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
            if self.barrier_after(i):
                torch.cuda.synchronize()
        return env

    def _run_streams(self, env: dict) -> dict:
        main = torch.cuda.current_stream()
        streams = [main, *self.side]
        edges = self.mode == "edges"
        forked = [False] * len(streams)
        if self.fork_event is not None:
            self.fork_event.record(main)
        call = self.ops.call
        for i, st in enumerate(self.stages):
            for j, group in enumerate(st):
                stream = streams[j]
                if j and not forked[j]:
                    stream.wait_event(self.fork_event)
                    forked[j] = True
                with torch.cuda.stream(stream):
                    for n in group:
                        if edges:
                            for p in self.waits[n.name]:
                                stream.wait_event(self.events[p])
                        env[n.name] = call(n, env)
                        if edges and n.name in self.recorded:
                            self.events[n.name].record(stream)
            if not edges and self.barrier_after(i):
                self._join(streams, forked)
                self.fork_event.record(main)
        self._join(streams, forked)
        return env

    def _join(self, streams: list, forked: list[bool]) -> None:
        main = streams[0]
        for j in range(1, len(streams)):
            if forked[j]:
                ev = self.join_events[j - 1]
                ev.record(streams[j])
                main.wait_event(ev)
                forked[j] = False
