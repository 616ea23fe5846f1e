"""OptCNN's depth-first search kernel against brute force over every strategy.

:func:`~dnnpart.solvers.optcnn.dfs_kernel.dfs_steps` searches configurations layer by layer
for the least Eq. 1 sum (node costs plus one table entry per edge). The twin enumerates all
strategies with ``itertools.product`` (lexicographic order) and sums Eq. 1 for each. Integer
costs keep every sum exact, so the kernel must return the least sum and, since it replaces
its incumbent only on a strict improvement and visits strategies in lexicographic order, the
first strategy that reaches it; exhaustive, it visits every node of the search tree once.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.solvers.optcnn.dfs_kernel import dfs_steps


@st.composite
def instances(draw):
    n = draw(st.integers(1, 5))
    sizes = [draw(st.integers(1, 4)) for _ in range(n)]
    edges = [(u, v) for v in range(n) for u in range(v) if draw(st.integers(0, 2)) == 0]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    node = [rng.integers(0, 10, s).astype(np.float64) for s in sizes]
    table = {e: rng.integers(0, 10, (sizes[e[0]], sizes[e[1]])).astype(np.float64) for e in edges}
    return sizes, edges, node, table


def eq1(strategy: tuple[int, ...], edges, node, table) -> float:
    return float(sum(node[i][c] for i, c in enumerate(strategy))
                 + sum(table[(u, v)][strategy[u], strategy[v]] for u, v in edges))


def _flat(sizes, edges, node, table):
    """The kernel's arrays: edges grouped by their target (the depth that prices them)."""
    by_target = sorted(edges, key=lambda e: (e[1], e[0]))
    in_ptr = np.zeros(len(sizes) + 1, np.int64)
    for _, v in by_target:
        in_ptr[v + 1] += 1
    in_ptr = np.cumsum(in_ptr)
    lengths = [table[e].size for e in by_target]
    return (np.asarray(sizes, np.int64),
            np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
            np.concatenate(node),
            in_ptr,
            np.asarray([u for u, _ in by_target], np.int64),
            np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
            np.concatenate([table[e].ravel() for e in by_target]) if by_target else np.zeros(0))


@settings(max_examples=100, deadline=None)
@given(instances(), st.booleans(), st.integers(1, 7), st.sampled_from(["none", "random", "best"]))
def test_dfs_equals_brute_force(case, prune: bool, chunk: int, incumbent: str) -> None:
    sizes, edges, node, table = case
    n = len(sizes)
    strategies = list(itertools.product(*[range(s) for s in sizes]))
    values = [eq1(s, edges, node, table) for s in strategies]
    opt = min(values)
    start = {"none": math.inf, "random": values[len(values) // 2], "best": opt}[incumbent]
    assign = np.full(n, -1, np.int64)
    best, best_assign = np.array([start]), np.full(n, -7, np.int64)
    state, partial = np.zeros(1, np.int64), np.zeros(n)
    steps = 0
    while state[0] >= 0:  # small slices: the search resumes from its arrays
        made = dfs_steps(*_flat(sizes, edges, node, table), assign, partial, state, best,
                         best_assign, chunk, prune)
        assert 0 <= made <= chunk
        steps += made
    assert best[0] == min(opt, start)
    if opt < start:  # the first optimal strategy in lexicographic order
        assert tuple(best_assign.tolist()) == strategies[values.index(opt)]
    else:
        assert best_assign.tolist() == [-7] * n  # no strict improvement: incumbent kept
    tree = sum(math.prod(sizes[:k + 1]) for k in range(n))
    if prune:
        assert steps <= tree
    else:
        assert steps == tree
