"""Blocks are cut where a single tensor is live (every path crosses it)."""

from __future__ import annotations

from ...ir import Block
from ...ir.nodes import Node, Placeholder


def cut(placeholder: Placeholder, nodes: list[Node]) -> list[Block]:
    """Cut the node list where exactly one produced tensor is still needed later."""
    remaining: dict[str, int] = {}
    for node in nodes:
        for v in {v.node for t in node.inputs for v in t}:
            remaining[v] = remaining.get(v, 0) + 1
    live: set[str] = {placeholder.name}
    blocks: list[Block] = []
    current = Block(placeholder.name)
    for node in nodes:
        for v in {v.node for t in node.inputs for v in t}:
            remaining[v] -= 1
            if remaining[v] == 0:
                live.discard(v)
        current.nodes.append(node)
        if remaining.get(node.name, 0) > 0:
            live.add(node.name)
        if live == {node.name} or node is nodes[-1]:
            blocks.append(current)
            current = Block(node.name)
    return blocks
