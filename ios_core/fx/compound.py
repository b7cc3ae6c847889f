"""Pre-activations as the zoo writes them: an activation read only by a convolution (NASNet's and RandWire's
relu -> depthwise -> pointwise, a ResNet v2's relu -> conv) becomes one :class:`~ios_core.ir.nodes.Sequential` unit.
Left apart, each such chain is three schedule units where the zoo's graph has one, and the DP's states grow with
the units a block holds side by side (RandWire's blocks went from 33 units to 113 and the search ran out of memory)."""

from __future__ import annotations

from ..ir.nodes import Activation, Conv, Node, Op, Sequential


def _activation(node: Node) -> str | None:
    """The activation ``node`` applies on its own (an Activation, or a registry op that is one), or None."""
    if isinstance(node, Activation):
        return node.act
    if isinstance(node, Op) and node.opdef.activation and len(node.inputs) == 1 and node.args == ("x0",):
        return node.op
    return None


def _sole_reader(node: Node, readers: dict[str, list[Node]]) -> Node | None:
    """The one node that reads ``node``, reading all of it as its only input, or None."""
    users = readers.get(node.name, [])
    if len(users) != 1 or len(users[0].inputs) != 1 or len(users[0].inputs[0]) != 1:
        return None
    v = users[0].inputs[0][0]
    channels = node.output_shape[0] if node.output_shape else -1
    return users[0] if (v.begin, v.end) == (0, channels) else None


def _pointwise_after(conv: Node, readers: dict[str, list[Node]]) -> Conv | None:
    """The 1x1 conv that alone reads ``conv``, where ``conv`` is a depthwise conv with no activation of its own (a
    separable conv's two halves), or None."""
    if not isinstance(conv, Conv) or conv.groups == 1 or conv.act != "identity":
        return None
    nxt = _sole_reader(conv, readers)
    return nxt if isinstance(nxt, Conv) and nxt.kernel == (1, 1) and nxt.groups == 1 else None


def compound_preactivations(nodes: list[Node]) -> list[Node]:
    """``nodes`` with each activation -> conv (-> 1x1 conv after a depthwise one) chain, and each depthwise -> 1x1
    pair left (its activation fused into the conv before it), as one unit named as its last node (whose readers
    are unchanged)."""
    readers: dict[str, list[Node]] = {}
    for n in nodes:
        for name in {v.node for t in n.inputs for v in t}:
            readers.setdefault(name, []).append(n)
    absorbed: dict[int, Sequential] = {}  # by the node absorbed
    for n in nodes:
        act = _activation(n)
        conv = _sole_reader(n, readers) if act is not None else None
        if act is None or not isinstance(conv, Conv):
            continue
        chain: list[Node] = [Activation(name=f"{n.name}.act", act=act, output_shape=n.output_shape), conv]
        nxt = _pointwise_after(conv, readers)
        if nxt is not None:
            chain.append(nxt)
        last = chain[-1]
        seq = Sequential(name=last.name, inputs=n.inputs, hint="ReluSepConv" if len(chain) == 3 else "ReluConv",
                         output_shape=last.output_shape)
        for i, inner in enumerate(chain[1:], 1):
            inner.name, inner.inputs = f"{last.name}.{i}", []
        seq.nodes = chain
        for member in (n, *chain[1:]):
            absorbed[id(member)] = seq
    for n in nodes:  # a depthwise conv whose activation went into the conv before it: still one unit with its 1x1
        nxt = _pointwise_after(n, readers) if id(n) not in absorbed else None
        if nxt is None or id(nxt) in absorbed:
            continue
        seq = Sequential(name=nxt.name, inputs=n.inputs, hint="SepConv", output_shape=nxt.output_shape)
        seq.nodes = [n, nxt]
        n.name, nxt.name = f"{nxt.name}.0", f"{nxt.name}.1"
        n.inputs, nxt.inputs = [], []
        absorbed[id(n)] = absorbed[id(nxt)] = seq
    out: list[Node] = []
    seen: set[int] = set()
    for n in nodes:
        unit = absorbed.get(id(n))
        if unit is None:
            out.append(n)
        elif id(unit) not in seen:  # in the place of the activation: its inputs are made before it
            seen.add(id(unit))
            out.append(unit)
    return out


__all__ = ["compound_preactivations"]
