"""Connected pointwise operators with one output become one ``fused`` operator.

Operators Inductor fuses with their neighbours join groups as pointwise ones do (``OpDef.fusable``): views
and copies (a transformer's split of Q, K and V into heads is a chain of five or six, each a copy when run
alone), reductions and LayerNorm (ConvNeXt-V2's global response normalization after its GELU).

An imported GELU is five operators (Div, Erf, Add, Mul, Mul), a LayerScale or an affine a Mul and an
Add, each a kernel that reads and writes the whole tensor. A group of pointwise nodes (registry
operators, element-wise sums and products, residual sums, activations) in which every node but the last is read only
inside the group, and read whole, becomes one node whose program runs the same operators in the same
order: the group has one output and no path leaves and re-enters it. The float64 reference and the
eager runtime step through the program; on CUDA the kernel choice compiles it into one Triton kernel
with Inductor (kept where it times faster). The node that replaces the group keeps the last node's name,
so its readers are untouched; each distinct outside operand is read once. A SiLU imported as a sigmoid and a
product (EfficientNet's, MobileViT's) is such a group. Groups of residual sums and ReLUs alone (the paper's
networks) are left as they are."""

from __future__ import annotations

from ..ir import Graph
from ..ir.nodes import Activation, Element, Identity, Node, Op, Term
from .users import block_exits, whole


def _sum(node: Node) -> bool:
    """An identity node that adds the values of its one term (a residual sum), not a concatenation."""
    return isinstance(node, Identity) and len(node.inputs) == 1 and len(node.inputs[0]) > 1


def _joins(node: Node) -> bool:
    """A node a group may take: pointwise, or an operator Inductor fuses with its neighbours."""
    if isinstance(node, Op):
        return node.opdef.pointwise or node.opdef.fusable
    return isinstance(node, Element) or _sum(node) or (isinstance(node, Activation) and node.act != "identity")


def _plain(node: Node) -> bool:
    """A residual sum or a ReLU: groups of these alone (the paper's networks) stay as they are."""
    return _sum(node) or (isinstance(node, Activation) and node.act in ("relu", "relu6"))


def _steps(node: Node) -> list[tuple[str, dict, list]]:
    """A pointwise node as registry steps ``(op, params, operands)``; an operand ``("s", -1)`` is the step
    before (an element-wise node of n values is n - 1 binary steps)."""
    if isinstance(node, Op):
        return [(node.op, node.params, [("k", int(a[1:])) if a[0] == "k" else ("x", node.inputs[int(a[1:])])
                                        for a in node.args])]
    if isinstance(node, Activation):
        return [(node.act, {}, [("x", node.inputs[0])])]
    op = node.op if isinstance(node, Element) else "add"
    values = node.inputs[0]
    out: list[tuple[str, dict, list]] = [(op, {}, [("x", [values[0]]), ("x", [values[1]])])]
    return out + [(op, {}, [("s", -1), ("x", [v])]) for v in values[2:]]


def _reads(node: Node) -> list[Term]:
    """The terms ``node`` reads as operands (an element-wise node or a sum reads each value of its term alone)."""
    return [[v] for v in node.inputs[0]] if isinstance(node, Element) or _sum(node) else node.inputs


def _read_whole(node: Node, graph: Graph) -> bool:
    """Every operand that reads ``node`` reads its whole output alone (no slice, no sum)."""
    return all(whole(t, node) for u in graph.users(node) for t in _reads(u)
               if any(v.node == node.name for v in t))


def _group(sink: Node, nodes: dict[str, Node], graph: Graph, exits: set[str]) -> list[Node]:
    """The members of the group that ends at ``sink``: grown through pointwise producers read whole whose
    readers are all members already, until nothing more joins."""
    members = {sink.name: sink}
    grown = True
    while grown:
        grown = False
        for m in list(members.values()):
            for term in _reads(m):
                p = nodes.get(term[0].node) if len(term) == 1 else None
                if (p is None or p.name in members or not _joins(p) or p.name in exits
                        or not _read_whole(p, graph) or any(u.name not in members for u in graph.users(p))):
                    continue
                members[p.name] = p
                grown = True
    return list(members.values())


def _fused(members: list[Node], order: dict[str, int]) -> Op:
    """One ``fused`` operator for the group, named after its last member."""
    members = sorted(members, key=lambda m: order[m.name])
    result: dict[str, int] = {}  # member -> its last step
    terms: list[Term] = []
    consts: list = []
    shapes: list = []
    steps: list[dict] = []
    for m in members:
        for op, params, operands in _steps(m):
            args: list[str | tuple[str, int]] = []
            for kind, ref in operands:
                if kind == "s":
                    args.append(f"s{len(steps) - 1}")
                elif kind == "k":
                    assert isinstance(m, Op) and isinstance(ref, int)
                    consts.append(m.consts[ref])
                    shapes.append(m.const_shapes[ref])
                    args.append(("k", len(consts) - 1))
                elif len(ref) == 1 and ref[0].node in result:  # type: ignore[arg-type]  # a member, read whole
                    args.append(f"s{result[ref[0].node]}")  # type: ignore[index]
                else:
                    if ref not in terms:
                        terms.append(ref)  # type: ignore[arg-type]
                    args.append(("x", terms.index(ref)))  # type: ignore[arg-type]
            steps.append({"op": op, "params": params, "args": args})
        result[m.name] = len(steps) - 1
    n = len(terms)  # operands: the outside terms first, then the constants
    for step in steps:
        step["args"] = [a if isinstance(a, str) else f"o{a[1] if a[0] == 'x' else n + a[1]}" for a in step["args"]]
    sink = members[-1]
    return Op(name=sink.name, inputs=[list(t) for t in terms], op="fused", params={"steps": steps},
              args=(*(f"x{i}" for i in range(n)), *(f"k{j}" for j in range(len(consts)))), consts=consts,
              const_shapes=shapes, hint=sink.hint or "Fused")


def run(graph: Graph) -> int:
    exits = block_exits(graph)
    nodes = {n.name: n for n in graph.nodes()}
    order = {name: i for i, name in enumerate(nodes)}
    taken: set[str] = set()
    done = 0
    for sink in reversed(list(nodes.values())):
        if sink.name in taken or not _joins(sink):
            continue
        members = _group(sink, nodes, graph, exits)
        taken.update(m.name for m in members)
        if len(members) < 2 or all(_plain(m) for m in members):
            continue
        fused = _fused(members, order)
        graph.replace_node(sink, fused)
        graph.erase(m for m in members if m is not sink)
        done += 1
    return done
