"""A block of the IR: the nodes between one enter node and one exit node (the DP solves each on its own)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .nodes import Node


@dataclass(eq=False)
class Block:
    """Nodes between an enter node (not part of the block) and the exit node (the last
    node, the block's single sink). ``parts`` optionally splits the nodes into DP
    sub-problems (NASNet: one per cell)."""

    enter: str
    nodes: list[Node] = field(default_factory=list)
    parts: list[list[str]] | None = None

    @property
    def exit(self) -> Node:
        return self.nodes[-1]
