"""ATen nodes to the IR. A feature map is an :class:`Fmap`: its IR expression (terms concatenated on channels,
values summed, as the ONNX importer keeps them: a channel ``cat`` and an ``add`` of equal shapes cost no node) and
its ATen shape, batch first. A (B, F) matrix is the IR's (F, 1, 1), so a classifier's flatten costs nothing.
Everything computed from weights alone (a transposed linear weight) is folded with torch. A node the IR cannot take
raises :class:`Refused` naming it; :mod:`.split` leaves it to the fallback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import fx

from ..errors import UserError
from ..ir import Graph, GraphError, Value
from ..ir.nodes import Conv, Identity, Node, Op, Placeholder, Shape
from ..onnx.importer.blocks import cut
from .compound import compound_preactivations

aten = torch.ops.aten
Expr = list[list[Value]]


class FxImportError(UserError):
    """A graph IOS cannot take as a whole (its input or output is not a feature map)."""


class Refused(Exception):
    """One node the IR cannot take, and why."""

    def __init__(self, node: fx.Node, why: str):
        super().__init__(f"{node.name} ({_op_name(node)}): {why}")
        self.node, self.why = node, why


def _op_name(node: fx.Node) -> str:
    target = node.target
    return str(getattr(target, "__name__", target)) if node.op == "call_function" else node.op


@dataclass(frozen=True)
class Fmap:
    """A feature map: its IR expression and its ATen shape (batch first). ``merged``: ATen holds it as rows, (B x R,
    F) (a linear layer on tokens or pixels), of the feature map of this shape, the IR's."""

    expr: Expr
    full: tuple[int, ...]
    merged: tuple[int, ...] | None = None

    @property
    def rank(self) -> int:
        return len(self.full)

    def own(self) -> Fmap:
        """The feature map in its own shape (its rows unmerged)."""
        return Fmap(self.expr, self.merged) if self.merged else self

    def axis(self, dim: int) -> int | None:
        """The IR's axis of ATen's axis ``dim`` (None: the batch axis, or one the batch is merged into)."""
        d = int(dim) % self.rank
        if d == 0:
            return None
        if self.rank == 2 and not self.merged:  # (B, F) is the IR's (F, 1, 1)
            return 0
        return d - 1 + (len(self.merged) - self.rank if self.merged else 0)


class Opaque:
    """A value a survey could not follow (not a feature map, made by a refused node)."""


Convert = Callable[["Importer", fx.Node, list, dict], Any]
CONVERTERS: dict[Any, Convert] = {}


def _key(target: Any) -> Any:
    return getattr(target, "overloadpacket", target)


def converter(*targets: Any) -> Callable[[Convert], Convert]:
    """Register a function for ATen operators (by packet: ``aten.add`` takes ``add.Tensor`` and ``add.Scalar``)."""
    def register(fn: Convert) -> Convert:
        for t in targets:
            CONVERTERS[_key(t)] = fn
        return fn
    return register


def supported(node: fx.Node) -> bool:
    """A first cut: an operator with a converter (which may still refuse this node's shapes or arguments)."""
    return node.op == "call_function" and _key(node.target) in CONVERTERS


def ir_shape(full: Sequence[int]) -> Shape:
    """The IR's per-sample shape of an ATen shape: a (B, F) matrix is (F, 1, 1)."""
    return (int(full[1]), 1, 1) if len(full) == 2 else tuple(int(d) for d in full[1:])


def _numpy(t: torch.Tensor) -> np.ndarray:
    return np.array(t.detach().to("cpu", torch.float32).numpy(), np.float32)


