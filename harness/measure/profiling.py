"""``runner.profile_ops=true``: every node of the model timed alone on the run's device and
precision (ios_core's op runtime, the one IOS's stage timer uses), as CSV and Markdown
artifacts. The profile is of the graph's operators, so it is the same for every backend."""

from __future__ import annotations

from typing import Any

from ios_core.cost.opprofile import op_profile, to_csv, to_markdown

from ..machine.leases import exclusive

CHUNK = 32  # nodes per captured graph on CUDA


def profile_ops(graph: Any, device: str, precision: str, batch: int) -> tuple[dict[str, float], dict[str, str]]:
    from ios_core.runtime.target import TorchTarget
    from ios_core.runtime.timer import StageTimer

    timer = StageTimer(TorchTarget(device, precision), batch, guard=exclusive)

    def time_nodes(nodes: list) -> list[float]:
        out: list[float] = []
        for i in range(0, len(nodes), CHUNK):
            out += timer.time_many(graph, [[[n]] for n in nodes[i:i + CHUNK]])
        return out

    rows = op_profile(graph, time_nodes, batch, itemsize=2 if precision in ("fp16", "bf16") else 4)
    metrics = {"op_profile_sum_ms": sum(r.latency_ms for r in rows),
               "op_profile_critical_path_ms": sum(r.latency_ms for r in rows if r.critical),
               "op_profile_nodes": float(len(rows))}
    title = f"# per-operator profile: {graph.name}, batch {batch}, {precision}, {device}\n\n"
    return metrics, {"op_profile.csv": to_csv(rows), "op_profile.md": title + to_markdown(rows)}
