"""Who reads whom, kept up to date: torch.fx's use tracking for the IR's graphs.

A pass that rewrites a producer only when its single reader allows it, or removes the nodes a
rewrite absorbed, asks the graph (:meth:`UseTracking.users`) and edits it through the methods
here, which keep the readers, the name index and the blocks' DP parts in step. A direct edit of
``node.inputs`` bypasses the tracking; :meth:`UseTracking.lint` finds it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .block import Block
from .nodes import GraphError, Node, Term, Value


def _producers(node: Node) -> set[str]:
    return {v.node for t in node.inputs for v in t}


def readers_of(nodes: Iterable[Node]) -> dict[str, dict[str, Node]]:
    """Producer name -> its readers by name, in the order of ``nodes``."""
    out: dict[str, dict[str, Node]] = {}
    for n in nodes:
        for name in sorted(_producers(n)):
            out.setdefault(name, {})[n.name] = n
    return out


class UseTracking:
    """The mutation API of :class:`~ios_core.ir.graph.Graph` (mixed in there)."""

    name: str
    blocks: list[Block]
    _index: dict[str, Node]
    _users: dict[str, dict[str, Node]]

    def _block_nodes(self) -> Iterable[Node]:
        for block in self.blocks:
            yield from block.nodes

    def users(self, node: Node | str) -> list[Node]:
        """The block nodes that read any channel of ``node``'s output (each once)."""
        return list(self._users.get(node if isinstance(node, str) else node.name, {}).values())

    def _track(self, node: Node) -> None:
        for name in _producers(node):
            self._users.setdefault(name, {})[node.name] = node

    def _untrack(self, node: Node) -> None:
        for name in _producers(node):
            readers = self._users.get(name, {})
            readers.pop(node.name, None)
            if not readers:
                self._users.pop(name, None)

    def set_inputs(self, node: Node, inputs: list[Term]) -> None:
        """``node`` reads ``inputs`` from now on."""
        self._untrack(node)
        node.inputs = [list(t) for t in inputs]
        self._track(node)

    def replace_all_uses_with(self, old: Node | str, new: Node | str) -> list[Node]:
        """Every reader of ``old`` reads the same channels of ``new`` instead; returns those readers."""
        was, now = (x if isinstance(x, str) else x.name for x in (old, new))
        readers = self.users(was)
        for r in readers:
            self.set_inputs(r, [[Value(now, v.begin, v.end) if v.node == was else v for v in t] for t in r.inputs])
        return readers

    def replace_node(self, old: Node, new: Node) -> None:
        """``new`` takes ``old``'s place in its block; readers of ``old`` read ``new`` (renamed where the names
        differ, in the block's parts too)."""
        block = self._block_of(old)
        block.nodes[block.nodes.index(old)] = new
        self._untrack(old)
        self._track(new)
        self._index.pop(old.name, None)
        self._index[new.name] = new
        if new.name != old.name:
            self.replace_all_uses_with(old.name, new.name)
            if block.parts:
                block.parts = [[new.name if x == old.name else x for x in part] for part in block.parts]

    def erase(self, nodes: Iterable[Node | str]) -> None:
        """Remove ``nodes`` from their blocks (and the blocks' parts); none may end a block or be read by a node
        that stays."""
        names = {n if isinstance(n, str) else n.name for n in nodes}
        gone = [self._index[x] for x in names if x in self._index]
        exits = {b.exit.name for b in self.blocks}
        for n in gone:
            if n.name in exits:
                raise GraphError(f"node {n.name}: ends a block and cannot be erased")
        for n in gone:
            self._untrack(n)
        for n in gone:
            left = [u.name for u in self.users(n) if u.name not in names]
            if left:
                raise GraphError(f"node {n.name}: cannot be erased, still read by {', '.join(left)}")
        for block in self.blocks:
            if any(n.name in names for n in block.nodes):
                block.nodes = [n for n in block.nodes if n.name not in names]
                if block.parts:
                    block.parts = [[x for x in part if x not in names] for part in block.parts]
        for x in names:
            self._index.pop(x, None)
            self._users.pop(x, None)

    def _block_of(self, node: Node) -> Block:
        for block in self.blocks:
            if any(n is node for n in block.nodes):
                return block
        raise GraphError(f"graph {self.name}: node {node.name} is in no block")

    def lint(self) -> None:
        """Check that the tracking matches what every node reads (a direct edit of ``inputs`` shows here) and that
        the index holds the blocks' nodes, then validate the graph as :meth:`infer_shapes` does."""
        nodes = list(self._block_nodes())
        actual = {k: list(v) for k, v in readers_of(nodes).items()}
        tracked = {k: list(v) for k, v in self._users.items() if v}
        for name in sorted(set(actual) | set(tracked)):
            if sorted(actual.get(name, [])) != sorted(tracked.get(name, [])):
                raise GraphError(f"node {name}: read by {sorted(actual.get(name, []))} but tracked as read by "
                                 f"{sorted(tracked.get(name, []))} (an input edited without Graph.set_inputs)")
        for n in nodes:
            if self._index.get(n.name) is not n:
                raise GraphError(f"node {n.name}: not in the graph's index (added without Graph.replace_node)")
        self.infer_shapes()

    if TYPE_CHECKING:
        def infer_shapes(self) -> None: ...  # the Graph's own
