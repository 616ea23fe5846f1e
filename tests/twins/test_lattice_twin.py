"""The ideal-lattice kernels against twins written from their definitions.

* :func:`~dnnpart.solvers.dp.lattice_kernels.enumerate_lattice` against brute force: every
  subset of the nodes, kept when downward closed; cover pairs are ``(I, m, I - {m})`` for
  every maximal ``m`` of ``I``. The kernel's Zobrist hashing is bypassed on purpose by keys
  that collide (all keys 0 or 1), so the bitset comparison must tell ideals apart.
* :func:`~dnnpart.solvers.dp.lattice_kernels.dfs_topological_order` against its rule run as a
  ready list with timestamps (most recently readied first, smallest id among ties).
* :func:`~dnnpart.solvers.dp.lattice_kernels.ideal_sums` against sums over the brute-force sets.

The compiled kernels run, not their sources: ``enumerate_lattice`` is called directly (the
lattice builder walks small lattices in plain Python), the linear kernels with their
plain-Python shortcut turned off.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.solvers.dp import lattice_kernels as lk
from dnnpart.testing import random_problem
from dnnpart.testing.jit import compiled
from dnnpart.testing.strategies import DrawChooser, build_dag

BIG = 10**9


def _csr(n: int, src: list[int], dst: list[int]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(n + 1, np.int64)
    idx = np.zeros(len(src), np.int64)
    rows: list[list[int]] = [[] for _ in range(n)]
    for u, v in zip(src, dst, strict=True):
        rows[u].append(v)
    k = 0
    for u in range(n):
        for v in sorted(rows[u]):
            idx[k] = v
            k += 1
        ptr[u + 1] = k
    return ptr, idx


def _arrays(n: int, edges: list[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    pred_ptr, pred_idx = _csr(n, [v for _, v in edges], [u for u, _ in edges])
    succ_ptr, succ_idx = _csr(n, [u for u, _ in edges], [v for _, v in edges])
    return pred_ptr, pred_idx, succ_ptr, succ_idx


def brute_force_ideals(n: int, edges: list[tuple[int, int]]) -> set[frozenset[int]]:
    """Every subset that holds the source of each edge whose target it holds."""
    out = set()
    for bits in range(1 << n):
        s = frozenset(v for v in range(n) if bits >> v & 1)
        if all(u in s for u, v in edges if v in s):
            out.add(s)
    return out


def cover_pairs(ideals: set[frozenset[int]], edges: list[tuple[int, int]]) -> Counter:
    """``(I, m, I - {m})`` for every ideal ``I`` and maximal node ``m`` of it (no successor
    inside ``I``), each once."""
    out: Counter = Counter()
    for s in ideals:
        for m in s:
            if not any(u == m and v in s for u, v in edges):
                out[(s, m, s - {m})] += 1
    return out


def kernel_ideals(out: tuple) -> tuple[list[frozenset[int]], Counter]:
    """The kernel's ideals as sets (by parent plus added node) and its cover edges."""
    n_ideals, parent, added, e_up, e_node, e_low = out
    sets: list[frozenset[int]] = [frozenset()]
    assert parent[0] == -1
    for i in range(1, n_ideals):
        assert 0 <= parent[i] < i
        assert added[i] not in sets[parent[i]]
        sets.append(sets[parent[i]] | {int(added[i])})
    edges = Counter((sets[u], int(m), sets[lo]) for u, m, lo in zip(e_up, e_node, e_low, strict=True))
    return sets, edges


@st.composite
def dags(draw, max_nodes: int = 10):
    dag = build_dag(DrawChooser(draw), min_nodes=1, max_nodes=max_nodes,
                    density=draw(st.sampled_from([0.1, 0.3, 0.6])))
    return dag.n, list(dag.edges)


@settings(max_examples=80, deadline=None)
@given(dags(), st.sampled_from(["random", "zero", "coin"]), st.integers(0, 2**32 - 1))
def test_enumerate_lattice_equals_brute_force(dag, keys: str, seed: int) -> None:
    n, edges = dag
    rng = np.random.default_rng(seed)
    zobrist = {"random": rng.integers(0, 2**63, n, dtype=np.uint64),
               "zero": np.zeros(n, np.uint64),  # every ideal of a level collides
               "coin": rng.integers(0, 2, n, dtype=np.uint64)}[keys]
    args = (n, *_arrays(n, edges), zobrist)
    out = lk.enumerate_lattice(*args, BIG, BIG)
    want = brute_force_ideals(n, edges)
    assert out[0] == len(want)
    sets, got_edges = kernel_ideals(out)
    assert set(sets) == want and len(sets) == len(want)  # all ideals, each once
    sizes = [len(s) for s in sets]
    assert sizes == sorted(sizes)  # layer by layer, by size
    assert got_edges == cover_pairs(want, edges)
    # the limits: exactly enough ideals and edges pass, one fewer is refused
    n_edges = sum(got_edges.values())
    assert lk.enumerate_lattice(*args, len(want), n_edges)[0] == len(want)
    if len(want) > 1:
        assert lk.enumerate_lattice(*args, len(want) - 1, BIG)[0] == -1
        assert lk.enumerate_lattice(*args, BIG, n_edges - 1)[0] == -2


