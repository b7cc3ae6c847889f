"""Stage signatures: a name-free description of a stage (op configs, how ops read each
other and the stage's external inputs, and the input shapes), so that structurally
identical stages (NASNet's repeated cells, RandWire's look-alike nodes) share one
measurement in the persistent cache."""

from __future__ import annotations

import hashlib
import json

from ..ir import Graph, Node
from ..schedule.merge import merge_convs
from ..schedule.schedule import Stage


def stage_nodes(graph: Graph, stage: Stage) -> list[list[Node]]:
    """The nodes a stage runs, per group; a merge stage runs one merged conv."""
    if stage.merge and len(stage.groups[0]) > 1:
        return [[merge_convs([graph.node(n) for n in stage.groups[0]], with_weights=False)]]  # type: ignore[misc]
    return [[graph.node(n) for n in g] for g in stage.groups]


def signature(graph: Graph, groups: list[list[Node]]) -> str:
    """Canonical text of a stage; groups are sorted so their order does not matter."""
    local: dict[str, str] = {}
    ext: dict[str, str] = {}
    rows = []
    for gi, group in enumerate(groups):
        grow = []
        for oi, node in enumerate(group):
            terms = []
            for t in node.inputs:
                vals = []
                for v in t:
                    if v.node in local:
                        ref = local[v.node]
                    else:
                        if v.node not in ext:
                            shape = graph.node(v.node).output_shape
                            ext[v.node] = f"x{len(ext)}:{'x'.join(map(str, shape))}"
                        ref = ext[v.node]
                    vals.append([ref, v.begin, v.end])
                terms.append(vals)
            grow.append([node.kind, node.attrs(), terms])
            local[node.name] = f"g{gi}.{oi}"
        rows.append(grow)
    return json.dumps(rows, sort_keys=True, separators=(",", ":"))


def key(sig: str, *context: object) -> str:
    """Cache key: the signature plus device, batch, precision, runtime mode..."""
    blob = sig + "|" + "|".join(map(str, context))
    return hashlib.sha1(blob.encode()).hexdigest()
