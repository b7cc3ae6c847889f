"""Name-free signatures of groups of nodes: op configs, how the nodes read each other and
their external inputs, and the input shapes. Structurally identical stages (NASNet's
repeated cells, RandWire's look-alike nodes) share one cost measurement, and identical
parts of a graph share one schedule search."""

from __future__ import annotations

import json

from .graph import Graph
from .nodes import Node


def _rows(graph: Graph, groups: list[list[Node]], ext_name) -> list:
    ext: dict[str, str] = {}
    rows = []
    for group in groups:
        local = {node.name: f"l{oi}" for oi, node in enumerate(group)}  # groups never read each other
        grow = []
        for node in group:
            terms = []
            for t in node.inputs:
                vals = []
                for v in t:
                    if v.node in local:
                        ref = local[v.node]
                    else:
                        if v.node not in ext:
                            ext[v.node] = ext_name(len(ext), graph.node(v.node).output_shape)
                        ref = ext[v.node]
                    vals.append([ref, v.begin, v.end])
                terms.append(vals)
            grow.append([node.kind, node.attrs(), terms])
        rows.append(grow)
    return rows


def signature(graph: Graph, groups: list[list[Node]]) -> str:
    """Canonical text of a stage (or of a part, as one group). Groups are sorted, so their
    order does not change the signature; external inputs are numbered in the sorted order."""
    shape_only = _rows(graph, groups, lambda i, shape: "x:" + "x".join(map(str, shape)))
    keys = [json.dumps(r, sort_keys=True) for r in shape_only]
    ordered = [groups[i] for i in sorted(range(len(groups)), key=lambda i: keys[i])]
    rows = _rows(graph, ordered, lambda i, shape: f"x{i}:" + "x".join(map(str, shape)))
    return json.dumps(rows, sort_keys=True, separators=(",", ":"))
