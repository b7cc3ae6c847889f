"""What passes ask of a graph beyond its readers (``Graph.users``): the nodes no pass may remove, and
whether a term reads a node's whole output."""

from __future__ import annotations

from ..ir import Graph, Node
from ..ir.nodes import Value


def block_exits(graph: Graph) -> set[str]:
    """Nodes that end a block (the next block enters there): never removed by a pass."""
    return {b.exit.name for b in graph.blocks}


def whole(term: list[Value], node: Node) -> bool:
    """``term`` is exactly ``node``'s whole output (one value, every channel, no sum)."""
    assert node.output_shape is not None
    return term == [Value(node.name, 0, node.output_shape[0])]
