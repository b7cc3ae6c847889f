"""RandWire (large, 224x224, ch 154) as IOS builds it, from a seeded Watts-Strogatz
generator so graphs are reproducible (the original shipped four unseeded edge lists).

Each node is ReluSepConv 3x3 (one unit). A node with no predecessor reads the stage
input with stride 2; any other node reads the unweighted sum of its predecessors.
A stage's exit sums its nodes without successors. Front: conv 3x3/2 to ch/2, no
activation. Tail: relu -> 1x1 conv to 1280 (no activation) -> global average pool.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..ir import Graph, GraphBuilder, GraphError, Value

STAGE_NODES = (16, 32, 32, 32)
Edges = list[tuple[int, int]]


def watts_strogatz(n: int, k: int = 4, p: float = 0.75, seed: int = 0) -> Edges:
    """Undirected WS small-world graph (ring lattice of degree k, each lattice edge
    rewired with probability p), oriented low -> high index to form a DAG."""
    if k % 2 or k >= n:
        raise ValueError(f"watts_strogatz needs an even k < n (got n={n}, k={k})")
    rng = np.random.default_rng(seed)
    adj: list[set[int]] = [set() for _ in range(n)]
    for i in range(n):
        for j in range(1, k // 2 + 1):
            a, b = i, (i + j) % n
            adj[a].add(b)
            adj[b].add(a)
    for j in range(1, k // 2 + 1):
        for i in range(n):
            b = (i + j) % n
            if b not in adj[i] or rng.random() >= p:
                continue
            choices = [w for w in range(n) if w != i and w not in adj[i]]
            if not choices:
                continue
            w = int(rng.choice(choices))
            adj[i].discard(b)
            adj[b].discard(i)
            adj[i].add(w)
            adj[w].add(i)
    return sorted({(min(a, b), max(a, b)) for a in range(n) for b in adj[a]})


def write_edge_list(path: str | Path, n: int, edges: Edges) -> None:
    """File format of the original: n, m, then m lines 'u v' (u < v)."""
    lines = [str(n), str(len(edges))] + [f"{u} {v}" for u, v in edges]
    Path(path).write_text("\n".join(lines) + "\n")


def read_edge_list(path: str | Path) -> tuple[int, Edges]:
    try:
        rows = [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
        n, m = int(rows[0][0]), int(rows[1][0])
        edges = [(int(u), int(v)) for u, v in rows[2:2 + m]]
    except (IndexError, ValueError) as exc:
        raise GraphError(f"{path}: not an edge list (expected n, m, then m lines 'u v'): {exc}") from None
    if len(edges) != m or any(not (0 <= u < v < n) for u, v in edges):
        raise GraphError(f"{path}: expected {m} edges 'u v' with 0 <= u < v < {n}")
    return n, edges


def stage_graphs(seed: int, n_nodes=STAGE_NODES, k: int = 4, p: float = 0.75,
                 graph_dir: str | Path | None = None) -> list[tuple[int, Edges]]:
    if graph_dir is not None:
        files = sorted(Path(graph_dir).glob("*.txt"))
        if len(files) != len(n_nodes):
            raise GraphError(f"{graph_dir}: expected {len(n_nodes)} edge-list files (*.txt), found {len(files)}")
        return [read_edge_list(f) for f in files]
    return [(n, watts_strogatz(n, k, p, seed + i)) for i, n in enumerate(n_nodes)]


def _stage(b: GraphBuilder, x: Value, n: int, edges: Edges, channels: int) -> Value:
    b.block()
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        preds[v].append(u)
        succs[u].append(v)
    # stack (LIFO) topological order, as the original built its nodes
    indeg = [len(p) for p in preds]
    stack = [i for i in range(n) if indeg[i] == 0][::-1]
    out: dict[int, Value] = {}
    while stack:
        i = stack.pop()
        if preds[i]:
            out[i] = b.relu_sep_conv([[out[j] for j in sorted(preds[i])]], channels, (3, 3), (1, 1), (1, 1))
        else:
            out[i] = b.relu_sep_conv([[x]], channels, (3, 3), (2, 2), (1, 1))
        for j in succs[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(j)
    sinks = [out[i] for i in range(n) if not succs[i]]
    return b.identity([sinks])


def randwire(image_size: int = 224, channels: int = 154, seed: int = 0, k: int = 4, p: float = 0.75,
             nodes: tuple[int, ...] = STAGE_NODES, graph_dir: str | None = None) -> Graph:
    """``seed`` seeds both the wiring and the weights; ``graph_dir`` holds one edge
    list per stage (sorted by file name) to use instead of the generator."""
    b = GraphBuilder("randwire", (3, image_size, image_size))
    b.block()
    v = b.conv2d([[b.x]], channels // 2, (3, 3), (2, 2), (1, 1), act="identity")
    for i, (n, edges) in enumerate(stage_graphs(seed, tuple(nodes), k, p, graph_dir)):
        v = _stage(b, v, n, edges, channels * 2 ** i)
    b.block()
    v = b.relu([[v]])
    v = b.conv2d([[v]], 1280, act="identity")
    b.pool([[v]], "global_avg")
    return b.build(seed)