@pytest.mark.parametrize("lengths", [[40, 30, 3], [65, 1]])
def test_enumerate_lattice_over_several_words(lengths: list[int]) -> None:
    """Disjoint chains of more than 64 nodes in all (several bitset words): the ideals are the
    tuples of prefix lengths, and an ideal covers one ideal per non-empty prefix."""
    ids = iter(range(sum(lengths)))
    chains = [[] for _ in lengths]
    for c in itertools.chain.from_iterable(
            [c for c, k in enumerate(lengths) if k > j] for j in range(max(lengths))):
        chains[c].append(next(ids))  # round-robin ids: each chain increasing (topological)
    edges = [(x[j], x[j + 1]) for x in chains for j in range(len(x) - 1)]
    n = sum(lengths)
    out = lk.enumerate_lattice(n, *_arrays(n, edges), np.zeros(n, np.uint64), BIG, BIG)
    sets, got_edges = kernel_ideals(out)
    want = {frozenset(itertools.chain.from_iterable(x[:k] for x, k in zip(chains, ks, strict=True)))
            for ks in itertools.product(*[range(k + 1) for k in lengths])}
    assert set(sets) == want and len(sets) == len(want)
    assert sum(got_edges.values()) == sum(sum(1 for k in ks if k)
                                          for ks in itertools.product(*[range(k + 1) for k in lengths]))
    assert all(len(up - lo) == 1 and m in up and m not in lo for up, m, lo in got_edges)


def dfs_order_twin(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """DPL's linearization by its rule: a node is ready once its predecessors are emitted;
    the most recently readied ready node goes next, the smallest id among those readied
    together. Ready nodes carry the step that readied them."""
    preds = {v: {u for u, w in edges if w == v} for v in range(n)}
    ready = {v: 0 for v in range(n) if not preds[v]}
    order: list[int] = []
    while ready:
        u = max(ready, key=lambda v: (ready[v], -v))
        del ready[u]
        order.append(u)
        for v in range(n):
            if v not in order and v not in ready and preds[v] and preds[v] <= set(order):
                ready[v] = len(order)
    return order


@settings(max_examples=60, deadline=None)
@given(dags(max_nodes=12), st.integers(0, 2**32 - 1))
def test_dfs_topological_order_and_ideal_sums_equal_their_twins(dag, seed: int) -> None:
    n, edges = dag
    _, _, succ_ptr, succ_idx = _arrays(n, edges)
    with compiled(lk.dfs_topological_order, lk.ideal_sums):  # also on small inputs
        order = lk.dfs_topological_order(n, succ_ptr, succ_idx)
        assert order.tolist() == dfs_order_twin(n, edges)
        if n <= 10:
            out = lk.enumerate_lattice(n, *_arrays(n, edges), np.zeros(n, np.uint64), BIG, BIG)
            sets, _ = kernel_ideals(out)
            value = np.random.default_rng(seed).integers(-5, 6, n).astype(np.float64)
            sums = lk.ideal_sums(out[1], out[2], value)
            assert sums.tolist() == [float(sum(value[v] for v in s)) for s in sets]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 12), st.sampled_from([0.1, 0.3, 0.6]))
def test_dfs_order_of_stage_graphs_follows_its_rule(seed: int, n: int, p: float) -> None:
    """The stage graphs the DP builds (their successor lists as built) give the rule's order."""
    stage = build_stage_graph(random_problem(np.random.default_rng(seed), n_nodes=n,
                                             edge_prob=p).graph)
    m = stage.n_stage_nodes
    edges = [(u, int(v)) for u in range(m) for v in stage.succ_idx[stage.succ_ptr[u]:stage.succ_ptr[u + 1]]]
    with compiled(lk.dfs_topological_order):
        order = lk.dfs_topological_order(m, stage.succ_ptr, stage.succ_idx)
    assert order.tolist() == dfs_order_twin(m, edges)
