"""Graph and Block: the containers of the IR, with shape inference, validation,
counts, a stable structural hash, JSON round trip and a readable print."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .block import Block
from .nodes import NODE_KINDS, GraphError, Node, Placeholder, Sequential, Shape, Term, Value
from .uses import UseTracking, readers_of

FORMAT = "ios_core.graph/1"


class Graph(UseTracking):
    """A CNN as a chain of blocks; block i's exit is block i+1's enter. Edited through the use-tracking API
    (:mod:`ios_core.ir.uses`: ``users``, ``set_inputs``, ``replace_node``, ``replace_all_uses_with``, ``erase``,
    ``lint``)."""

    def __init__(self, name: str, input: Placeholder, blocks: list[Block]):
        self.name = name
        self.input = input
        self.blocks = blocks
        self._index: dict[str, Node] = {}
        self._in_shapes: dict[str, Shape] = {}
        self._users: dict[str, dict[str, Node]] = {}
        self.infer_shapes()

    # -- access ----------------------------------------------------------------
    def nodes(self) -> Iterator[Node]:
        """The input, then every block's nodes, in topological order."""
        yield self.input
        for block in self.blocks:
            yield from block.nodes

    def node(self, name: str) -> Node:
        try:
            return self._index[name]
        except KeyError:
            raise GraphError(f"graph {self.name}: no node named {name!r}") from None

    @property
    def output(self) -> Node:
        return self.blocks[-1].exit

    @property
    def input_shape(self) -> Shape:
        return self.input.output_shape  # type: ignore[return-value]

    @property
    def output_shape(self) -> Shape:
        return self.output.output_shape  # type: ignore[return-value]

    def num_units(self) -> int:
        """Schedule units: a Sequential compound counts once."""
        return sum(len(b.nodes) for b in self.blocks)

    # -- shapes and validation ---------------------------------------------------
    def infer_shapes(self) -> None:
        """Infer every output shape and validate the graph; errors name the node."""
        if self.input.output_shape is None or len(self.input.output_shape) != 3:
            raise GraphError(f"graph {self.name}: the placeholder needs a (C, H, W) output shape")
        if not self.blocks:
            raise GraphError(f"graph {self.name}: has no blocks")
        self._check_cycles()
        shapes: dict[str, Shape] = {self.input.name: tuple(self.input.output_shape)}  # type: ignore[dict-item]
        index: dict[str, Node] = {self.input.name: self.input}
        in_shapes: dict[str, Shape] = {}
        enter = self.input.name
        for bi, block in enumerate(self.blocks):
            if block.enter != enter:
                raise GraphError(f"graph {self.name}: block {bi} enters at {block.enter!r} but the previous "
                                 f"block ends at {enter!r}")
            if not block.nodes:
                raise GraphError(f"graph {self.name}: block {bi} is empty")
            visible = {enter}
            for n in block.nodes:
                if n.name in index:
                    raise GraphError(f"node {n.name}: the name is used twice")
                for term in n.inputs:
                    for v in term:
                        if v.node in index and v.node not in visible:
                            raise GraphError(f"node {n.name}: reads {v.node!r} from another block "
                                             f"(a block may read only its enter node and its own nodes)")
                in_shapes[n.name], n.output_shape = n.infer_from(shapes)
                shapes[n.name] = n.output_shape
                index[n.name] = n
                visible.add(n.name)
                if isinstance(n, Sequential):
                    for inner in n.nodes:
                        if inner.name in index:
                            raise GraphError(f"node {inner.name}: the name is used twice")
                        index[inner.name] = inner
            used = {v.node for n in block.nodes for t in n.inputs for v in t}
            for n in block.nodes[:-1]:
                if n.name not in used:
                    raise GraphError(f"node {n.name}: its output is never used; only the exit node "
                                     f"(last node) of block {bi} may be a sink")
            if block.parts is not None:
                names = [x for part in block.parts for x in part]
                if sorted(names) != sorted(n.name for n in block.nodes):
                    raise GraphError(f"graph {self.name}: the parts of block {bi} do not cover its nodes "
                                     f"exactly once")
            enter = block.exit.name
        self._index, self._in_shapes = index, in_shapes
        self._users = readers_of(n for b in self.blocks for n in b.nodes)

    def _check_cycles(self) -> None:
        deps = {n.name: [v.node for t in n.inputs for v in t] for b in self.blocks for n in b.nodes}
        state: dict[str, int] = {}
        for root in deps:
            stack = [(root, iter(deps[root]))]
            path = [root]
            state[root] = state.get(root, 0) or 1
            if state[root] == 2:
                continue
            while stack:
                name, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[name] = 2
                    stack.pop()
                    path.pop()
                    continue
                if nxt not in deps or state.get(nxt) == 2:
                    continue
                if state.get(nxt) == 1:
                    cyc = path[path.index(nxt):] + [nxt]
                    raise GraphError(f"node {nxt}: is part of a cycle {' <- '.join(cyc)}")
                state[nxt] = 1
                stack.append((nxt, iter(deps[nxt])))
                path.append(nxt)

    # -- counts ------------------------------------------------------------------
    def input_shape_of(self, node: Node) -> Shape:
        """Shape of the node's summed and concatenated input (from the last inference)."""
        return self._in_shapes[node.name]

    def macs(self) -> int:
        """Multiply-accumulates per sample, IOS-style (1 + k*k*Cin/g per conv output),
        plus one per element for every extra value summed into a term."""
        total = 0
        for n in self.nodes():
            if isinstance(n, Placeholder):
                continue
            total += n.macs(self.input_shape_of(n))
            rest = int(np.prod(n.output_shape[1:]))  # type: ignore[index]
            total += sum((len(t) - 1) * t[0].channels * rest for t in n.inputs)
        return total

    def flops(self) -> int:
        return 2 * self.macs()

    def node_bytes(self, node: Node, itemsize: int = 4) -> int:
        """Bytes moved by one node per sample: inputs read, output written, weights."""
        shapes = {v.node: self._index[v.node].output_shape for t in node.inputs for v in t}
        read = sum(v.channels * int(np.prod(shapes[v.node][1:])) for t in node.inputs for v in t)  # type: ignore
        assert node.output_shape is not None
        out = int(np.prod(node.output_shape))
        inner = node.nodes if isinstance(node, Sequential) else [node]
        w = sum(a.size for n in inner for a in n.weights().values() if a is not None)
        return (read + out + w) * itemsize

    def bytes(self, itemsize: int = 4) -> int:
        return sum(self.node_bytes(n, itemsize) for n in self.nodes() if not isinstance(n, Placeholder))

    # -- weights -------------------------------------------------------------------
    def init_weights(self, seed: int = 0) -> Graph:
        """Seeded float32 weights for every conv and linear node (in graph order)."""
        rng = np.random.default_rng(seed)
        for n in self.nodes():
            if not isinstance(n, Placeholder):
                n.init_weights(rng, self.input_shape_of(n))
        return self

    def weight_arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for n in self._index.values():
            for key, arr in n.weights().items():
                if arr is not None:
                    out[f"{n.name}/{key}"] = arr
        return out

    def save_weights(self, path: str | Path) -> None:
        # Any: numpy's stub types **kwds as ArrayLike but also has a bool ``allow_pickle`` keyword
        arrays: dict[str, Any] = self.weight_arrays()
        np.savez(path, **arrays)

    def load_weights(self, path: str | Path) -> None:
        with np.load(path) as data:
            for key in data.files:
                name, attr = key.rsplit("/", 1)
                self.node(name).set_weight(attr, data[key].astype(np.float32))

    # -- hashing, JSON, printing ---------------------------------------------------
    def structure(self) -> dict[str, Any]:
        """Name-free structure: nodes numbered in graph order (stable across renames)."""
        ids = {n.name: i for i, n in enumerate(self.nodes())}
        rows = []
        for n in self.nodes():
            rows.append([n.kind, n.attrs(), [[[ids[v.node], v.begin, v.end] for v in t] for t in n.inputs],
                         list(n.output_shape or ())])
        blocks = [[ids[b.enter], len(b.nodes),
                   [[ids[x] for x in p] for p in b.parts] if b.parts else None] for b in self.blocks]
        return {"nodes": rows, "blocks": blocks}

    def hash(self) -> str:
        """Stable content hash of structure and shapes; weights and names do not count."""
        blob = json.dumps(self.structure(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "name": self.name, "input": node_to_dict(self.input),
                "blocks": [{"enter": b.enter, "nodes": [node_to_dict(n) for n in b.nodes],
                            **({"parts": b.parts} if b.parts else {})} for b in self.blocks]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Graph:
        if data.get("format") != FORMAT:
            raise GraphError(f"not an ios_core graph (format {data.get('format')!r}, expected {FORMAT!r})")
        blocks = [Block(b["enter"], [node_from_dict(n) for n in b["nodes"]], b.get("parts"))
                  for b in data["blocks"]]
        inp = node_from_dict(data["input"])
        if not isinstance(inp, Placeholder):
            raise GraphError("the graph input must be a placeholder")
        return cls(data["name"], inp, blocks)

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> Graph:
        text = str(text_or_path)
        if not text.lstrip().startswith("{"):
            text = Path(text).read_text()
        return cls.from_dict(json.loads(text))

    def summary(self) -> str:
        c, h, w = self.input_shape
        return (f"Graph {self.name}: input {c}x{h}x{w}, {len(self.blocks)} blocks, {self.num_units()} units, "
                f"{self.macs() / 1e9:.2f} GMACs, output {'x'.join(map(str, self.output_shape))}, "
                f"hash {self.hash()}")

    def __str__(self) -> str:
        lines = [self.summary(), "Sequential("]
        for n in (n for b in self.blocks for n in b.nodes):
            lines.append("  " + format_node(n))
        lines.append(")")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Graph {self.name} {self.num_units()} units hash={self.hash()}>"


def format_inputs(inputs: list[Term]) -> str:
    def val(v: Value, full: int | None = None) -> str:
        return v.node if (v.begin == 0 and (full is None or v.end == full)) else f"{v.node}[{v.begin}:{v.end}]"
    terms = [("+".join(val(v) for v in t) if len(t) > 1 else val(t[0])) for t in inputs]
    return ",".join(terms)


def format_node(n: Node) -> str:
    """IOS-style one-liner: ``[5]Concat(4,2,3) -> 1875x15x15``."""
    shape = "x".join(map(str, n.output_shape)) if n.output_shape else "?"
    return f"[{n.name}]{n.label()}({format_inputs(n.inputs)}) -> {shape}"


def node_to_dict(n: Node) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": n.kind, "name": n.name}
    if n.hint:
        d["hint"] = n.hint
    d["inputs"] = [[v.to_json() for v in t] for t in n.inputs]
    attrs = n.attrs()
    if isinstance(n, Sequential):
        attrs["nodes"] = [node_to_dict(x) for x in n.nodes]
    d.update(attrs)
    if n.output_shape is not None:
        d["output_shape"] = list(n.output_shape)
    return d


def node_from_dict(d: dict[str, Any]) -> Node:
    d = dict(d)
    kind = d.pop("kind", None)
    if kind == "relu":  # the original IR's Relu node
        kind, d["act"] = "activation", "relu"
    cls = NODE_KINDS.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise GraphError(f"node {d.get('name')!r}: unknown kind {kind!r}; known: {sorted(NODE_KINDS)}")
    d["inputs"] = [[Value(str(a), int(b), int(c)) for a, b, c in t] for t in d.get("inputs", [])]
    shape = d.pop("output_shape", None)
    if cls is Placeholder:
        shape = d.pop("shape", shape)
    if cls is Sequential:
        d["nodes"] = [node_from_dict(x) for x in d["nodes"]]
    for key in ("kernel", "stride", "padding", "dilation"):
        if key in d:
            d[key] = tuple(d[key])
    node = cls(**d)
    node.output_shape = tuple(shape) if shape is not None else None
    return node
