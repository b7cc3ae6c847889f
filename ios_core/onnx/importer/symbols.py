"""The symbol table: for each ONNX tensor that is a feature map (constants are kept apart), its expression and
its full ONNX shape; and :class:`BatchAxis`, how its ONNX axes map to the IR's per-sample axes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ...ir import Value

#: a list of terms (concatenated) of values (summed): Concat on channels and Add of equal shapes cost no node
Expr = list[list[Value]]


def key(expr: Expr) -> tuple[tuple[Value, ...], ...]:
    """An expression as a dict key (its terms and values, in order)."""
    return tuple(tuple(t) for t in expr)


class BatchAxis(Enum):
    """How a tensor's ONNX axes map to the IR's, whose shapes are per sample."""

    #: ONNX axis 0 is the batch: IR shape = ONNX shape[1:]
    OWN = "own"
    #: ONNX axis 0 is the batch times the IR's first axis (after a reshape such as Swin's window partition)
    MERGED = "merged"
    #: a (B, F) vector kept as the IR's (F, 1, 1)
    VECTOR = "vector"


@dataclass(frozen=True)
class Symbol:
    """One ONNX tensor: the IR values it is, and its full ONNX shape (batch included)."""

    expr: Expr
    full: tuple[int, ...]


class SymbolTable:
    """ONNX tensor name -> :class:`Symbol`."""

    def __init__(self) -> None:
        self._symbols: dict[str, Symbol] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._symbols

    def define(self, name: str, expr: Expr, full: tuple[int, ...]) -> None:
        self._symbols[name] = Symbol(expr, tuple(int(d) for d in full))

    def alias(self, out: str, src: str) -> None:
        """``out`` is ``src`` (same expression, same shape)."""
        self._symbols[out] = self._symbols[src]

    def expr(self, name: str) -> Expr:
        return self._symbols[name].expr

    def full(self, name: str) -> tuple[int, ...]:
        return self._symbols[name].full
