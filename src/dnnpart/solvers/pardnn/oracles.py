"""Test oracles for PARDNN: random small DAGs with integer weights (exact float sums) and
brute-force path enumeration. Used by the tests; never on a hot path."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import numpy as np

from dnnpart.solvers.pardnn import Costs


def random_costs(rng: np.random.Generator, *, min_n: int = 1, max_n: int = 9, density: float | None = None,
                 zero_prob: float = 0.2) -> Costs:
    """A DAG over 0..n-1 (edges u < v) with integer comp 0..9 and comm 0..5 (some zeros)."""
    n = int(rng.integers(min_n, max_n + 1))
    p = float(rng.uniform(0.1, 0.7)) if density is None else density
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < p]
    src = [u for u, _ in pairs]
    dst = [v for _, v in pairs]
    comp = rng.integers(0, 10, size=n).astype(float)
    comp[rng.random(n) < zero_prob] = 0.0
    comm = rng.integers(0, 6, size=len(pairs)).astype(float)
    comm[rng.random(len(pairs)) < zero_prob] = 0.0
    return Costs.from_edges(n, src, dst, comp=comp, comm=comm)


def edge_map(c: Costs) -> dict[tuple[int, int], float]:
    src = c.edge_sources()
    return {(int(u), int(v)): float(w) for u, v, w in zip(src, c.succ_idx, c.comm, strict=True)}


def all_paths(c: Costs, alive: np.ndarray) -> Iterator[list[int]]:
    """Every path (>= 1 node) of the live subgraph, by exhaustive DFS."""
    succ = {u: [int(v) for v in c.succ_idx[c.succ_ptr[u]:c.succ_ptr[u + 1]] if alive[v]] for u in range(c.n)}

    def extend(path: list[int]) -> Iterator[list[int]]:
        yield path
        for v in succ[path[-1]]:
            yield from extend([*path, v])

    for u in range(c.n):
        if alive[u]:
            yield from extend([u])


def path_weight(c: Costs, path: list[int], em: dict[tuple[int, int], float]) -> float:
    return float(sum(c.comp[v] for v in path) + sum(em[(a, b)] for a, b in pairwise(path)))


def is_path(c: Costs, nodes: list[int]) -> bool:
    em = edge_map(c)
    return all((a, b) in em for a, b in pairwise(nodes))
