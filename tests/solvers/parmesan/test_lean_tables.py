"""The mapper's tables made without ``(D, D)`` work arrays (row blocks, in-place arithmetic:
4,096 devices must map within 1 GB) equal the whole-matrix formulas they replace."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnpart.pricing.pairs import pair_time
from dnnpart.solvers.parmesan import search

from .instances import random_instance


def _pair_time_one(m: float, inv: float, lat: float, k: float) -> float:
    """``pair_time`` of one pair, written out."""
    if m == 0 and k == 0:
        return 0.0
    if not math.isfinite(inv):
        return math.inf
    return k * lat + (0.0 if m == 0 else m * inv)


@pytest.mark.parametrize("seed", range(5))
def test_pair_time_equals_its_formula_pair_by_pair(seed: int) -> None:
    rng = np.random.default_rng(seed)
    inv = rng.choice([0.0, 0.1, 2.0, np.inf], size=(6, 6))
    lat = rng.choice([0.0, 0.5, 1e-3], size=(6, 6))
    for m, k in ((0.0, 0.0), (0.0, 2.0), (3.0, 0.0), (3.0, 2.0)):
        got = pair_time(m, inv, lat, k)
        want = [[_pair_time_one(m, inv[i, j], lat[i, j], k) for j in range(6)] for i in range(6)]
        assert got.tolist() == want
    nbytes = rng.choice([0.0, 1.0, 7.0], size=(6, 6))  # arrays broadcast against arrays
    got = pair_time(nbytes, inv, lat)
    assert got.tolist() == [[_pair_time_one(nbytes[i, j], inv[i, j], lat[i, j], 1.0) for j in range(6)]
                            for i in range(6)]


@pytest.mark.parametrize("seed", range(12))
def test_row_blocks_give_the_whole_matrix_minima(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "_BLOCK_ROWS", 3)  # several blocks and a short last one
    _, topo = random_instance(seed, max_devices=12)
    n = topo.n_devices
    off = ~np.eye(n, dtype=bool)
    for matrix in (topo.inv_bandwidth, topo.latency):
        sym = np.where(off, np.minimum(matrix, matrix.T), np.inf)
        blocks = np.vstack([b for _, _, b in search._symmetric_rows(matrix)])
        assert np.array_equal(blocks, sym)
        rows, cols = search._off_diagonal_minima(matrix)
        full = np.where(off, matrix, np.inf)
        assert np.array_equal(rows, full.min(axis=1)) and np.array_equal(cols, full.min(axis=0))


@pytest.mark.parametrize("seed", range(20))
def test_the_matching_bound_is_the_bottleneck_assignment(seed: int) -> None:
    """Against every injective assignment of the ``S R`` replicas to devices (brute force)."""
    import itertools

    from dnnpart.solvers.parmesan.cost import matching_bound
    from dnnpart.stages import PipelineStages

    rng = np.random.default_rng(seed)
    s_n, r_n = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    d_n = s_n * r_n + int(rng.integers(0, 2))
    table = rng.choice([0.5, 1.0, 2.0, 3.0, np.inf], size=(s_n, d_n), p=[0.25, 0.25, 0.2, 0.2, 0.1])
    stages = PipelineStages(compute=[0.0] * s_n, param_bytes=[0.0] * s_n,
                            comm_bytes=np.zeros((s_n, s_n)), replicas=r_n)
    vertex_stage = [s for s in range(s_n) for _ in range(r_n)]
    best = min((max(table[s, d] for s, d in zip(vertex_stage, devices, strict=True))
                for devices in itertools.permutations(range(d_n), len(vertex_stage))), default=np.inf)
    assert matching_bound(stages, table) == best


def _allreduce_table_twin(stages, topo) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Eq. 9's table device by device: each device's column and row, sorted."""
    from dnnpart.solvers.parmesan.cost import ring_weight

    r_n, d_n = stages.replicas, topo.n_devices
    table = np.tile(stages.compute[:, None], (1, d_n)).astype(np.float64)
    ring = ring_weight(stages)
    for s in range(stages.n_stages):
        if r_n < 2 or ring[s] == 0:
            continue
        pm = topo.pair_matrix(float(ring[s]), 2.0 * (r_n - 1))
        for d in range(d_n):
            a, b = pm[:, d].copy(), pm[d, :].copy()
            a[d] = b[d] = np.inf
            if r_n == 2:
                table[s, d] += float(np.maximum(a, b).min())
                continue
            ea, fb = np.argsort(a, kind="stable")[:2], np.argsort(b, kind="stable")[:2]
            table[s, d] += min(max(float(a[e]), float(b[f])) for e in ea for f in fb if e != f)
    return table


@pytest.mark.parametrize("seed", range(40))
def test_the_allreduce_table_equals_its_device_by_device_twin(seed: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of devices (three here), one ``1 / B`` table for every stage without latency:
    the same values as sorting each device's column and row, with and without latency."""
    from dnnpart.solvers.parmesan import cost

    monkeypatch.setattr(cost, "_NEIGHBOUR_BLOCK", 3)
    stages, topo = random_instance(seed, max_devices=12)
    assert np.array_equal(cost.allreduce_device_table(stages, topo), _allreduce_table_twin(stages, topo))
