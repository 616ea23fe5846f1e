"""Fenwick sums equal naive sums on 10^4 random update/query sequences."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.solvers.pardnn import kernels as k
from dnnpart.solvers.pardnn.fenwick import Fenwick


def test_fenwick_equals_naive_sums_on_ten_thousand_sequences() -> None:
    rng = np.random.default_rng(0)
    for _ in range(10_000):
        size = int(rng.integers(1, 40))
        f, naive = Fenwick(size), np.zeros(size)
        for _ in range(int(rng.integers(1, 12))):
            i = int(rng.integers(0, size))
            delta = float(rng.integers(-20, 21))
            f.add(i, delta)
            naive[i] += delta
            lo, hi = sorted(int(x) for x in rng.integers(0, size + 1, size=2))
            assert f.range_sum(lo, hi) == naive[lo:hi].sum()
            assert f.prefix_sum(hi) == naive[:hi].sum()


def test_fenwick_build_equals_repeated_adds_and_twins() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        values = rng.integers(-9, 10, size=int(rng.integers(1, 60))).astype(float)
        f = Fenwick(values.size)
        for i, v in enumerate(values):
            f.add(i, v)
        np.testing.assert_array_equal(k.fw_build(values), f.tree)
        np.testing.assert_array_equal(k.fw_build.py_func(values), f.tree)
        lo, hi = sorted(int(x) for x in rng.integers(0, values.size + 1, size=2))
        assert k.fw_range.py_func(f.tree, lo, hi) == values[lo:hi].sum()


def test_fenwick_rejects_positions_outside() -> None:
    with pytest.raises(IndexError, match="outside"):
        Fenwick(3).add(3, 1.0)
