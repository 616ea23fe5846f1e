"""Levels equal brute-force longest paths; the kernels compile like their source (``.py_func``)."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.solvers.pardnn import kernels as k
from dnnpart.solvers.pardnn.levels import critical_path_length, levels
from dnnpart.solvers.pardnn.oracles import all_paths, edge_map, path_weight, random_costs


def brute_levels(c, alive):  # type: ignore[no-untyped-def]
    em = edge_map(c)
    tl, bl = np.zeros(c.n), np.zeros(c.n)
    for path in all_paths(c, alive):
        w = path_weight(c, path, em)
        # a path ending at v, minus v itself, is a candidate top level of v ...
        tl[path[-1]] = max(tl[path[-1]], w - c.comp[path[-1]])
        # ... and a path starting at u a candidate bottom level of u
        bl[path[0]] = max(bl[path[0]], w)
    return tl, bl


@pytest.mark.parametrize("seed", range(6))
def test_levels_equal_brute_force_on_random_dags(seed: int) -> None:
    """>= 300 DAGs in all: 50 per seed, with and without a random residual mask."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        c = random_costs(rng)
        alive = np.ones(c.n, bool) if rng.random() < 0.5 else rng.random(c.n) < 0.7
        tl, bl = levels(c, alive)
        btl, bbl = brute_levels(c, alive)
        np.testing.assert_array_equal(tl[alive], btl[alive])
        np.testing.assert_array_equal(bl[alive], bbl[alive])


def test_critical_path_without_communication_is_max_comp_path() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        c = random_costs(rng)
        em = {key: 0.0 for key in edge_map(c)}
        best = max(path_weight(c, p, em) for p in all_paths(c, np.ones(c.n, bool)))
        assert critical_path_length(c, with_comm=False) == best


def test_level_kernels_compile_like_their_source() -> None:
    """A compilation check against the kernels' own source (``.py_func``); the levels are
    checked against path enumeration above."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        c = random_costs(rng, max_n=30)
        alive = rng.random(c.n) < 0.8
        for kern in (k.top_levels, k.bottom_levels):
            fast = kern(c.succ_ptr, c.succ_idx, c.comp, c.comm, alive)
            slow = kern.py_func(c.succ_ptr, c.succ_idx, c.comp, c.comm, alive)
            np.testing.assert_array_equal(fast, slow)
        tl = k.top_levels(c.succ_ptr, c.succ_idx, c.comp, c.comm, alive)
        for a, b in zip(k.span_bounds(c.succ_ptr, c.succ_idx, c.comp, tl),
                        k.span_bounds.py_func(c.succ_ptr, c.succ_idx, c.comp, tl), strict=True):
            np.testing.assert_array_equal(a, b)
