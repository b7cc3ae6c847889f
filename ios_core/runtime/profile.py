"""Stage profiling: each stage run alone behind a barrier (so its time is its own),
with per-group start/end times for a timeline of which stream ran what when.

This runs eagerly (events cannot be timed inside a replayed CUDA graph), so on a GPU
the absolute times include launch overhead that the captured runtime does not pay;
it shows the shape of the schedule, not the captured latency.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from ..plotting import pyplot, render
from .model import ScheduledModel


@dataclass
class GroupSpan:
    stage: int
    stream: int
    units: list[str]
    start_ms: float
    end_ms: float


def profile(model: ScheduledModel, x: np.ndarray, repeat: int = 5) -> tuple[list[float], list[GroupSpan]]:
    """(mean ms per stage, the group spans of the last repeat)."""
    cuda = model.target.device.type == "cuda"
    streams = cast("list[torch.cuda.Stream]", [None])  # on the CPU the entry only goes to _Clock, which ignores it
    if cuda:
        from .streams import side_streams

        streams = [torch.cuda.current_stream(), *side_streams(model.program.width - 1)]
    inp = model.target.tensor(x)
    per_stage = np.zeros(len(model.stages))
    spans: list[GroupSpan] = []
    with torch.inference_mode():
        for rep in range(repeat + 1):  # the first round warms up
            env = {model.graph.input.name: inp}
            spans = []
            t0 = _Clock(cuda, streams[0])
            for si, stage in enumerate(model.stages):
                s0 = _Clock(cuda, streams[0])
                marks = []
                for j, group in enumerate(stage):
                    st = streams[j] if cuda else None
                    if cuda and j:
                        assert st is not None
                        st.wait_stream(streams[0])
                    with torch.cuda.stream(st) if cuda else contextlib.nullcontext():
                        a = _Clock(cuda, st)
                        for n in group:
                            env[n.name] = model.ops.call(n, env)
                        b = _Clock(cuda, st)
                    marks.append((j, group, a, b))
                if cuda:
                    for j in range(1, len(stage)):
                        streams[0].wait_stream(streams[j])
                s1 = _Clock(cuda, streams[0])
                if cuda:
                    torch.cuda.synchronize()
                if rep:
                    per_stage[si] += s0.ms_to(s1) / repeat
                    spans.extend(GroupSpan(si, j, [n.name for n in g], t0.ms_to(a), t0.ms_to(b))
                                 for j, g, a, b in marks)
    return per_stage.tolist(), spans


class _Clock:
    def __init__(self, cuda: bool, stream):
        self.cuda = cuda
        if cuda:
            self.ev = torch.cuda.Event(enable_timing=True)
            self.ev.record(stream)
        else:
            self.t = time.perf_counter()

    def ms_to(self, other: _Clock) -> float:
        return self.ev.elapsed_time(other.ev) if self.cuda else (other.t - self.t) * 1e3


def profile_json(per_stage: list[float], spans: list[GroupSpan]) -> str:
    return json.dumps({"stage_ms": per_stage, "spans": [s.__dict__ for s in spans]}, indent=1)


def timeline_svg(spans: list[GroupSpan], title: str = "") -> str | None:
    """A timeline plot (streams on the y axis) as SVG text; None without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    streams = 1 + max((s.stream for s in spans), default=0)
    stages = 1 + max((s.stage for s in spans), default=0)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.5 * streams))
    colors = plt.get_cmap("tab20")
    for i, s in enumerate(spans):
        bars = ax.broken_barh([(s.start_ms, max(s.end_ms - s.start_ms, 1e-4))], (s.stream - 0.4, 0.8),
                              facecolors=colors(s.stage % 20), label=f"stage {s.stage}")
        bars.set_gid(f"span{i}")  # a tooltip with the units is added to the SVG below
    ax.set_yticks(range(streams))  # streams are whole numbers
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("stream")
    ax.set_title(title)
    if stages <= 20:  # one colour per stage
        handles = {cast(str, h.get_label()): h for h in ax.collections}  # every bar has a label
        ax.legend(list(handles.values()), list(handles), fontsize=7, ncols=min(10, stages),
                  loc="upper center", bbox_to_anchor=(0.5, -0.25 if streams < 4 else -0.12))
    else:
        ax.text(1.0, 1.02, f"{stages} stages; colour = stage (20 colours, repeating)", fontsize=7,
                ha="right", transform=ax.transAxes)
    svg = render(fig)
    for i, s in enumerate(spans):  # hover a bar: its stage, stream, units and time
        tip = (f"stage {s.stage}, stream {s.stream}: {' '.join(s.units)} "
               f"({s.start_ms:.3f}-{s.end_ms:.3f} ms)").replace("&", "&amp;").replace("<", "&lt;")
        svg = svg.replace(f'<g id="span{i}">', f'<g id="span{i}"><title>{tip}</title>', 1)
    return svg
