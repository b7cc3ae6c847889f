"""Stage signatures (:func:`ios_core.ir.signature.signature`) of schedule stages, and the
persistent cache's keys built from them."""

from __future__ import annotations

import hashlib

from ..ir import Graph, Node
from ..ir.signature import signature
from ..schedule.merge import merge_convs
from ..schedule.schedule import Stage


def stage_nodes(graph: Graph, stage: Stage) -> list[list[Node]]:
    """The nodes a stage runs, per group; a merge stage runs one merged conv."""
    if stage.merge and len(stage.groups[0]) > 1:
        return [[merge_convs([graph.node(n) for n in stage.groups[0]], with_weights=False)]]  # type: ignore[misc]
    return [[graph.node(n) for n in g] for g in stage.groups]


def key(sig: str, *context: object) -> str:
    """Cache key: the signature plus device, batch, precision, runtime mode..."""
    blob = sig + "|" + "|".join(map(str, context))
    return hashlib.sha1(blob.encode()).hexdigest()


__all__ = ["key", "signature", "stage_nodes"]
