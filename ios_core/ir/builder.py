"""GraphBuilder: write models the way the IOS README does, with shapes known as you go.

Names are a counter turned into strings ("0" is the placeholder), as in the original;
the graph hash does not depend on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from .graph import Block, Graph
from .nodes import Activation, Conv, Element, Identity, Node, Placeholder, Pool, Sequential, Shape, Term, Value

Inputs = Sequence[Sequence[Value]]


class GraphBuilder:
    def __init__(self, name: str, input_shape: Shape):
        self.name = name
        self._counter = 0
        shape = cast(Shape, tuple(input_shape))
        self.input = Placeholder(name=self._next(), output_shape=shape)
        self.shapes: dict[str, Shape] = {self.input.name: shape}
        self.blocks: list[Block] = []
        self._block: Block | None = None
        self._parts: list[list[str]] | None = None
        self._last_exit = self.input.name

    @property
    def x(self) -> Value:
        """The graph input as a value."""
        return self.full(self.input)

    def _next(self) -> str:
        name = str(self._counter)
        self._counter += 1
        return name

    def full(self, node: Node) -> Value:
        return Value(node.name, 0, node.output_shape[0])  # type: ignore[index]

    def channels(self, inputs: Inputs) -> int:
        return sum(t[0].channels for t in inputs)

    # -- blocks -----------------------------------------------------------------
    def block(self) -> GraphBuilder:
        """Start a new block entered at the previous block's exit."""
        self._close()
        self._block = Block(self._last_exit)
        return self

    def part(self) -> None:
        """Start a new DP part inside the current block (NASNet cells)."""
        if self._parts is None:
            self._parts = []
        self._parts.append([])

    def _close(self) -> None:
        if self._block is not None and self._block.nodes:
            if self._parts is not None:
                self._block.parts = [p for p in self._parts if p]
            self.blocks.append(self._block)
            self._last_exit = self._block.exit.name
        self._block, self._parts = None, None

    def add(self, node: Node) -> Value:
        if self._block is None:
            self.block()
        node.output_shape = node.infer_from(self.shapes)[1]
        self.shapes[node.name] = node.output_shape
        self._block.nodes.append(node)  # type: ignore[union-attr]
        if self._parts is not None:
            self._parts[-1].append(node.name)
        return self.full(node)

    def build(self, seed: int | None = 0) -> Graph:
        self._close()
        graph = Graph(self.name, self.input, self.blocks)
        if seed is not None:
            graph.init_weights(seed)
        return graph

    # -- operators ----------------------------------------------------------------
    @staticmethod
    def _terms(inputs: Inputs) -> list[Term]:
        return [list(t) for t in inputs]

    def conv2d(self, inputs: Inputs, out_channels: int, kernel=(1, 1), stride=(1, 1), padding=(0, 0),
               groups: int = 1, act: str = "relu", hint: str = "") -> Value:
        return self.add(Conv(name=self._next(), inputs=self._terms(inputs), out_channels=out_channels,
                             kernel=kernel, stride=stride, padding=padding, groups=groups, act=act,
                             hint=hint))

    def pool(self, inputs: Inputs, pool_type: str, kernel=(1, 1), stride=(1, 1), padding=(0, 0),
             hint: str = "", **kw) -> Value:
        return self.add(Pool(name=self._next(), inputs=self._terms(inputs), pool_type=pool_type,
                             kernel=kernel, stride=stride, padding=padding, hint=hint, **kw))

    def identity(self, inputs: Inputs, hint: str = "") -> Value:
        return self.add(Identity(name=self._next(), inputs=self._terms(inputs), hint=hint))

    def element(self, inputs: Inputs, op: str = "add") -> Value:
        return self.add(Element(name=self._next(), inputs=self._terms(inputs), op=op))

    def activation(self, inputs: Inputs, act: str = "relu") -> Value:
        return self.add(Activation(name=self._next(), inputs=self._terms(inputs), act=act))

    def relu(self, inputs: Inputs) -> Value:
        return self.activation(inputs, "relu")

    # -- compounds (one schedule unit each) -----------------------------------------
    def sequential(self, inputs: Inputs, inner: list[Node], hint: str) -> Value:
        return self.add(Sequential(name=self._next(), inputs=self._terms(inputs), nodes=inner, hint=hint))

    def _inner_conv(self, **kw) -> Conv:
        self._inner += 1
        return Conv(name=f"{self._counter}.{self._inner}", **kw)

    def relu_sep_conv(self, inputs: Inputs, out_channels: int, kernel, stride, padding) -> Value:
        """Relu -> depthwise k x k (no act) -> pointwise 1x1 (no act), one unit."""
        cin = self.channels(inputs)
        self._inner = 0
        inner: list[Node] = [Activation(name=f"{self._counter}.0", act="relu")]
        inner.append(self._inner_conv(out_channels=cin, kernel=kernel, stride=stride, padding=padding,
                                      groups=cin, act="identity"))
        inner.append(self._inner_conv(out_channels=out_channels, act="identity"))
        return self.sequential(inputs, inner, "ReluSepConv")

    def relu_conv(self, inputs: Inputs, out_channels: int, kernel=(1, 1), stride=(1, 1),
                  padding=(0, 0), groups: int = 1) -> Value:
        """Relu -> conv (no act), one unit."""
        self._inner = 0
        inner: list[Node] = [Activation(name=f"{self._counter}.0", act="relu"),
                             self._inner_conv(out_channels=out_channels, kernel=kernel, stride=stride,
                                              padding=padding, groups=groups, act="identity")]
        return self.sequential(inputs, inner, "ReluConv")
