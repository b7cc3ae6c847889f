"""Per-operator profile (OpBench, seed 004): every node of a graph timed alone on a device,
beside its shapes, its work (FLOPs, bytes moved) and the rates it achieved, with its share of
the sequential total and whether it lies on the critical path. The timing is passed in, so
the same table serves a measured device and the analytic model."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..ir import Graph, Node, Placeholder
from .analytic import _weight_elems

COLUMNS = ("node", "op", "input_shape", "output_shape", "kernel", "stride", "groups", "flops", "bytes",
           "latency_ms", "gflops_per_s", "gb_per_s", "share_pct", "critical")


@dataclass
class OpRow:
    node: str
    op: str
    input_shape: str
    output_shape: str
    kernel: str
    stride: str
    groups: str
    flops: float
    bytes: float
    latency_ms: float
    gflops_per_s: float
    gb_per_s: float
    share_pct: float
    critical: bool


def _pair(node: Node, attr: str) -> str:
    v = getattr(node, attr, None)
    return "x".join(map(str, v)) if v else ""


def op_profile(graph: Graph, time_nodes: Callable[[list[Node]], Sequence[float]], batch: int,
               itemsize: int = 4) -> list[OpRow]:
    """One row per node (placeholders excepted), in topological order.

    ``time_nodes`` returns the stand-alone latency (ms) of each node it is given."""
    nodes = [n for n in graph.nodes() if not isinstance(n, Placeholder)]
    lat = dict(zip((n.name for n in nodes), map(float, time_nodes(nodes))))
    finish: dict[str, float] = {graph.input.name: 0.0}
    via: dict[str, str | None] = {graph.input.name: None}
    for n in nodes:  # the longest chain of stand-alone latencies: the critical path
        preds = [v.node for t in n.inputs for v in t]
        prev = max(preds, key=lambda p: finish[p])
        finish[n.name], via[n.name] = finish[prev] + lat[n.name], prev
    critical: set[str] = set()
    cur: str | None = graph.output.name
    while cur is not None:
        critical.add(cur)
        cur = via[cur]
    total = sum(lat.values()) or 1.0
    rows = []
    for n in nodes:
        shape = graph.input_shape_of(n)
        assert n.output_shape is not None
        flops = 2.0 * n.macs(shape) * batch
        nbytes = (float(np.prod(shape)) + float(np.prod(n.output_shape))) * batch * itemsize \
            + _weight_elems(n, shape) * itemsize
        ms = lat[n.name]
        rows.append(OpRow(n.name, n.label(), "x".join(map(str, (batch, *shape))),
                          "x".join(map(str, (batch, *n.output_shape))), _pair(n, "kernel"), _pair(n, "stride"),
                          str(getattr(n, "groups", "")), flops, nbytes, ms,
                          flops / (ms * 1e6) if ms > 0 else 0.0, nbytes / (ms * 1e6) if ms > 0 else 0.0,
                          100.0 * ms / total, n.name in critical))
    return rows


def to_csv(rows: list[OpRow]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS)
    w.writeheader()
    w.writerows(asdict(r) for r in rows)
    return buf.getvalue()


def from_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def to_markdown(rows: list[OpRow]) -> str:
    head = ("| node | op | input | output | kernel | stride | groups | MFLOP | MB | latency ms | GFLOP/s | GB/s "
            "| share % | critical |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        lines.append(f"| {r.node} | {r.op} | {r.input_shape} | {r.output_shape} | {r.kernel} | {r.stride} "
                     f"| {r.groups} | {r.flops / 1e6:.2f} | {r.bytes / 1e6:.3f} | {r.latency_ms:.4f} "
                     f"| {r.gflops_per_s:.1f} | {r.gb_per_s:.1f} | {r.share_pct:.1f} | {'*' if r.critical else ''} |")
    return "\n".join(lines) + "\n"