class Importer:
    """The state of one conversion: the IR nodes so far, their shapes, and per FX node its value (an
    :class:`Fmap`, a folded tensor, a tuple of them or a Python value)."""

    def __init__(self, batch: int):
        self.batch = batch
        self.nodes: list[Node] = []
        self.shapes: dict[str, Shape] = {}
        self.env: dict[fx.Node, Any] = {}
        self.producer: dict[str, Node] = {}
        self._count = 0
        self._made: dict[tuple, Value] = {}

    # -- helpers the converters share ------------------------------------------------------------------
    def name(self) -> str:
        self._count += 1
        return str(self._count)

    def add(self, fx_node: fx.Node, node: Node, full: Sequence[int] | None = None) -> Fmap:
        """Append ``node``; its ATen shape is ``full`` (default: the FX node's own), checked against the IR's."""
        try:
            node.output_shape = node.infer_from(self.shapes)[1]
        except GraphError as exc:
            raise Refused(fx_node, str(exc)) from None
        full = tuple(full if full is not None else self.full_of(fx_node))
        if ir_shape(full) != tuple(node.output_shape):
            raise Refused(fx_node, f"the IR computes {node.output_shape} per sample where ATen has {full}")
        self.shapes[node.name] = node.output_shape
        self.producer[node.name] = node
        self.nodes.append(node)
        return Fmap([[Value(node.name, 0, node.output_shape[0])]], full)

    def full_of(self, fx_node: fx.Node) -> tuple[int, ...]:
        val = fx_node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Refused(fx_node, "its output is not one tensor")
        return tuple(int(d) for d in val.shape)

    def value(self, x: Fmap) -> Value:
        """One value for an expression: a concatenation or sum becomes an Identity node, once per expression."""
        if len(x.expr) == 1 and len(x.expr[0]) == 1:
            return x.expr[0][0]
        key = tuple(tuple(t) for t in x.expr)
        if key not in self._made:
            node = self.identity([list(t) for t in x.expr])
            self._made[key] = Value(node.name, 0, node.out_channels_)
        return self._made[key]

    def identity(self, terms: list[list[Value]]) -> Identity:
        """An Identity node appended (a sum or concatenation made one value; the output made the last node)."""
        node = Identity(name=self.name(), inputs=terms)
        node.output_shape = node.infer_from(self.shapes)[1]
        self.shapes[node.name] = node.output_shape
        self.nodes.append(node)
        return node

    def sole_conv(self, fx_node: fx.Node, x: Fmap) -> Conv | None:
        """The conv whose whole output ``x`` is, when nothing else reads it and it has no activation yet."""
        arg = fx_node.args[0]
        if len(x.expr) != 1 or len(x.expr[0]) != 1 or not isinstance(arg, fx.Node) or len(arg.users) != 1:
            return None
        v = x.expr[0][0]
        conv = self.producer.get(v.node)
        if not isinstance(conv, Conv) or conv.act != "identity" or v.begin != 0 or v.end != conv.out_channels:
            return None
        return conv

    def op(self, fx_node: fx.Node, op: str, inputs: list[Fmap], params: dict | None = None,
           consts: Sequence[np.ndarray] = (), args: tuple[str, ...] = (), full: Sequence[int] | None = None) -> Fmap:
        if any(x.merged for x in inputs):  # computed on the feature map itself, handed back as ATen's rows
            if any(x.merged != inputs[0].merged for x in inputs):
                raise Refused(fx_node, "its operands are rows of different feature maps")
            y = self.op(fx_node, op, [x.own() for x in inputs], params, consts, args, full or inputs[0].merged)
            return Fmap(y.expr, self.full_of(fx_node), y.full)
        ranks = {x.rank for x in inputs}
        if len(ranks) > 1:
            raise Refused(fx_node, f"its operands differ in rank ({sorted(ranks)})")
        terms = [list(x.expr[0]) if len(x.expr) == 1 else [self.value(x)] for x in inputs]  # a sum is read as is
        return self.add(fx_node, Op(name=self.name(), inputs=terms, op=op,
                                    params=params or {}, args=args, consts=[np.array(c, np.float32) for c in consts]),
                        full)

    def per_sample(self, fx_node: fx.Node, c: Any, x: Fmap) -> np.ndarray:
        """A constant operand of ``x``'s operator without a batch axis, broadcasting from the right as the IR's
        constants do."""
        x = x.own()
        arr = _numpy(c) if isinstance(c, torch.Tensor) else np.array(c, np.float32)
        if arr.ndim == x.rank:
            if arr.shape[0] != 1 and not (arr == arr[:1]).all():  # (ViT's class token expanded over the batch)
                raise Refused(fx_node, f"a constant of shape {arr.shape} varies along the batch axis")
            arr = arr[0]
        if x.rank == 2:  # the IR's (F, 1, 1)
            arr = arr.reshape((*arr.shape, 1, 1)) if arr.ndim == 1 else arr
        if arr.ndim > len(ir_shape(x.full)):
            raise Refused(fx_node, f"a constant of shape {arr.shape} has more axes than the operand")
        return arr

    # -- the walk ----------------------------------------------------------------------------------------
    def part(self, nodes: Sequence[fx.Node], values: dict[fx.Node, Any], data: fx.Node, output: fx.Node,
             name: str) -> tuple[Graph, Fmap]:
        """The IR graph of ``nodes`` (in order): ``values`` are the weights and what is folded from them,
        ``data`` the one feature map they read (the IR's placeholder), ``output`` the node whose value leaves.
        Returns the graph and its output's ATen form."""
        full = self.full_of(data)
        if len(full) != 4 or full[0] != self.batch:
            raise Refused(data, f"it has shape {full}: IOS takes one (N, C, H, W) image batch in")
        placeholder = Placeholder(name="0", output_shape=ir_shape(full))
        self.shapes["0"] = ir_shape(full)
        self.env.update(values)
        self.env[data] = Fmap([[Value("0", 0, full[1])]], full)
        for fx_node in nodes:
            if fx_node not in values:
                self.env[fx_node] = self.call(fx_node)
        y = self.env[output]
        if not isinstance(y, Fmap):
            raise Refused(output, "its value is not one feature map")
        return self.finish(output, y, placeholder, name), y

    def survey(self, nodes: Sequence[fx.Node], values: dict[fx.Node, Any]) -> dict[fx.Node, str]:
        """Every node a converter refuses, in one walk over ``nodes``: a graph input and a refused node's output
        are read on as new inputs, so that the nodes after them are tried too."""
        refused: dict[fx.Node, str] = {}
        self.env.update(values)
        for fx_node in nodes:
            if fx_node in values or fx_node.op == "output":
                continue
            try:
                if fx_node.op == "placeholder":
                    raise Refused(fx_node, "an input")
                self.env[fx_node] = self.call(fx_node)
            except Refused as exc:
                if exc.node.op != "placeholder":
                    refused[exc.node] = exc.why
                self.env[fx_node] = self.opaque(fx_node, fx_node.meta.get("val"))
        return refused

    def opaque(self, fx_node: fx.Node, val: Any) -> Any:
        """What a node IOS does not compute is, to the nodes after it: a new input where it is a feature map."""
        if isinstance(val, (tuple, list)):
            return tuple(self.opaque(fx_node, v) for v in val)
        if isinstance(val, torch.Tensor) and val.dim() >= 2 and val.shape[0] == self.batch:
            name, shape = f"in.{fx_node.name}", ir_shape(val.shape)
            self.shapes[name] = shape
            return Fmap([[Value(name, 0, shape[0])]], tuple(int(d) for d in val.shape))
        return Opaque()

    def call(self, fx_node: fx.Node) -> Any:
        if fx_node.op != "call_function":
            raise Refused(fx_node, f"{fx_node.op} nodes are not taken")
        args = fx.node.map_arg(fx_node.args, lambda n: self.env[n])
        kwargs = fx.node.map_arg(fx_node.kwargs, lambda n: self.env[n])
        maps: list[Any] = []
        fx.node.map_aggregate((args, kwargs), lambda a: maps.append(a) if isinstance(a, (Fmap, Opaque)) else a)
        if any(isinstance(a, Opaque) for a in maps):
            raise Refused(fx_node, "it reads a value IOS does not make")
        if not maps:  # weights only: folded
            return fx_node.target(*args, **kwargs)  # type: ignore[operator]
        convert = CONVERTERS.get(_key(fx_node.target))
        if convert is None:
            raise Refused(fx_node, "IOS has no converter for it")
        y = convert(self, fx_node, list(args), dict(kwargs))
        if isinstance(y, Fmap) and len(fx_node.users) > 1 and any(len(t) > 1 for t in y.expr):
            # a sum several nodes read is made once (an Identity): a block can end there, as the zoo's do
            y = Fmap([[self.value(y)]], y.full, y.merged)
        return y

    def finish(self, output: fx.Node, y: Fmap, placeholder: Placeholder, name: str) -> Graph:
        last = self.value(y)
        if not self.nodes:
            raise Refused(output, "the part computes nothing: its output is its input")
        if last.begin != 0 or last.end != self.shapes[last.node][0] or self.nodes[-1].name != last.node:
            self.identity([[last]])
        used = _live(self.nodes)
        nodes = compound_preactivations([n for n in self.nodes if n.name in used])
        return Graph(name, placeholder, cut(placeholder, nodes))


