"""Node kinds of the IOS graph IR.

A node's input is a list of *terms*; the values inside one term are summed
(multiplied for ``Element(op="mul")``), the terms are concatenated on the channel
axis, and a :class:`Value` is a channel slice ``[begin, end)`` of a producer's
output. Shapes are per sample, the batch implicit: ``(C, H, W)`` for feature maps, any rank
for the tensors of :class:`Op` nodes (``(tokens, features)`` in a transformer); the "channel"
axis is the first per-sample axis. An :class:`Op` reads each term as one operand of an
operator of :mod:`.ops` (the registry), terms not concatenated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np

from ..errors import UserError
from . import ops as registry

Shape = tuple[int, ...]
Pair = tuple[int, int]

ACTIVATIONS = registry.ACTIVATIONS
POOL_TYPES = ("max", "avg", "global_max", "global_avg")
ELEMENT_OPS = ("add", "mul")


class GraphError(UserError, ValueError):
    """A graph is malformed; the message names the offending node."""


@dataclass(frozen=True)
class Value:
    """Channel slice ``[begin, end)`` of the output of node ``node``."""

    node: str
    begin: int
    end: int

    @property
    def channels(self) -> int:
        return self.end - self.begin

    def to_json(self) -> list:
        return [self.node, self.begin, self.end]

    def __str__(self) -> str:
        return self.node


Term = list[Value]


def _pair(v: Any) -> Pair:
    if isinstance(v, int):
        return (v, v)
    a, b = v
    return (int(a), int(b))


@dataclass(kw_only=True, eq=False)
class Node:
    """Base of every node: a name, the input terms and the inferred output shape."""

    name: str
    inputs: list[Term] = field(default_factory=list)
    hint: str = ""
    output_shape: Shape | None = None

    kind: ClassVar[str] = ""
    display: ClassVar[str] = ""

    # -- structure -----------------------------------------------------------
    def attrs(self) -> dict[str, Any]:
        """Structural parameters (no name, inputs or weights): JSON and hash content."""
        return {}

    #: the terms are concatenated into one input (False: each term is one operand, see :class:`Op`)
    concat_terms: ClassVar[bool] = True

    def infer(self, in_shape: Shape) -> Shape:
        """Output shape from the (summed, concatenated) input shape."""
        return in_shape

    def infer_from(self, shapes: dict[str, Shape]) -> tuple[Shape, Shape]:
        """(input shape, output shape) from the producers' output shapes."""
        in_shape = term_shape(self, shapes)
        return in_shape, self.infer(in_shape)

    def set_weight(self, key: str, array: np.ndarray) -> None:
        setattr(self, key, array)

    def macs(self, in_shape: Shape) -> int:
        """Multiply-accumulates per sample (IOS counts 1 per output for cheap ops)."""
        assert self.output_shape is not None
        return int(np.prod(self.output_shape))

    def weights(self) -> dict[str, np.ndarray | None]:
        return {}

    def init_weights(self, rng: np.random.Generator, in_shape: Shape) -> None:
        """Seeded uniform init U(-b, b), b = 1/sqrt(fan_in), as the original did."""

    @property
    def out_channels_(self) -> int:
        assert self.output_shape is not None
        return self.output_shape[0]

    def label(self) -> str:
        return self.display or type(self).__name__


@dataclass(kw_only=True, eq=False)
class Placeholder(Node):
    kind: ClassVar[str] = "placeholder"

    def attrs(self) -> dict[str, Any]:
        return {"shape": list(self.output_shape or ())}

    def macs(self, in_shape: Shape) -> int:
        return 0


