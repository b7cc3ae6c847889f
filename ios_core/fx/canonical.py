"""Rewrites of the ATen graph that leave its values as they are and its layout ops in forms the IR takes.

Attention as ATen spells it moves the batch axis and moves it back: timm's ``qkv.reshape(B, N, 3, H, D)
.permute(2, 0, 3, 1, 4).unbind(0)`` puts q/k/v's axis before the batch, and SDPA's decomposition permutes its
output through ``(2, 0, 1, 3)`` and back. Per sample (the IR's view) neither moves anything: a select of the
permuted tensor's first axis is a select of the source's axis it came from, then a permute of the rest, and a chain
of permutes is one permute (none at all when they cancel). An ``expand`` to its input's own shape is its input."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import fx

aten = torch.ops.aten
PERMUTES = (aten.permute.default, aten.permute_copy.default)
COPIES = (aten.clone.default,)
EXPANDS = (aten.expand.default, aten.expand_copy.default)
UNBINDS = (aten.unbind.int, aten.unbind_copy.int)
SELECTS = (aten.select.int, aten.select_copy.int)


def _src(node: fx.Node) -> fx.Node:
    """The tensor a layout op reads (its first argument)."""
    src: Any = node.args[0]
    return src


def _shape(node: fx.Node) -> tuple[int, ...] | None:
    val = node.meta.get("val")
    return tuple(int(d) for d in val.shape) if isinstance(val, torch.Tensor) else None


def _dims(node: fx.Node) -> list[int]:
    rank = len(_shape(_src(node)) or ())
    dims: Any = node.args[1]
    return [int(d) % rank for d in dims]


def _through_copies(node: fx.Node) -> fx.Node:
    """The node a chain of single-use clones copies."""
    while node.target in COPIES and isinstance(node.args[0], fx.Node) and len(node.args[0].users) == 1:
        node = node.args[0]
    return node


def _replace(node: fx.Node, by: fx.Node) -> None:
    by.meta.update({k: v for k, v in node.meta.items() if k not in by.meta})
    node.replace_all_uses_with(by)


def _permute(graph: fx.Graph, x: fx.Node, dims: Sequence[int], like: fx.Node) -> fx.Node:
    """``x`` permuted by ``dims`` and made contiguous (the fallback may ``view`` it, as it viewed the copy this
    stands for); its value is ``like``'s."""
    if list(dims) != sorted(dims):
        x = graph.call_function(aten.permute.default, (x, list(dims)))
        x.meta["val"] = like.meta.get("val")
    made = graph.call_function(aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
    made.meta["val"] = like.meta.get("val")
    return made


def _fold_permutes(graph: fx.Graph, node: fx.Node) -> bool:
    """permute(permute(x, a), b) -> permute(x, [a[i] for i in b]), through single-use clones between them."""
    if node.target not in PERMUTES or not node.users:
        return False
    inner = _through_copies(_src(node))
    if inner.target not in PERMUTES:  # (one with other readers stays for them)
        return False
    outer, first = _dims(node), _dims(inner)
    with graph.inserting_before(node):
        made = _permute(graph, _src(inner), [first[i] for i in outer], node)
    _replace(node, made)
    return True


def _select_before_permute(graph: fx.Graph, node: fx.Node) -> bool:
    """unbind(permute(x, p), 0)[i] and select(permute(x, p), 0, i) -> permute(select(x, p[0], i), rest)."""
    args: Any = node.args
    dim: Any = args[1] if len(args) > 1 else node.kwargs.get("dim", 0)
    if node.target in UNBINDS and int(dim) == 0:
        picks = [(u, int(cast(Any, u.args[1]))) for u in node.users if u.target is operator.getitem]
        if len(picks) != len(node.users):
            return False
    elif node.target in SELECTS and int(args[1]) == 0:
        picks = [(node, int(args[2]))]
    else:
        return False
    src = _through_copies(_src(node))
    if src.target not in PERMUTES:
        return False
    p = _dims(src)
    rest = [d - (d > p[0]) for d in p[1:]]
    for user, index in picks:
        with graph.inserting_before(user):
            picked = graph.call_function(aten.select.int, (_src(src), p[0], index))
            val = _src(src).meta.get("val")
            picked.meta["val"] = val.select(p[0], index) if isinstance(val, torch.Tensor) else None
            made = _permute(graph, picked, rest, user)
        _replace(user, made)
    return True


def _drop_same_expand(graph: fx.Graph, node: fx.Node) -> bool:
    if node.target in EXPANDS and node.users and _shape(node) is not None and _shape(node) == _shape(_src(node)):
        _replace(node, _src(node))
        return True
    return False


RULES = (_drop_same_expand, _select_before_permute, _fold_permutes)


def canonical(gm: fx.GraphModule) -> fx.GraphModule:
    """``gm`` with its layout ops rewritten (in place) until none of the rewrites applies."""
    graph = gm.graph
    while any([rule(graph, node) for node in list(graph.nodes) for rule in RULES]):  # every rule on every node
        graph.eliminate_dead_code()
    graph.lint()
    gm.recompile()
    return gm


__all__ = ["canonical"]
