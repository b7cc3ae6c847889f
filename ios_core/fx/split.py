"""An ATen graph cut into the parts IOS runs and the nodes left to the fallback. One walk first finds every node a
converter refuses; the parts are then the runs of nodes between them, in the graph's order. A part IOS cannot take as
a whole (more than one feature map in or out, a node refused only there) goes to the fallback, or hands it the node,
and the graph is cut again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx

from ..ir import Graph
from .aten import AtenGraph
from .convert import Fmap, Importer, Refused, supported

#: parts smaller than this stay with the fallback: a lone reshape or add is not worth a plan
MIN_NODES = 2


@dataclass
class Part:
    """Nodes IOS runs as one plan: ``data`` is the feature map they read, ``output`` the node whose value leaves."""

    nodes: list[fx.Node]
    data: fx.Node
    output: fx.Node
    graph: Graph
    out: Fmap


@dataclass
class Split:
    parts: list[Part] = field(default_factory=list)
    refused: dict[fx.Node, str] = field(default_factory=dict)  # a node left to the fallback, and why
    total: int = 0  # the graph's operators on feature maps (what the report counts)

    def report(self) -> str:
        """One line: how much IOS runs, and which operators fell back and why."""
        taken, total = sum(len(p.nodes) for p in self.parts), self.total
        if not self.refused:
            return f"IOS runs all {taken} operators in {len(self.parts)} plan(s)"
        why: dict[str, int] = {}
        for node, reason in self.refused.items():
            label = f"{getattr(node.target, '__name__', node.target)} ({reason})"
            why[label] = why.get(label, 0) + 1
        listed = "; ".join(f"{n}x {label}" if n > 1 else label for label, n in why.items())
        return (f"IOS runs {taken} of {total} operators in {len(self.parts)} plan(s); the fallback runs "
                f"{total - taken}: {listed}")


def weight_values(ag: AtenGraph) -> dict[fx.Node, Any]:
    """Every node computed from the module's weights alone, and its value (folded once, here)."""
    values: dict[fx.Node, Any] = {}
    places = ag.placeholders()
    for i in ag.weights:
        values[places[i]] = ag.inputs[i]
    for node in ag.module.graph.nodes:
        if node.op == "get_attr":  # a weight Dynamo left on the module (inline_inbuilt_nn_modules off)
            values[node] = _attr(ag.module, str(node.target))
        if node.op != "call_function" or not node.all_input_nodes:
            continue
        if all(n in values for n in node.all_input_nodes):
            args = fx.node.map_arg(node.args, lambda n: values[n])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: values[n])
            values[node] = node.target(*args, **kwargs)
    return values


def _attr(module: Any, target: str) -> Any:
    for part in target.split("."):
        module = getattr(module, part)
    return module


def _boundary(nodes: list[fx.Node], weights: dict[fx.Node, Any]) -> tuple[list[fx.Node], list[fx.Node]]:
    """The feature maps a part reads from outside it, and its nodes read from outside it."""
    inside = set(nodes)
    reads = {a for n in nodes for a in n.all_input_nodes if a not in inside and a not in weights}
    leaves = [n for n in nodes if any(u not in inside for u in n.users)]
    return sorted(reads, key=lambda n: n.name), leaves


def _propose(ag: AtenGraph, weights: dict[fx.Node, Any], refused: dict[fx.Node, str]) -> list[list[fx.Node]]:
    """Runs of nodes IOS may take, in the graph's order, cut at every node it does not: linear in the graph, and
    no part can depend on itself through the fallback (torch's capability-based partitioner checks that for each
    merge and took minutes on a transformer)."""
    runs: list[list[fx.Node]] = [[]]
    for node in ag.module.graph.nodes:
        if node in weights or node.op == "placeholder":
            continue
        if node.op == "call_function" and node not in refused and supported(node):
            runs[-1].append(node)
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def split(ag: AtenGraph, name: str = "fx") -> Split:
    """The parts of ``ag`` IOS runs, each converted to the IR (at its input's batch size), and what falls back."""
    weights = weight_values(ag)
    out = Split(total=sum(1 for n in ag.module.graph.nodes if n.op == "call_function" and n not in weights))
    images = [p.meta["val"] for p in ag.placeholders()
              if p not in weights and isinstance(p.meta.get("val"), torch.Tensor)]
    batch = int(images[0].shape[0]) if images else 1
    out.refused.update(Importer(batch).survey(list(ag.module.graph.nodes), weights))
    while True:  # parts cut again while one refuses what the survey could not see (a boundary it changes)
        parts: list[Part] = []
        again = False
        for nodes in _propose(ag, weights, out.refused):
            reads, leaves = _boundary(nodes, weights)
            why = None
            if len(reads) != 1 or len(leaves) != 1:
                why = f"a part with {len(reads)} feature maps in and {len(leaves)} out"
            elif not isinstance(reads[0].meta.get("val"), torch.Tensor) or reads[0].meta["val"].dim() != 4:
                why = "a part whose input is not an (N, C, H, W) tensor"
            elif len(nodes) < MIN_NODES:
                why = "too small a part to plan"
            if why is not None:
                out.refused.update({n: why for n in nodes})
                again = True
                continue
            try:
                batch = int(reads[0].meta["val"].shape[0])
                graph, y = Importer(batch).part(nodes, weights, reads[0], leaves[0], f"{name}-{len(parts)}")
            except Refused as exc:
                out.refused[exc.node] = exc.why
                again = True
                break
            parts.append(Part(nodes, reads[0], leaves[0], graph, y))
        if not again:
            out.parts = parts
            return out


__all__ = ["Part", "Split", "split", "weight_values"]