def _he_uniform(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...], relu: bool) -> np.ndarray:
    """He-scaled weights (variance 2/fan_in before a ReLU, 1/fan_in otherwise): activations
    keep their scale layer after layer, so the output depends on the input. With PyTorch's
    default U(+-1/sqrt(fan_in)) and a bias on every conv the input washed out: zeros instead
    of the seeded input changed inception_v3's output by 1e-5, under the fp32 tolerance."""
    bound = math.sqrt((6.0 if relu else 3.0) / max(fan_in, 1))
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def _small_bias(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(-0.01, 0.01, size=(n,)).astype(np.float32)


@dataclass(kw_only=True, eq=False)
class Conv(Node):
    """2-D convolution with bias and a fused activation."""

    out_channels: int
    kernel: Pair = (1, 1)
    stride: Pair = (1, 1)
    padding: Pair = (0, 0)
    groups: int = 1
    act: str = "relu"
    dilation: Pair = (1, 1)
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    kind: ClassVar[str] = "conv"
    display: ClassVar[str] = "Conv2d"

    def __post_init__(self) -> None:
        self.kernel, self.stride, self.padding, self.dilation = (
            _pair(self.kernel), _pair(self.stride), _pair(self.padding), _pair(self.dilation))
        if self.act not in ACTIVATIONS:
            raise GraphError(f"node {self.name}: activation {self.act!r} is not one of {ACTIVATIONS}")

    def attrs(self) -> dict[str, Any]:
        out = {"out_channels": self.out_channels, "kernel": list(self.kernel),
               "stride": list(self.stride), "padding": list(self.padding),
               "groups": self.groups, "act": self.act}
        if self.dilation != (1, 1):  # only then: the hashes of undilated graphs stay what they were
            out["dilation"] = list(self.dilation)
        return out

    @property
    def span(self) -> Pair:
        """The dilated kernel's extent."""
        return ((self.kernel[0] - 1) * self.dilation[0] + 1, (self.kernel[1] - 1) * self.dilation[1] + 1)

    def infer(self, in_shape: Shape) -> Shape:
        if len(in_shape) != 3:
            raise GraphError(f"node {self.name}: a 2-D convolution needs a (C, H, W) input, not {in_shape}")
        c, h, w = in_shape
        if c % self.groups or self.out_channels % self.groups:
            raise GraphError(f"node {self.name}: {c} input and {self.out_channels} output channels "
                             f"are not divisible by groups={self.groups}")
        if self.weight is not None and self.weight.shape[1] * self.groups != c:
            raise GraphError(f"node {self.name}: weight expects {self.weight.shape[1] * self.groups} "
                             f"input channels but the input has {c}")
        kh, kw = self.span
        oh = (h + 2 * self.padding[0] - kh) // self.stride[0] + 1
        ow = (w + 2 * self.padding[1] - kw) // self.stride[1] + 1
        if oh <= 0 or ow <= 0:
            raise GraphError(f"node {self.name}: input {h}x{w} is too small for kernel {self.kernel}")
        return (self.out_channels, oh, ow)

    def macs(self, in_shape: Shape) -> int:
        per_out = self.kernel[0] * self.kernel[1] * in_shape[0] // self.groups
        assert self.output_shape is not None
        return int(np.prod(self.output_shape)) * (per_out + 1)

    def weights(self) -> dict[str, np.ndarray | None]:
        return {"weight": self.weight, "bias": self.bias}

    def init_weights(self, rng: np.random.Generator, in_shape: Shape) -> None:
        cin = in_shape[0] // self.groups
        fan_in = cin * self.kernel[0] * self.kernel[1]
        self.weight = _he_uniform(rng, fan_in, (self.out_channels, cin, *self.kernel), self.act == "relu")
        self.bias = _small_bias(rng, self.out_channels)


@dataclass(kw_only=True, eq=False)
class Pool(Node):
    """Pooling. ``avg`` counts padded zeros in the divisor when ``count_include_pad``
    (the IOS runtime's cuDNN mode AVERAGE_COUNT_INCLUDE_PADDING); ONNX import may set
    it False. ``ceil_mode`` follows PyTorch/ONNX (a window must start inside the
    left-padded input)."""

    pool_type: str
    kernel: Pair = (1, 1)
    stride: Pair = (1, 1)
    padding: Pair = (0, 0)
    ceil_mode: bool = False
    count_include_pad: bool = True
    kind: ClassVar[str] = "pool"

    def __post_init__(self) -> None:
        self.kernel, self.stride, self.padding = (
            _pair(self.kernel), _pair(self.stride), _pair(self.padding))
        if self.pool_type not in POOL_TYPES:
            raise GraphError(f"node {self.name}: pool type {self.pool_type!r} is not one of {POOL_TYPES}")

    @property
    def is_global(self) -> bool:
        return self.pool_type.startswith("global")

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pool_type": self.pool_type}
        if not self.is_global:
            out.update(kernel=list(self.kernel), stride=list(self.stride), padding=list(self.padding),
                       ceil_mode=self.ceil_mode, count_include_pad=self.count_include_pad)
        return out

    def out_size(self, size: int, axis: int) -> int:
        k, s, p = self.kernel[axis], self.stride[axis], self.padding[axis]
        span = size + 2 * p - k
        if self.ceil_mode:
            out = -(-span // s) + 1
            if (out - 1) * s >= size + p:
                out -= 1
        else:
            out = span // s + 1
        return out

    def infer(self, in_shape: Shape) -> Shape:
        if len(in_shape) != 3:
            raise GraphError(f"node {self.name}: pooling needs a (C, H, W) input, not {in_shape}")
        c, h, w = in_shape
        if self.is_global:
            return (c, 1, 1)
        oh, ow = self.out_size(h, 0), self.out_size(w, 1)
        if oh <= 0 or ow <= 0:
            raise GraphError(f"node {self.name}: input {h}x{w} is too small for kernel {self.kernel}")
        return (c, oh, ow)

    def macs(self, in_shape: Shape) -> int:
        if self.is_global:
            return int(np.prod(in_shape))
        assert self.output_shape is not None
        return int(np.prod(self.output_shape)) * self.kernel[0] * self.kernel[1]

    def label(self) -> str:
        return {"max": "MaxPool", "avg": "AvgPool", "global_max": "GlobalMaxPool",
                "global_avg": "GlobalAvgPool"}[self.pool_type]


@dataclass(kw_only=True, eq=False)
class Identity(Node):
    """Output = the input expression: how concat and sum are written."""

    kind: ClassVar[str] = "identity"

    def macs(self, in_shape: Shape) -> int:
        return 0

    def label(self) -> str:
        if len(self.inputs) > 1 and all(len(t) == 1 for t in self.inputs):
            return "Concat"
        if len(self.inputs) == 1 and len(self.inputs[0]) > 1:
            return "Add"
        return "Identity"


@dataclass(kw_only=True, eq=False)
class Element(Node):
    """Element-wise add or multiply of the values of its single term."""

    op: str = "add"
    kind: ClassVar[str] = "element"

    def __post_init__(self) -> None:
        if self.op not in ELEMENT_OPS:
            raise GraphError(f"node {self.name}: element op {self.op!r} is not one of {ELEMENT_OPS}")

    def attrs(self) -> dict[str, Any]:
        return {"op": self.op}

    def label(self) -> str:
        return "Mul" if self.op == "mul" else "Add"


@dataclass(kw_only=True, eq=False)
class Activation(Node):
    act: str = "relu"
    kind: ClassVar[str] = "activation"

    def __post_init__(self) -> None:
        if self.act not in ACTIVATIONS:
            raise GraphError(f"node {self.name}: activation {self.act!r} is not one of {ACTIVATIONS}")

    def attrs(self) -> dict[str, Any]:
        return {"act": self.act}

    def label(self) -> str:
        return self.act.capitalize()


@dataclass(kw_only=True, eq=False)
class Flatten(Node):
    """(C, H, W) -> (C*H*W, 1, 1), in NCHW order (ONNX Flatten after a CNN body)."""

    kind: ClassVar[str] = "flatten"

    def infer(self, in_shape: Shape) -> Shape:
        return (int(np.prod(in_shape)), 1, 1)

    def macs(self, in_shape: Shape) -> int:
        return 0


@dataclass(kw_only=True, eq=False)
class Linear(Node):
    """Fully connected layer over the flattened input; output (out_features, 1, 1)."""

    out_features: int
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    kind: ClassVar[str] = "linear"

    def attrs(self) -> dict[str, Any]:
        return {"out_features": self.out_features}

    def infer(self, in_shape: Shape) -> Shape:
        n = int(np.prod(in_shape))
        if self.weight is not None and self.weight.shape[1] != n:
            raise GraphError(f"node {self.name}: weight expects {self.weight.shape[1]} features, input has {n}")
        return (self.out_features, 1, 1)

    def macs(self, in_shape: Shape) -> int:
        return self.out_features * (int(np.prod(in_shape)) + 1)

    def weights(self) -> dict[str, np.ndarray | None]:
        return {"weight": self.weight, "bias": self.bias}

    def init_weights(self, rng: np.random.Generator, in_shape: Shape) -> None:
        n = int(np.prod(in_shape))
        self.weight = _he_uniform(rng, n, (self.out_features, n), False)
        self.bias = _small_bias(rng, self.out_features)


def term_shape(node: Node, shapes: dict[str, Shape]) -> Shape:
    """Shape of a node's input expression, checking the term/value rules: every value has the same
    shape past its first (channel) axis, the terms are concatenated on that axis."""
    if not node.inputs or any(not t for t in node.inputs):
        raise GraphError(f"node {node.name}: has an empty input term")
    channels, hw = 0, None
    for ti, term in enumerate(node.inputs):
        tc = None
        for v in term:
            if v.node not in shapes:
                raise GraphError(f"node {node.name}: input {v.node!r} is not defined before it "
                                 f"(dangling input or cycle)")
            pc, rest = shapes[v.node][0], tuple(shapes[v.node][1:])
            if not 0 <= v.begin < v.end <= pc:
                raise GraphError(f"node {node.name}: slice [{v.begin}:{v.end}) of {v.node!r} is out "
                                 f"of range (it has {pc} channels)")
            if tc is None:
                tc = v.channels
            elif v.channels != tc:
                raise GraphError(f"node {node.name}: term {ti} sums values with different channel "
                                 f"counts ({tc} vs {v.channels} from {v.node!r})")
            if hw is None:
                hw = rest
            elif rest != hw:
                raise GraphError(f"node {node.name}: input {v.node!r} is {'x'.join(map(str, rest))} but other "
                                 f"inputs are {'x'.join(map(str, hw))}")
        channels += tc or 0
    assert hw is not None
    return (channels, *hw)


def operand_shape(node: Node, term_index: int, shapes: dict[str, Shape]) -> Shape:
    """Shape of one term read as an operand: its values summed (equal shapes)."""
    term = node.inputs[term_index]
    if not term:
        raise GraphError(f"node {node.name}: has an empty input term")
    out = None
    for v in term:
        if v.node not in shapes:
            raise GraphError(f"node {node.name}: input {v.node!r} is not defined before it (dangling input or cycle)")
        full = shapes[v.node]
        if not 0 <= v.begin < v.end <= full[0]:
            raise GraphError(f"node {node.name}: slice [{v.begin}:{v.end}) of {v.node!r} is out of range "
                             f"(it has {full[0]} channels)")
        shape = (v.channels, *full[1:])
        if out is not None and shape != out:
            raise GraphError(f"node {node.name}: operand {term_index} sums values of shapes {out} and {shape}")
        out = shape
    assert out is not None
    return out


@dataclass(kw_only=True, eq=False)
class Op(Node):
    """One operator of the registry (:mod:`ios_core.ir.ops`). ``args`` orders its operands: ``"x<i>"`` is input
    term i (its values summed), ``"k<j>"`` constant j (``consts``, float arrays without a batch axis that
    broadcast from the right). ``params`` are the operator's attributes (per-sample axes)."""

    op: str
    params: dict[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    consts: list[np.ndarray | None] = field(default_factory=list)
    const_shapes: list[tuple[int, ...]] = field(default_factory=list)
    operand_shapes: list[Shape] = field(default_factory=list)
    kind: ClassVar[str] = "op"
    concat_terms: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.op not in registry.OPS:
            raise GraphError(f"node {self.name}: operator {self.op!r} is not in ios_core's registry")
        if not self.args:
            self.args = tuple(f"x{i}" for i in range(len(self.inputs)))
        self.args = tuple(self.args)
        if not self.const_shapes:
            self.const_shapes = [tuple(c.shape) for c in self.consts if c is not None]
        self.const_shapes = [tuple(s) for s in self.const_shapes]
        if not self.consts:
            self.consts = [None] * len(self.const_shapes)

    @property
    def opdef(self) -> registry.OpDef:
        return registry.OPS[self.op]

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "params": self.params}
        if self.args != tuple(f"x{i}" for i in range(len(self.inputs))):
            out["args"] = list(self.args)
        if self.const_shapes:
            out["const_shapes"] = [list(s) for s in self.const_shapes]
        return out

    def operands(self, xs: list, consts: list) -> list:
        """The operator's operands in order, from the input terms' values ``xs`` and the constants."""
        return [xs[int(a[1:])] if a[0] == "x" else consts[int(a[1:])] for a in self.args]

    def infer_from(self, shapes: dict[str, Shape]) -> tuple[Shape, Shape]:
        if not self.inputs:
            raise GraphError(f"node {self.name}: an operator node needs at least one input")
        self.operand_shapes = [operand_shape(self, i, shapes) for i in range(len(self.inputs))]
        ranks = {len(s) for s in self.operand_shapes}
        if len(ranks) > 1 and self.opdef.arity != 1 and not self.opdef.mixed_ranks:
            raise GraphError(f"node {self.name}: {self.op} operands {self.operand_shapes} differ in rank "
                             f"(the batch axes would not line up)")
        shapes_in = self.operands(self.operand_shapes, self.const_shapes)
        for s in self.const_shapes:
            if len(s) > max(ranks):
                raise GraphError(f"node {self.name}: constant of shape {s} has more axes than the operands")
        try:
            out = tuple(int(d) for d in self.opdef.infer(shapes_in, self.params))
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise GraphError(f"node {self.name}: {self.op}: {exc}") from None
        if not out or min(out) <= 0:
            raise GraphError(f"node {self.name}: {self.op} gives an empty tensor {out}")
        return self.operand_shapes[0], out

    def macs(self, in_shape: Shape) -> int:
        assert self.output_shape is not None
        return self.opdef.cost(self.operands(self.operand_shapes, self.const_shapes), self.output_shape, self.params)

    def weights(self) -> dict[str, np.ndarray | None]:
        return {f"k{i}": c for i, c in enumerate(self.consts)}

    def set_weight(self, key: str, array: np.ndarray) -> None:
        self.consts[int(key[1:])] = array

    def init_weights(self, rng: np.random.Generator, in_shape: Shape) -> None:
        """Constants are part of what the op computes (an imported model's): only missing ones (a graph read
        from JSON without its weights) are drawn."""
        self.consts = [c if c is not None else rng.uniform(0.5, 1.5, size=s).astype(np.float32)
                       for c, s in zip(self.consts, self.const_shapes)]

    def label(self) -> str:
        return self.op.replace("_", " ").title().replace(" ", "")


@dataclass(kw_only=True, eq=False)
class Sequential(Node):
    """A compound run back to back as one schedule unit. ``nodes[0]`` reads the
    compound's inputs; every later inner node reads the whole previous output."""

    nodes: list[Node] = field(default_factory=list)
    kind: ClassVar[str] = "sequential"

    def attrs(self) -> dict[str, Any]:
        return {"nodes": [{"kind": n.kind, **n.attrs()} for n in self.nodes]}

    def infer(self, in_shape: Shape) -> Shape:
        if not self.nodes:
            raise GraphError(f"node {self.name}: sequential compound has no inner nodes")
        shape = in_shape
        for inner in self.nodes:
            inner.output_shape = inner.infer(shape)
            shape = inner.output_shape
        return shape

    def macs(self, in_shape: Shape) -> int:
        total, shape = 0, in_shape
        for inner in self.nodes:
            total += inner.macs(shape)
            shape = cast(Shape, inner.output_shape)  # set by infer()
        return total

    def init_weights(self, rng: np.random.Generator, in_shape: Shape) -> None:
        shape = in_shape
        for inner in self.nodes:
            inner.init_weights(rng, shape)
            shape = cast(Shape, inner.output_shape)  # set by infer()

    def label(self) -> str:
        return self.hint or "Sequential"


NODE_KINDS: dict[str, type[Node]] = {
    cls.kind: cls for cls in (Placeholder, Conv, Pool, Identity, Element, Activation,
                              Flatten, Linear, Op, Sequential)
}
