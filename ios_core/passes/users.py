"""Who reads whom: the consumers of every node, for passes that rewrite a producer only when
its single consumer allows it, and the removal of nodes a rewrite absorbed."""

from __future__ import annotations

from ..ir import Graph, Node
from ..ir.nodes import Value


def consumers(graph: Graph) -> dict[str, list[Node]]:
    """Node name -> the nodes that read any channel of its output (each listed once)."""
    out: dict[str, list[Node]] = {}
    for block in graph.blocks:
        for n in block.nodes:
            for name in {v.node for t in n.inputs for v in t}:
                out.setdefault(name, []).append(n)
    return out


def block_exits(graph: Graph) -> set[str]:
    """Nodes that end a block (the next block enters there): never removed by a pass."""
    return {b.exit.name for b in graph.blocks}


def whole(term: list[Value], node: Node) -> bool:
    """``term`` is exactly ``node``'s whole output (one value, every channel, no sum)."""
    assert node.output_shape is not None
    return term == [Value(node.name, 0, node.output_shape[0])]


def drop(graph: Graph, names: set[str]) -> None:
    """Remove the named nodes from their blocks and the blocks' DP parts."""
    for block in graph.blocks:
        if any(n.name in names for n in block.nodes):
            block.nodes = [n for n in block.nodes if n.name not in names]
            if block.parts:
                block.parts = [[x for x in part if x not in names] for part in block.parts]
