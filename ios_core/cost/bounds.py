"""Lower and upper reference points of a graph under a cost model: the critical path
(the longest dependency chain of units, each at its stand-alone latency: no schedule can
beat it unless concurrency speeds single units up) and the sum of ops (every unit one
after another)."""

from __future__ import annotations

from ..ir import Graph, Placeholder
from ..schedule.schedule import Stage


def bounds(graph: Graph, cost) -> dict[str, float]:
    unit = {}
    finish: dict[str, float] = {graph.input.name: 0.0}
    for n in graph.nodes():
        if isinstance(n, Placeholder):
            continue
        unit[n.name] = cost.stage_latency(graph, Stage([[n.name]]))
        start = max(finish[v.node] for t in n.inputs for v in t)
        finish[n.name] = start + unit[n.name]
    return {"critical_path_ms": finish[graph.output.name], "sum_of_ops_ms": sum(unit.values())}