def _live(nodes: list[Node]) -> set[str]:
    """The nodes the last one depends on (a converter may leave an unread node behind, a folded batch norm's)."""
    by_name = {n.name: n for n in nodes}
    live, todo = set(), [nodes[-1].name]
    while todo:
        name = todo.pop()
        if name in live or name not in by_name:
            continue
        live.add(name)
        todo.extend(v.node for t in by_name[name].inputs for v in t)
    return live


def to_ir(gm: fx.GraphModule, inputs: Sequence[Any], weights: set[int], batch: int,
          name: str = "fx") -> tuple[Graph, Fmap]:
    """The IR of a whole ATen graph whose inputs are ``inputs`` (``weights``: the positions of the module's
    weights, the one other input is the image batch); raises :class:`Refused` at the first node it cannot take."""
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    data = [p for i, p in enumerate(places) if i not in weights]
    outs = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    if len(data) != 1 or len(outs) != 1 or not isinstance(outs[0], fx.Node):
        raise FxImportError(f"the graph takes {len(data)} feature map(s) and returns {len(outs)} value(s); "
                            f"IOS takes one image batch in and one feature map out")
    values = {p: inputs[i] for i, p in enumerate(places) if i in weights}
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    return Importer(batch).part(nodes, values, data[0], outs[0], name)

