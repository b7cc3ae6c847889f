"""Operator merge: convolutions that read the same tensor become one wider convolution.

Rules (the original's ``check_merge``, made exact): plain Conv nodes (a Sequential never
merges), one term of one Value, the *same* Value for all, equal stride and equal input
and output size, groups = 1, the same activation. The merged conv has the sum of the
output channels, the element-wise max kernel and padding, and each original kernel
centred in a zero kernel. We also require ``P - (K - k) // 2 == p`` per axis, which makes
the centring exact (the original assumed it); every "same"-padded conv satisfies it.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ..ir import Block, Graph, Node, Value
from ..ir.nodes import Conv
from .schedule import Schedule, Stage


def merge_key(graph: Graph, node: Node) -> tuple | None:
    """Nodes with equal keys may merge; None: this node never merges."""
    if not isinstance(node, Conv) or node.groups != 1 or len(node.inputs) != 1 or len(node.inputs[0]) != 1:
        return None
    v = node.inputs[0][0]
    assert node.output_shape is not None
    return (v.node, v.begin, v.end, node.stride, node.act, tuple(graph.input_shape_of(node)[1:]),
            tuple(node.output_shape[1:]))


def merged_geometry(convs: list[Conv]) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(kernel, padding) of the merged conv, or None when centring would not be exact."""
    kernel = (max(c.kernel[0] for c in convs), max(c.kernel[1] for c in convs))
    padding = (max(c.padding[0] for c in convs), max(c.padding[1] for c in convs))
    for c in convs:
        for a in (0, 1):
            if padding[a] - (kernel[a] - c.kernel[a]) // 2 != c.padding[a]:
                return None
    return kernel, padding


def can_merge(graph: Graph, nodes: list[Node]) -> bool:
    if len(nodes) == 1:
        return True
    keys = {merge_key(graph, n) for n in nodes}
    if len(keys) != 1 or None in keys:
        return False
    return merged_geometry(nodes) is not None  # type: ignore[arg-type]


def merge_convs(convs: list[Conv], name: str | None = None, with_weights: bool = True) -> Conv:
    """One conv computing all of ``convs`` (outputs concatenated in the given order);
    weights are zero-padded and centred when every input conv has weights."""
    geom = merged_geometry(convs)
    if geom is None:
        raise ValueError(f"convs {[c.name for c in convs]} cannot be merged exactly")
    kernel, padding = geom
    out = sum(c.out_channels for c in convs)
    first = convs[0]
    node = Conv(name=name or first.name, inputs=[list(first.inputs[0])], hint=" ".join(c.name for c in convs),
                out_channels=out, kernel=kernel, stride=first.stride, padding=padding, groups=1, act=first.act)
    if with_weights and all(c.weight is not None for c in convs):
        assert first.weight is not None
        cin = first.weight.shape[1]
        w = np.zeros((out, cin, *kernel), np.float32)
        b = np.zeros((out,), np.float32)
        o = 0
        for c in convs:
            kh, kw = c.kernel
            dh, dw = (kernel[0] - kh) // 2, (kernel[1] - kw) // 2
            w[o:o + c.out_channels, :, dh:dh + kh, dw:dw + kw] = c.weight
            if c.bias is not None:
                b[o:o + c.out_channels] = c.bias
            o += c.out_channels
        node.weight, node.bias = w, b
    assert first.output_shape is not None
    node.output_shape = (out, *first.output_shape[1:])
    return node


def _coalesce(terms: list[list[Value]]) -> list[list[Value]]:
    """Adjacent single-value terms that are contiguous slices of one node become one."""
    out: list[list[Value]] = []
    for t in terms:
        if out and len(t) == 1 and len(out[-1]) == 1:
            a, b = out[-1][0], t[0]
            if a.node == b.node and a.end == b.begin:
                out[-1] = [Value(a.node, a.begin, b.end)]
                continue
        out.append(list(t))
    return out


def apply_merges(graph: Graph, schedule: Schedule) -> tuple[Graph, Schedule]:
    """Rewrite ``graph`` so that every merge stage is one conv node (named after its first
    conv; consumers read channel slices of it). Returns the new graph and a schedule
    without merge stages. Weights are carried over; node names are kept."""
    schedule.check(graph)
    remap: dict[str, tuple[str, int]] = {}  # old name -> (new name, channel offset)
    blocks: list[Block] = []
    new_stages: list[list[Stage]] = []
    for block, stages in zip(graph.blocks, schedule.blocks):
        merged, dropped = _merge_plan(graph, stages, remap)
        nodes: list[Node] = []
        for n in block.nodes:
            if n.name in dropped:
                continue
            new = merged.get(n.name) or _copy(n)
            new.inputs = _coalesce([[_moved(v, remap) for v in t] for t in new.inputs])
            nodes.append(new)
        blocks.append(Block(block.enter, nodes,
                            [[x for x in p if x not in dropped] for p in block.parts] if block.parts else None))
        new_stages.append([Stage([st.groups[0][:1]], barrier=st.barrier) if st.merge
                           else Stage([list(g) for g in st.groups], barrier=st.barrier) for st in stages])
    g2 = Graph(graph.name, graph.input, blocks)
    sched = Schedule(schedule.graph_name, g2.hash(), new_stages, schedule.algorithm, schedule.batch, schedule.device,
                     schedule.precision, dict(schedule.options), dict(schedule.stats))
    return g2, sched


def _merge_plan(graph: Graph, stages: list[Stage], remap: dict[str, tuple[str, int]]
                ) -> tuple[dict[str, Conv], set[str]]:
    """The merged conv of every merge stage (keyed by its first conv), the convs it
    replaces, and (into ``remap``) where each replaced conv's channels now live."""
    merged: dict[str, Conv] = {}
    dropped: set[str] = set()
    for st in stages:
        if st.merge and len(st.groups[0]) > 1:
            convs = [cast(Conv, graph.node(n)) for n in st.groups[0]]  # a merge stage holds convs only
            node = merge_convs(convs)
            merged[convs[0].name] = node
            off = 0
            for c in convs:
                remap[c.name] = (node.name, off)
                off += c.out_channels
            dropped.update(c.name for c in convs[1:])
    return merged, dropped


def rewrite_stages(graph: Graph, stages: list[Stage]) -> list[list[list[Node]]]:
    """The nodes each group of ``stages`` (a run of stages, e.g. one part of a schedule)
    executes after the merge rewrite: merged convs with their weights, consumers reading
    channel slices of them. For timing a part as it will run."""
    remap: dict[str, tuple[str, int]] = {}
    merged, _ = _merge_plan(graph, stages, remap)

    def node(name: str) -> Node:
        new = merged.get(name) or _copy(graph.node(name))
        new.inputs = _coalesce([[_moved(v, remap) for v in t] for t in new.inputs])
        return new
    return [[[node(st.groups[0][0])]] if st.merge else [[node(n) for n in g] for g in st.groups] for st in stages]


def _moved(v: Value, remap: dict[str, tuple[str, int]]) -> Value:
    if v.node not in remap:
        return v
    name, off = remap[v.node]
    return Value(name, v.begin + off, v.end + off)


def _copy(n: Node) -> Node:
    import copy

    new = copy.copy(n)  # weights shared, inputs replaced by the caller
    new.inputs = [list(t) for t in n.inputs]
    return new
