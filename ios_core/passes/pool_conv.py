"""An average pool read only by a 1x1 conv becomes one k x k conv.

With stride 1 and padded zeros counted in the divisor (``count_include_pad``), an average pool
of a k x k window is a k x k depthwise conv with every weight 1/k^2; followed by a 1x1 conv
``W`` it is one k x k conv whose every tap is ``W / k^2``, with the pool's padding. Inception's
pool branches (avg 3x3 then 1x1 conv) lose a pool kernel and the pool's output buffer, for
k^2 times the 1x1 conv's multiply-adds (tensor cores make that cheap at small batch; the
``kernels`` study measures it)."""

from __future__ import annotations

import numpy as np

from ..ir import Graph
from ..ir.nodes import Conv, Pool, Value
from .users import block_exits


def _pool_ok(p: Pool) -> bool:
    kh, kw = p.kernel
    return (p.pool_type == "avg" and p.stride == (1, 1) and p.count_include_pad and not p.ceil_mode
            and p.padding[0] <= kh // 2 and p.padding[1] <= kw // 2)


def _conv_ok(c: Conv, p: Pool) -> bool:
    return (c.kernel == (1, 1) and c.stride == (1, 1) and c.padding == (0, 0) and c.groups == 1
            and c.weight is not None and c.inputs == [[Value(p.name, 0, p.out_channels_)]])


def run(graph: Graph) -> int:
    exits = block_exits(graph)
    done = 0
    for block in graph.blocks:
        removed: set[str] = set()
        for p in block.nodes:
            if not isinstance(p, Pool) or not _pool_ok(p) or p.name in exits:
                continue
            readers = graph.users(p)
            if len(readers) != 1 or not isinstance(readers[0], Conv) or not _conv_ok(readers[0], p):
                continue
            c = readers[0]
            if c not in block.nodes:  # a reader in another block: the pool's block keeps it
                continue
            assert c.weight is not None
            kh, kw = p.kernel
            c.weight = np.repeat(np.repeat(c.weight / (kh * kw), kh, axis=2), kw, axis=3).astype(np.float32)
            c.kernel, c.padding = (kh, kw), p.padding
            graph.set_inputs(c, p.inputs)
            c.hint = c.hint or "PoolConv"
            removed.add(p.name)
            done += 1
        graph.erase(removed)
    return done
