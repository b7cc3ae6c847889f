"""Who reads whom: the consumers of every node, for passes that rewrite a producer only when
its single consumer allows it."""

from __future__ import annotations

from ..ir import Graph, Node


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
