"""The importer's state for one model and batch size, the helpers every converter shares, and the walk over
the nodes, which folds constant nodes and hands the others to their converters (:mod:`.registry`)."""

from __future__ import annotations

from typing import cast

import numpy as np
import onnx
from onnx import numpy_helper

from ...ir import Graph, GraphError, Value
from ...ir.nodes import Flatten, Identity, Node, Op, Placeholder, Shape
from . import lazy
from .blocks import cut
from .errors import OnnxImportError, arity, at, foreign, unknown
from .fold import fold, folds
from .registry import CONVERTERS, attrs
from .symbols import BatchAxis, Expr, SymbolTable, key


class Importer:
    """One import: the model's constants, the symbol table, the IR nodes made so far and the helpers that make
    them; :meth:`run` walks the nodes."""

    def __init__(self, model: onnx.ModelProto, batch: int):
        self.model, self.batch = model, batch
        g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
        self.consts: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.uses: dict[str, int] = {}
        for n in g.node:
            for i in n.input:
                self.uses[i] = self.uses.get(i, 0) + 1
        for o in g.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1
        self.symbols = SymbolTable()  # ONNX tensor -> its expression and full ONNX shape (batch included)
        self.lazy: lazy.Held = {}  # held-back Transpose: (source, perm)
        self.shapes: dict[str, Shape] = {}
        self.nodes: list[Node] = []
        self.producer: dict[str, Node] = {}  # ONNX tensor -> IR node that is exactly it
        self.made: dict[tuple[tuple[Value, ...], ...], Value] = {}  # key(expression) -> its Identity node's value
        self._count = 0

    # -- helpers -----------------------------------------------------------------
    def error(self, node: onnx.NodeProto, why: str) -> OnnxImportError:
        return OnnxImportError(at(node, why))

    def new_name(self) -> str:
        self._count += 1
        return str(self._count)

    def define(self, out: str, expr: Expr, full: tuple[int, ...]) -> None:
        self.symbols.define(out, expr, full)

    def full(self, name: str) -> tuple[int, ...]:
        """The full ONNX shape (batch included) of feature map ``name``."""
        return self.symbols.full(name)

    def add(self, n: onnx.NodeProto, node: Node, out: str, full: tuple[int, ...] | None = None) -> Node:
        """Append ``node`` as ONNX tensor ``out``; ``full`` its ONNX shape (default: batch + its IR shape)."""
        try:
            node.output_shape = node.infer_from(self.shapes)[1]
        except GraphError as exc:
            raise self.error(n, str(exc)) from None
        self.shapes[node.name] = node.output_shape
        self.nodes.append(node)
        self.define(out, [[Value(node.name, 0, node.output_shape[0])]],
                    full if full is not None else (self.batch, *node.output_shape))
        self.producer[out] = node
        return node

    def op(self, n: onnx.NodeProto, name: str, inputs: list[Expr], out: str, params: dict | None = None,
           consts: list[np.ndarray] | None = None, args: tuple[str, ...] = (), full: tuple[int, ...] | None = None,
           merged: bool = False) -> Node:
        """A registry operator; ``merged``: the output keeps the input's merged batch (ONNX axis 0 = B x IR axis 0)."""
        terms = [[self.materialize(e)] for e in inputs]
        node = self.add(n, Op(name=self.new_name(), inputs=terms, op=name, params=params or {}, args=args,
                              consts=[np.array(c, np.float32) for c in consts or []]),  # writable copies
                        out, full)
        if full is None and merged:
            shape = cast(Shape, node.output_shape)
            self.define(out, self.symbols.expr(out), (self.batch * shape[0], *shape[1:]))
        return node

    def expr(self, node: onnx.NodeProto, name: str) -> Expr:
        if name in self.lazy:
            lazy.resolve(self, node, name)
        if name not in self.symbols:
            raise self.error(node, f"input {name!r} is a constant or unknown tensor where a feature map "
                                   f"is expected")
        expr = self.symbols.expr(name)
        made = self.made.get(key(expr))  # a sum or concatenation materialized already: its node
        return [[made]] if made is not None else expr

    def materialize(self, expr: Expr) -> Value:
        """One value for an expression: a concatenation or sum of several values becomes an Identity node, made
        once per expression (a pre-norm transformer's residual sum is read by its LayerNorm and by the next sum)."""
        if len(expr) == 1 and len(expr[0]) == 1:
            return expr[0][0]
        k = key(expr)
        if k in self.made:
            return self.made[k]
        node = Identity(name=self.new_name(), inputs=[list(t) for t in expr])
        node.output_shape = node.infer_from(self.shapes)[1]
        self.shapes[node.name] = node.output_shape
        self.nodes.append(node)
        self.made[k] = Value(node.name, 0, node.output_shape[0])
        return self.made[k]

    def expr_shape(self, expr: Expr) -> Shape:
        return Identity(name="?", inputs=expr).infer_from(self.shapes)[0]

    def ir_shape(self, n: onnx.NodeProto, name: str) -> Shape:
        return self.expr_shape(self.expr(n, name))

    def mode(self, n: onnx.NodeProto, name: str) -> BatchAxis:
        """How ``name``'s ONNX axes map to the IR's (see :class:`.symbols.BatchAxis`)."""
        shape, full = self.ir_shape(n, name), self.full(name)
        if shape == full[1:] and full[0] == self.batch:
            return BatchAxis.OWN
        if len(full) == 2 and full[0] == self.batch and shape == (full[1], 1, 1):
            return BatchAxis.VECTOR
        if full[0] == self.batch * shape[0] and shape[1:] == full[1:]:
            return BatchAxis.MERGED
        raise self.error(n, f"internal: IR shape {shape} does not match ONNX shape {full} of {name!r}")

    def tensor(self, n: onnx.NodeProto, name: str) -> tuple[Expr, BatchAxis]:
        """The expression of ``name`` with its ONNX axes mapping to IR axes (OWN or MERGED): a vector
        kept as (F, 1, 1) is reshaped to (F,) here."""
        expr, mode = self.expr(n, name), self.mode(n, name)
        if mode is BatchAxis.VECTOR:
            tmp = f"{name}#vec"
            if tmp not in self.symbols:
                self.op(n, "reshape", [expr], tmp, {"shape": [self.full(name)[1]]})
            return self.symbols.expr(tmp), BatchAxis.OWN
        return expr, mode

    def axis(self, n: onnx.NodeProto, name: str, a: int, mode: BatchAxis | None = None) -> int:
        """The IR axis of ONNX axis ``a`` of ``name``."""
        rank = len(self.full(name))
        mode = mode or self.tensor(n, name)[1]
        a = int(a) % rank if -rank <= int(a) < rank else -1
        if a < 0:
            raise self.error(n, f"axis out of range for a rank-{rank} tensor")
        if a == 0 and not (mode is BatchAxis.MERGED and self.batch == 1):
            raise self.error(n, "it works along the batch axis, which the IR keeps implicit")
        return a - 1 if mode is BatchAxis.OWN else a

    def const(self, node: onnx.NodeProto, idx: int) -> np.ndarray | None:
        if idx >= len(node.input) or not node.input[idx]:
            return None
        name = node.input[idx]
        if name not in self.consts:
            raise self.error(node, f"input {name!r} must be a constant (initializer)")
        return self.consts[name]

    def required(self, node: onnx.NodeProto, idx: int) -> np.ndarray:
        """A constant input the operator cannot do without."""
        value = self.const(node, idx)
        if value is None:
            raise self.error(node, f"input {idx} is missing ({node.op_type} needs it)")
        return value

    def sole_consumer(self, tensor: str) -> bool:
        return self.uses.get(tensor, 0) == 1

    def alias(self, out: str, src: str) -> None:
        self.symbols.alias(out, src)
        if src in self.producer:
            self.producer[out] = self.producer[src]

    def per_sample_const(self, n: onnx.NodeProto, c: np.ndarray, rank: int, mode: BatchAxis) -> np.ndarray:
        """A constant operand of a broadcasting op on tensors of ONNX rank ``rank``, without a batch axis."""
        c = np.asarray(c)
        if c.ndim == rank and mode is BatchAxis.OWN:
            if c.shape[0] not in (1, self.batch):
                raise self.error(n, f"constant of shape {c.shape} does not broadcast over the batch")
            if c.shape[0] > 1 and not np.all(c == c[:1]):
                raise self.error(n, f"constant of shape {c.shape} differs between samples of the batch")
            c = c[0]
        elif c.ndim == rank and c.shape[0] != 1:
            raise self.error(n, f"constant of shape {c.shape} does not broadcast over a merged batch axis")
        elif c.ndim > rank:
            raise self.error(n, f"constant of shape {c.shape} has more axes than the tensor ({rank})")
        return c.astype(np.float32)

    def operands(self, n: onnx.NodeProto, exprs: dict[str, Expr], rank: int, mode: BatchAxis,
                 const_rank: int | None = None) -> tuple[list[Expr], list[np.ndarray], tuple[str, ...]]:
        """The ONNX node's inputs, in order, as an Op's tensor operands (``exprs``) and per-sample constants, with
        the ``args`` that order them; ``const_rank``: the rank every constant must have."""
        inputs: list[Expr] = []
        consts: list[np.ndarray] = []
        args: list[str] = []
        for i in n.input:
            if i in self.consts:
                c = self.per_sample_const(n, self.consts[i], rank, mode)
                if const_rank is not None and c.ndim != const_rank:
                    raise self.error(n, f"a constant of shape {self.consts[i].shape} in a concatenation")
                args.append(f"k{len(consts)}")
                consts.append(c)
            else:
                args.append(f"x{len(inputs)}")
                inputs.append(exprs[i])
        return inputs, consts, tuple(args)

    # -- views of a tensor shared by several converters ----------------------------------------------
    def reshape_to(self, n: onnx.NodeProto, src: str, target: tuple[int, ...], out: str) -> None:
        """``src`` as the ONNX shape ``target`` (row-major): an alias where the IR shape stays, else a reshape."""
        full = self.full(src)
        if int(np.prod(target)) != int(np.prod(full)):
            raise self.error(n, f"cannot reshape {full} to {target}")
        b = self.batch
        x = self.expr(n, src)
        shape = self.expr_shape(x)
        if target[0] == b:
            want = tuple(target[1:])
            if not want:
                raise self.error(n, f"a reshape to {target} leaves one number per sample; not supported")
            if len(want) == 1 and shape[1:] == (1, 1) and shape[0] == want[0]:
                self.define(out, x, target)  # a vector kept as (F, 1, 1)
                return
            if len(want) == 1 and len(shape) == 3 and self.mode(n, src) is BatchAxis.OWN:
                self.add(n, Flatten(name=self.new_name(), inputs=x), out, target)
                return
        elif target[0] % b == 0:
            want = (target[0] // b, *target[1:])
        else:
            raise self.error(n, f"a reshape of {full} to {target} mixes samples of the batch")
        if want == shape:
            self.define(out, x, target)
            return
        self.op(n, "reshape", [x], out, {"shape": list(want)}, full=target)

    def transpose(self, n: onnx.NodeProto, src: str, x: Expr, mode: BatchAxis, perm: tuple[int, ...],
                  out: str) -> None:
        """``src`` (its expression ``x`` and axis mode) transposed by ``perm``, which keeps the batch axis on
        axis 0, as a transpose operator."""
        ir_perm = [p - 1 for p in perm[1:]] if mode is BatchAxis.OWN else list(perm)
        full = tuple(self.full(src)[p] for p in perm)
        self.op(n, "transpose", [x], out, {"perm": ir_perm}, full=full)

    def slice_src(self, n: onnx.NodeProto, src: str, axes: list[int], starts: list[int], ends: list[int],
                  steps: list[int], out: str) -> None:
        """``src`` sliced on ONNX axes: a channel slice of the value where it can be, else a slice op."""
        x, mode = self.tensor(n, src)
        full = list(self.full(src))
        ir_axes, norm = [], []
        for ax, b, e, st in zip(axes, starts, ends, steps):
            ax %= len(full)
            b, e, st = slice(b, e, st).indices(full[ax])
            if st > 0 and e < b:
                e = b
            size = len(range(b, e, st))
            if (b, size, st) == (0, full[ax], 1):
                continue
            full[ax] = size
            ir_axes.append(self.axis(n, src, ax, mode))
            norm.append((b, e, st))
        if not ir_axes:
            return self.define(out, x, tuple(full))
        if ir_axes == [0] and norm[0][2] == 1 and len(x) == 1 and len(x[0]) == 1:
            v = x[0][0]
            self.define(out, [[Value(v.node, v.begin + norm[0][0], v.begin + norm[0][1])]], tuple(full))
            return
        self.op(n, "slice", [x], out, {"axes": ir_axes, "starts": [s[0] for s in norm],
                                       "ends": [s[1] if s[1] >= 0 else -(2 ** 62) for s in norm],
                                       "steps": [s[2] for s in norm]}, full=tuple(full))

    # -- the walk ------------------------------------------------------------------
    def run(self, name: str) -> Graph:
        g = self.model.graph
        placeholder = self._input()
        for n in g.node:
            if n.domain not in ("", "ai.onnx"):
                raise self.error(n, foreign(n))
            if n.op_type != "Constant" and folds(n, self.consts):
                fold(n, self.consts, self.opset)
                continue
            if n.op_type not in lazy.LAZY_READERS:  # a held-back transpose is made real (or refused) first
                for i in n.input:
                    if i in self.lazy:
                        lazy.resolve(self, n, i)
            convert = CONVERTERS.get(n.op_type)
            if convert is None:
                raise self.error(n, unknown(n))
            for i in n.input:  # refused here for every converter: some read an input's shape before its expression
                if i and i not in self.symbols and i not in self.consts and i not in self.lazy:
                    raise self.error(n, f"input {i!r} is unknown: no graph input, initializer or earlier node "
                                        f"makes it")
            if why := arity(n, self.opset):  # a converter reads its inputs by position
                raise self.error(n, why)
            convert(self, n, attrs(n))
        if len(g.output) != 1:
            raise OnnxImportError(f"expected one graph output, found {len(g.output)}")
        if not g.node:
            raise OnnxImportError("the model has no operators")
        out = self.expr(g.node[-1], g.output[0].name)
        last = self.materialize(out)
        if not self.nodes:
            raise OnnxImportError("the model computes nothing: its output is its input")
        if last.begin != 0 or last.end != self.shapes[last.node][0] or self.nodes[-1].name != last.node:
            node = Identity(name=self.new_name(), inputs=[[last]])
            self.add(g.node[-1], node, g.output[0].name)
        return Graph(name, placeholder, cut(placeholder, self.nodes))

    def _input(self) -> Placeholder:
        """The graph's one input, NCHW with known C, H, W, as the placeholder "0"."""
        g = self.model.graph
        inputs = [i for i in g.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise OnnxImportError(f"expected one graph input, found {len(inputs)}: {[i.name for i in inputs]}")
        dims = inputs[0].type.tensor_type.shape.dim
        if len(dims) != 4 or any(not d.HasField("dim_value") for d in dims[1:]):
            raise OnnxImportError(f"input {inputs[0].name!r} must be NCHW with known C, H, W")
        shape = cast(Shape, tuple(int(d.dim_value) for d in dims[1:]))  # len(dims) == 4 checked above
        placeholder = Placeholder(name="0", output_shape=shape)
        self.shapes["0"] = shape
        self.define(inputs[0].name, [[Value("0", 0, shape[0])]], (self.batch, *shape))
        return placeholder
