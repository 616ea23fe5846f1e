"""Alg. 1: primaries are maximum-weight paths of the residual graph; clusters partition V into paths."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.solvers.pardnn import kernels as k
from dnnpart.solvers.pardnn.oracles import all_paths, edge_map, is_path, path_weight, random_costs
from dnnpart.solvers.pardnn.slicing import slice_graph


@pytest.mark.parametrize("seed", range(4))
def test_primary_j_is_a_maximum_weight_path_of_the_residual_graph(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    for _ in range(50):
        c = random_costs(rng)
        kk = int(rng.integers(1, 5))
        s = slice_graph(c, kk)
        em = edge_map(c)
        alive = np.ones(c.n, bool)
        for j in range(kk):
            members = s.members(j).tolist()
            if not alive.any():
                assert members == []
                continue
            best = max(path_weight(c, p, em) for p in all_paths(c, alive))
            assert members, "a primary is empty while nodes remain"
            assert all(alive[v] for v in members)
            assert is_path(c, members)
            assert path_weight(c, members, em) == best
            alive[members] = False


@pytest.mark.parametrize("seed", range(3))
def test_clusters_partition_the_free_nodes_into_paths(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    for _ in range(60):
        c = random_costs(rng, max_n=14)
        kk = int(rng.integers(1, 5))
        free = rng.random(c.n) < 0.85 if rng.random() < 0.3 else np.ones(c.n, bool)
        s = slice_graph(c, kk, free)
        parts = [s.members(i) for i in range(s.n_clusters)]
        seen = np.concatenate(parts) if parts else np.array([], int)
        assert sorted(seen.tolist()) == np.flatnonzero(free).tolist()  # each free node exactly once
        assert np.all(s.cluster[~free] == -1)
        for i in range(s.n_clusters):
            members = s.members(i).tolist()
            assert np.all(s.cluster[members] == i)
            assert is_path(c, members)
            if i >= kk:
                assert members, "secondary clusters are never empty"


def test_secondaries_follow_the_stale_levels_of_the_residual_graph() -> None:
    """A secondary starts at the live node of largest stale w_lvl (ties: smaller tl, id)."""
    rng = np.random.default_rng(5)
    for _ in range(100):
        c = random_costs(rng, max_n=12)
        kk = int(rng.integers(1, 3))
        s = slice_graph(c, kk)
        alive = s.cluster >= kk
        tl = k.top_levels(c.succ_ptr, c.succ_idx, c.comp, c.comm, alive)
        bl = k.bottom_levels(c.succ_ptr, c.succ_idx, c.comp, c.comm, alive)
        for i in range(kk, s.n_clusters):
            first = int(s.members(i)[0])
            rest = [v for v in range(c.n) if alive[v]]
            key = min(rest, key=lambda v: (-(tl[v] + bl[v]), tl[v], v))
            assert first == key
            alive[s.members(i)] = False


def test_slicing_kernels_compile_like_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compilation check: slicing with every kernel replaced by its own source
    (``.py_func``) slices alike; the naive checks above test the slices."""
    rng = np.random.default_rng(11)
    cases = [(random_costs(rng, max_n=25), int(rng.integers(1, 5))) for _ in range(30)]
    fast = [slice_graph(c, kk) for c, kk in cases]
    for name in dir(k):
        obj = getattr(k, name)
        if hasattr(obj, "py_func"):
            monkeypatch.setattr(k, name, obj.py_func)
    for (c, kk), f in zip(cases, fast, strict=True):
        slow = slice_graph(c, kk)
        np.testing.assert_array_equal(slow.cluster, f.cluster)
        np.testing.assert_array_equal(slow.cl_ptr, f.cl_ptr)
        np.testing.assert_array_equal(slow.cl_nodes, f.cl_nodes)
