"""Held-back ("lazy") Transposes.

A Transpose that moves the batch off ONNX axis 0 (timm's ``qkv.permute(2, 0, 3, 1, 4)``) cannot be an IR
transpose, whose shapes are per sample. It is held back as (source, permutation) and read through the
permutation by the operators in :data:`LAZY_READERS`: a Transpose composes with it, and slices, squeezes
and gathers of its leading axes apply to its source. Any other reader makes it real first
(:func:`resolve`), which it can be only once the batch is back on axis 0.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import onnx

from .symbols import BatchAxis, Expr, SymbolTable

#: the operators that read a held-back Transpose as it is (through the batch-moving permutation)
LAZY_READERS = frozenset({"Transpose", "Slice", "Squeeze", "Gather"})

Held = dict[str, tuple[str, tuple[int, ...]]]


class Host(Protocol):
    """What this module uses of the importer (:class:`.state.Importer`, which imports this module)."""

    symbols: SymbolTable
    lazy: Held  # held-back Transpose: output -> (source, perm)

    def error(self, node: onnx.NodeProto, why: str) -> Exception: ...

    def tensor(self, n: onnx.NodeProto, name: str) -> tuple[Expr, BatchAxis]: ...

    def transpose(self, n: onnx.NodeProto, src: str, x: Expr, mode: BatchAxis, perm: tuple[int, ...],
                  out: str) -> None: ...

    def reshape_to(self, n: onnx.NodeProto, src: str, target: tuple[int, ...], out: str) -> None: ...

    def slice_src(self, n: onnx.NodeProto, src: str, axes: list[int], starts: list[int], ends: list[int],
                  steps: list[int], out: str) -> None: ...


def hold(imp: Host, src: str, perm: tuple[int, ...], out: str) -> None:
    """``out`` is ``src`` transposed by ``perm``, which moves the batch axis: not made yet."""
    imp.lazy[out] = (src, perm)


def compose(imp: Host, src: str, perm: tuple[int, ...], out: str) -> None:
    """A transpose of a held-back transpose: held back too, the two permutations composed."""
    base, first = imp.lazy[src]
    imp.lazy[out] = (base, tuple(first[p] for p in perm))


def resolve(imp: Host, n: onnx.NodeProto, name: str) -> None:
    """A held-back Transpose used other than through slices of its leading axes: made real, which it can
    be only once the batch is back on axis 0."""
    base, perm = imp.lazy.pop(name)
    if perm[0] != 0:
        raise imp.error(n, f"it reads {name!r}, a Transpose {list(perm)} that moves the batch axis off axis 0; "
                           f"only slices, squeezes and gathers of the leading axes are supported after one")
    x, mode = imp.tensor(n, base)
    if perm == tuple(range(len(perm))):
        imp.symbols.define(name, x, tuple(imp.symbols.full(base)[p] for p in perm))
        return
    imp.transpose(n, base, x, mode, perm, name)


def slice_held(imp: Host, n: onnx.NodeProto, src: str, axes: list[int], starts: list[int], ends: list[int],
               steps: list[int]) -> None:
    """A Slice of a held-back transpose: the slice of its source, held back by the same permutation."""
    base, perm = imp.lazy[src]
    tmp = f"{n.output[0]}#base"
    rank = len(perm)
    imp.slice_src(n, base, [perm[x % rank] for x in axes], starts, ends, steps, tmp)
    imp.lazy[n.output[0]] = (tmp, perm)


def squeeze(imp: Host, n: onnx.NodeProto, src: str, axes: list[int], out: str) -> None:
    """A Squeeze of a held-back transpose: the source reshaped without those axes, held back by the
    permutation without them. No ``axes`` (ONNX: every axis of size 1) are read through the permutation too."""
    base, perm = imp.lazy[src]
    rank = len(perm)
    full = imp.symbols.full(base)
    if not axes:
        axes = [x for x, p in enumerate(perm) if full[p] == 1]
    gone = sorted(perm[x % rank] for x in axes)
    if any(full[g] != 1 for g in gone):
        raise imp.error(n, f"Squeeze of axes {axes} that are not of size 1")
    tmp = f"{out}#base"
    imp.reshape_to(n, base, tuple(d for i, d in enumerate(full) if i not in gone), tmp)
    imp.lazy[out] = (tmp, tuple(p - sum(g < p for g in gone) for p in perm if p not in gone))


def gather(imp: Host, n: onnx.NodeProto, src: str, index: np.ndarray, ax: int) -> None:
    """A Gather of a held-back transpose: one index of a leading axis, as a slice of the source and a
    squeeze."""
    if index.ndim != 0:
        raise imp.error(n, "a gather of several indices after a Transpose that moves the batch axis")
    base, perm = imp.lazy[src]
    bax = perm[ax % len(perm)]
    i = int(index) % imp.symbols.full(base)[bax]
    tmp = f"{n.output[0]}#slice"
    imp.slice_src(n, base, [bax], [i], [i + 1], [1], tmp)
    imp.lazy[f"{tmp}#view"] = (tmp, perm)
    squeeze(imp, n, f"{tmp}#view", [ax], n.output[0])
