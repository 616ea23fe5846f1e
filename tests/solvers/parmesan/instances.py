"""Seeded random mapping instances shared by the Parmesan tests."""

from __future__ import annotations

import numpy as np

from dnnpart.solvers.parmesan import PipelineStages, Topology


def random_instance(seed: int, max_devices: int = 8) -> tuple[PipelineStages, Topology]:
    """A random stage chain with skip edges, ``R in {1, 2, 4}``, ``D <= max_devices``, a
    heterogeneous topology with missing links (sometimes asymmetric, sometimes latency)."""
    rng = np.random.default_rng(seed)
    r = int(rng.choice([1, 2, 4]))
    low = 1 if rng.random() < 0.15 else max(1, min(4, max_devices) // r)
    s = int(rng.integers(low, max_devices // r + 1))  # mostly D >= 4
    d = s * r
    comm = np.zeros((s, s))
    for i in range(s - 1):
        comm[i, i + 1] = rng.choice([0.0, 1.0, 2.0, 5.0, 10.0], p=[0.1, 0.3, 0.2, 0.2, 0.2])
    for i in range(s):
        for j in range(i + 2, s):
            if rng.random() < 0.3:  # skip edge
                comm[i, j] = rng.uniform(0.5, 8.0)
    if rng.random() < 0.2:  # backward gradients as separate entries
        comm += comm.T * rng.uniform(0.2, 1.0)
    stages = PipelineStages(compute=rng.uniform(0.0, 1.0, s).round(3),
                            param_bytes=rng.uniform(0.0, 10.0, s).round(2),
                            comm_bytes=comm, replicas=r)
    levels = np.array([1.0, 2.0, 5.0, 10.0, 25.0, 100.0])
    bw = rng.choice(levels, size=(d, d))
    missing = rng.random((d, d)) < 0.15
    bw[missing] = 0.0
    if rng.random() < 0.7:
        bw = np.triu(bw, 1)
        bw = bw + bw.T
    np.fill_diagonal(bw, 0.0)
    lat = None
    if rng.random() < 0.3:
        lat = rng.uniform(0.0, 0.05, (d, d))
        lat = (lat + lat.T) / 2
    return stages, Topology.from_matrices(bw, lat)
