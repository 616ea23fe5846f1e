"""Seeded layered random DAGs standing in for training graphs (PARDNN tests, benchmarks, reproduce).

The issue-14 generator (``zoo:synthetic:...``) is calibrated on captured graphs; this one is a
plain layered DAG whose width sets the degree of parallelism.
"""

from __future__ import annotations

import numpy as np

from dnnpart.graph import NORMAL, RESIDUAL, Graph, build_graph
from dnnpart.solvers.pardnn.inputs import Costs


def layered_dag(
    n: int, *, degree: int = 6, width: int = 64, seed: int = 0
) -> tuple[Costs, np.ndarray, np.ndarray]:
    """Costs plus (residual bytes, normal bytes) of a seeded layered DAG with ~degree*n edges.

    Examples
    --------
    >>> c, res, nor = layered_dag(200, width=8, seed=1)
    >>> c.n, bool((res > 0).any() and (nor > 0).any())
    (200, True)

    Nodes are numbered layer by layer (``width`` nodes each, jittered); every node reads
    ``degree`` tensors from the previous three layers (mostly the previous one), so the critical
    path has about n / width nodes and the degree of parallelism is about ``width``.
    """
    rng = np.random.default_rng(seed)
    layer = np.sort(rng.integers(0, max(n // width, 1), size=n))
    layer[0] = 0
    first = np.searchsorted(layer, np.arange(layer[-1] + 2))  # first node of every layer
    v = np.repeat(np.arange(n, dtype=np.int64), degree)
    back = np.minimum(rng.geometric(0.7, size=v.size), 3)
    src_layer = layer[v] - back
    ok = src_layer >= 0
    v, src_layer = v[ok], src_layer[ok]
    lo, hi = first[src_layer], first[src_layer + 1]
    u = lo + (rng.random(v.size) * np.maximum(hi - lo, 1)).astype(np.int64)
    keep = (hi > lo) & (u < v)
    code = np.unique(u[keep] * n + v[keep])
    src, dst = code // n, code % n
    comp = rng.gamma(2.0, 1.0, size=n)
    comm = rng.gamma(1.5, 0.3, size=src.size)
    residual = rng.random(n) < 0.1
    res = np.where(residual, rng.gamma(2.0, 4.0e6, size=n), 0.0)
    nor = np.where(residual, 0.0, rng.gamma(2.0, 1.0e6, size=n))
    costs = Costs.from_edges(n, src, dst, comp=comp, comm=comm)
    return costs, res, nor


def layered_graph(n: int, width: int, seed: int) -> Graph:
    """:func:`layered_dag` as a Graph: accelerator time ``comp`` (CPU 3x), 1e7 bytes per comm unit.

    Examples
    --------
    >>> layered_graph(100, 4, 0).n_nodes
    100
    """
    c, res, nor = layered_dag(n, width=width, seed=seed)
    cls = np.where(res > 0, RESIDUAL, NORMAL)
    return build_graph(
        np.arange(n), c.edge_sources(), c.succ_idx.astype(np.int64), compute_time=np.c_[c.comp * 3, c.comp],
        edge_cost=c.comm, edge_bytes=c.comm * 1e7, output_bytes=nor, param_bytes=res, memory_class=cls,
    )
