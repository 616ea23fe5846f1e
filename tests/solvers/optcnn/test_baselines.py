"""Baselines of paper 3: data/model parallelism, OWT, DFS (exhaustive and pruned)."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.layerwise.hardware import P100, paper_bandwidth
from dnnpart.layerwise.layers import NetBuilder
from dnnpart.layerwise.models import alexnet, lenet5
from dnnpart.layerwise.tables import CostTables, build_tables, iteration_time
from dnnpart.solvers.optcnn.baselines import data_parallel, dfs, model_parallel, owt
from dnnpart.solvers.optcnn.dfs_kernel import dfs_steps
from dnnpart.solvers.optcnn.search import optimize_tables


def _degrees(tables: CostTables, strategy: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in s.degrees[c]) for s, c in zip(tables.spaces, strategy, strict=True)]


def test_baseline_configurations() -> None:
    t = build_tables(alexnet(32 * 16), 16, P100, paper_bandwidth(16))
    ops = [layer.op for layer in t.graph.layers]
    assert all(d == (16, 1, 1, 1) for d in _degrees(t, data_parallel(t)))
    model = _degrees(t, model_parallel(t))
    for op, layer, d in zip(ops, t.graph.layers, model, strict=True):
        assert d[0] == d[2] == d[3] == 1
        c = layer.out_shape[1]
        # largest power of two <= 16 dividing the channels: 3 -> 1, 1000 -> 8, 4096 -> 16
        assert d[1] == max(k for k in (1, 2, 4, 8, 16) if c % k == 0), (op, c)
    for op, d in zip(ops, _degrees(t, owt(t)), strict=True):
        assert d == ((16, 1, 1, 1) if op not in ("fc", "softmax") else (1, d[1], 1, 1))
        if op == "fc":
            assert d[1] >= 8


def _small_tables() -> list[CostTables]:
    b = NetBuilder("branchy", 8)
    x = b.input(2, 8, 8)
    a = b.conv("a", x, 4, 3, 1, 1)
    c = b.conv("c", x, 4, 1)
    j = b.concat("j", a, c)
    p = b.pool("p", j, 2, 2)
    f = b.fc("f", p, 4)
    b.softmax("s", f)
    return [build_tables(b.build(), 2, P100, paper_bandwidth(2)),
            build_tables(lenet5(16), 2, P100, paper_bandwidth(2))]


@pytest.mark.parametrize("prune", [False, True])
def test_dfs_finds_algorithm1_optimum(prune: bool) -> None:
    for t in _small_tables():
        r, best = dfs(t, prune=prune), optimize_tables(t)
        assert r.finished
        assert r.value == pytest.approx(best.value, rel=1e-12)
        assert r.value == pytest.approx(iteration_time(t, r.strategy), rel=1e-12)
        # layer-wise is never worse than any baseline
        for s in (data_parallel(t), model_parallel(t), owt(t)):
            assert best.value <= iteration_time(t, s) + 1e-15


def test_dfs_stops_at_budget_with_its_start() -> None:
    t = _small_tables()[1]
    r = dfs(t, time_budget=0.0)
    assert not r.finished and r.visited == 0
    start = min(iteration_time(t, s) for s in (data_parallel(t), model_parallel(t), owt(t)))
    assert r.value == start


def test_dfs_kernel_compiles_like_its_source() -> None:
    """The numba kernel walks the same search as its own source run as Python (``.py_func``:
    a compilation check), resumed in slices; brute force on this instance, and on random ones
    in ``tests/twins/test_optcnn_dfs_twin.py``."""
    rng = np.random.default_rng(5)
    sizes = np.array([2, 3, 2, 3], dtype=np.int64)
    node_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    node_flat = rng.random(int(sizes.sum()))
    edges = [(0, 1), (0, 2), (1, 3), (2, 3)]
    in_ptr = np.array([0, 0, 1, 2, 4], dtype=np.int64)
    in_src = np.array([u for u, _ in edges], dtype=np.int64)
    lengths = [int(sizes[u] * sizes[v]) for u, v in edges]
    in_off = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    tab_flat = rng.random(sum(lengths))
    results = []
    for fn in (dfs_steps, dfs_steps.py_func):
        for prune in (False, True):
            assign = np.full(4, -1, dtype=np.int64)
            best, best_assign = np.array([np.inf]), np.zeros(4, dtype=np.int64)
            state, partial = np.zeros(1, dtype=np.int64), np.zeros(4)
            steps = 0
            while state[0] >= 0:  # tiny slices exercise resuming
                steps += fn(sizes, node_off, node_flat, in_ptr, in_src, in_off, tab_flat, assign,
                            partial, state, best, best_assign, 3, prune)
            results.append((prune, steps, float(best[0]), best_assign.tolist()))
    assert results[:2] == results[2:]
    exhaustive = results[0]
    assert exhaustive[1] == 2 + 2 * 3 + 2 * 3 * 2 + 2 * 3 * 2 * 3  # every node of the search tree
    # brute force
    grid = np.ix_(*[np.arange(s) for s in sizes])
    total = sum(node_flat[node_off[i] + grid[i]] for i in range(4))
    for e, (u, v) in enumerate(edges):
        total = total + tab_flat[in_off[e] + grid[u] * sizes[v] + grid[v]]
    assert exhaustive[2] == pytest.approx(float(np.min(total)))
