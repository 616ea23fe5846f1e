"""Elimination kernels against plain-Python twins (loops over configurations)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dnnpart.solvers.optcnn.kernels import edge_eliminate, leaf_eliminate, node_eliminate


def node_eliminate_twin(u: list[float], x1: list[list[float]], x2: list[list[float]]) -> list[list[float]]:
    ci, cj, ck = len(x1), len(u), len(x2[0])
    return [[min(u[j] + x1[i][j] + x2[j][k] for j in range(cj)) for k in range(ck)] for i in range(ci)]


def leaf_eliminate_twin(u: list[float], x: list[list[float]]) -> list[float]:
    return [min(u[j] + x[i][j] for j in range(len(u))) for i in range(len(x))]


sizes = st.integers(1, 6)


@given(sizes, sizes, sizes, st.integers(0, 2**32 - 1))
def test_node_eliminate_matches_twin(ci: int, cj: int, ck: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    u, x1, x2 = rng.random(cj), rng.random((ci, cj)), rng.random((cj, ck))
    table, arg = node_eliminate(u, x1, x2)
    assert np.allclose(table, node_eliminate_twin(u.tolist(), x1.tolist(), x2.tolist()), rtol=0, atol=1e-12)
    # the recorded argmin attains the minimum (what the undo step relies on)
    for i in range(ci):
        for k in range(ck):
            j = arg[i, k]
            assert abs(u[j] + x1[i, j] + x2[j, k] - table[i, k]) <= 1e-12


@given(sizes, sizes, st.integers(0, 2**32 - 1))
def test_edge_and_leaf_match_twins(ci: int, cj: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b, u = rng.random((ci, cj)), rng.random((ci, cj)), rng.random(cj)
    assert edge_eliminate(a, b).tolist() == [[a[i, j] + b[i, j] for j in range(cj)] for i in range(ci)]
    add, arg = leaf_eliminate(u, a)
    assert np.allclose(add, leaf_eliminate_twin(u.tolist(), a.tolist()), rtol=0, atol=1e-12)
    assert np.allclose(add, u[arg] + a[np.arange(ci), arg], rtol=0, atol=1e-12)
