"""The one pattern every consumer of the IR follows (torch.fx's Interpreter idea).

Walk the nodes in topological order; gather each node's input through the term/value
rules (slice, sum, concat) and map the node kind to the target's op. A subclass
supplies the tensor primitives and one method per node kind; the walk, the term
semantics and the Sequential chaining live here once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar, cast

from ..ir import Graph, GraphError, Node, Placeholder, Sequential, Term
from ..ir.nodes import Op

T = TypeVar("T")


def weighted_nodes(nodes, require: bool = False) -> Iterator[Node]:
    """The nodes among ``nodes`` that carry arrays (conv and linear weights, an operator's constants),
    Sequential compounds opened; with ``require``, a node missing its first array is an error."""
    for node in nodes:
        for n in (node.nodes if isinstance(node, Sequential) else [node]):
            arrays = n.weights()
            if arrays:
                if require and next(iter(arrays.values())) is None:
                    raise ValueError(f"node {n.name}: has no weights; call graph.init_weights(seed)")
                yield n


def has_weights(node: Node) -> bool:
    """Whether a node's arrays are set (a merged conv's are not: the timer draws random ones)."""
    arrays = list(node.weights().values())
    return bool(arrays) and arrays[0] is not None


def node_params(node: Node, put: Callable[[Any], Any]) -> tuple[Any, ...]:
    """``node``'s arrays in order (``(weight, bias)`` of a conv, an operator's constants), each through
    ``put``; an absent bias stays None."""
    return tuple(None if a is None else put(a) for a in node.weights().values())


def weight_params(graph: Graph, put: Callable[[Any], Any]) -> dict[str, tuple[Any, ...]]:
    """``{name: node_params(node, put)}`` for every weighted node of ``graph``."""
    return {n.name: node_params(n, put) for n in weighted_nodes(graph.nodes(), require=True)}


class UnsupportedNode(GraphError):
    """The target cannot express a node kind; the message names node, kind and target."""


class Interpreter(Generic[T]):
    target = "interpreter"

    def __init__(self, graph: Graph):
        self.graph = graph

    # -- tensor primitives a target supplies ----------------------------------------
    def slice(self, x: T, begin: int, end: int, channels: int) -> T:
        raise NotImplementedError

    def add(self, xs: list[T]) -> T:
        """Sum of values (any tensor type with ``+``; targets may override)."""
        out = xs[0]
        for x in xs[1:]:
            out = out + x  # type: ignore[operator]
        return out

    def mul(self, xs: list[T]) -> T:
        out = xs[0]
        for x in xs[1:]:
            out = out * x  # type: ignore[operator]
        return out

    def concat(self, xs: list[T]) -> T:
        raise NotImplementedError

    # -- the walk -----------------------------------------------------------------
    def run(self, x: T) -> T:
        env: dict[str, T] = {self.graph.input.name: self.placeholder(self.graph.input, x)}
        for node in self.graph.nodes():
            if isinstance(node, Placeholder):
                continue
            env[node.name] = self.call(node, env)
        return env[self.graph.output.name]

    def placeholder(self, node: Placeholder, x: T) -> T:
        return x

    def channels(self, name: str) -> int:
        """Channel count of a producer's full output (decides whether a Value is a slice)."""
        return self.graph.node(name).out_channels_

    def value(self, env: dict[str, T], v) -> T:
        full = self.channels(v.node)
        x = env[v.node]
        return x if (v.begin == 0 and v.end == full) else self.slice(x, v.begin, v.end, full)

    def term(self, env: dict[str, T], term: Term) -> list[T]:
        return [self.value(env, v) for v in term]

    def gather(self, node: Node, env: dict[str, T]) -> T:
        """The node's input: each term summed, the terms concatenated on channels."""
        parts = [(vals[0] if len(vals) == 1 else self.add(vals))
                 for vals in (self.term(env, t) for t in node.inputs)]
        return parts[0] if len(parts) == 1 else self.concat(parts)

    def call(self, node: Node, env: dict[str, T]) -> T:
        if node.kind == "element":
            values = self.term(env, node.inputs[0])
            return self.element(node, values)
        if node.kind == "op":
            operands = [vals[0] if len(vals) == 1 else self.add(vals)
                        for vals in (self.term(env, t) for t in node.inputs)]
            return self.visit_op(cast(Op, node), operands)
        return self.apply(node, self.gather(node, env))

    def visit_op(self, node: Op, xs: list[T]) -> T:
        """An operator of the registry on its input operands (``xs``; the constants are the target's)."""
        raise UnsupportedNode(f"node {node.name}: operator {node.op!r} is not supported by {self.target} "
                              f"(it takes {', '.join(sorted(self.supported_ops()))} only)")

    def supported_ops(self) -> set[str]:
        """The node kinds this target has a visit method for (for error messages)."""
        return {name[6:] for name in dir(self) if name.startswith("visit_") and name != "visit_op"}

    def apply(self, node: Node, x: T) -> T:
        """Apply one node to its gathered input (also used for Sequential's inner nodes)."""
        method = getattr(self, f"visit_{node.kind}", None)
        if method is None:
            raise UnsupportedNode(f"node {node.name}: kind {node.kind!r} is not supported by {self.target}")
        return method(node, x)

    def visit_sequential(self, node: Sequential, x: T) -> T:
        for inner in node.nodes:
            x = self.apply(inner, x)
        return x

    def visit_identity(self, node: Node, x: T) -> T:
        return x

    def element(self, node, values: list[T]) -> T:
        if len(node.inputs) != 1:
            raise GraphError(f"node {node.name}: an element node takes exactly one term")
        return self.mul(values) if node.op == "mul" else self.add(values)
