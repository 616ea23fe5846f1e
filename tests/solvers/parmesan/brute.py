"""Vectorised brute force over all bijections: the oracle of the mapping search.

Evaluates Eq. 6 / Eq. 7 straight from the stage graph for all ``D!`` permutations at once
(numpy over a ``(D!, D)`` array); meant for ``D <= 9``. It shares no code with the search
(neither its term lists nor its evaluator).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dnnpart.pricing.pairs import Topology
from dnnpart.solvers.parmesan.cost import Instantiation
from dnnpart.stages import FloatArray, IntArray, PipelineStages


def _pair(topo: Topology, w: float, n_lat: float, a: IntArray, b: IntArray) -> FloatArray:
    inv = topo.inv_bandwidth[a, b]
    return np.where(np.isfinite(inv), w * np.where(np.isfinite(inv), inv, 0.0)
                    + n_lat * topo.latency[a, b], np.inf)


def all_objectives(stages: PipelineStages, topo: Topology, kind: Instantiation) -> tuple[
        FloatArray, IntArray]:
    """Max stage time of every bijection: ``(values (D!,), perms (D!, D))``; ``perms[i, v]``
    is the device of vertex ``v = r * S + s``."""
    d_n, s_n, r_n = topo.n_devices, stages.n_stages, stages.replicas
    if d_n > 9:
        raise ValueError(f"brute force over {d_n}! bijections refused (D <= 9)")
    perms = np.array(list(itertools.permutations(range(d_n))), np.int64)
    times = np.tile(np.repeat(stages.compute[None, :], r_n, axis=0).reshape(-1), (len(perms), 1))
    if kind == "p2p":
        for r in range(r_n):
            for s in range(s_n):
                for t in range(s_n):
                    m = float(stages.comm_bytes[s, t])
                    if m > 0:
                        x = _pair(topo, m, 1.0, perms[:, r * s_n + s], perms[:, r * s_n + t])
                        times[:, r * s_n + s] += x
                        times[:, r * s_n + t] += x
    elif r_n > 1:
        for s in range(s_n):
            w = 2.0 * (r_n - 1) * float(stages.param_bytes[s]) / r_n
            if w == 0:
                continue
            worst = np.zeros(len(perms))
            for r in range(r_n):
                x = _pair(topo, w, 2.0 * (r_n - 1), perms[:, r * s_n + s],
                          perms[:, ((r + 1) % r_n) * s_n + s])
                worst = np.maximum(worst, x)
            for r in range(r_n):
                times[:, r * s_n + s] += worst
    return times.max(axis=1), perms


def brute_force_mapping(
    stages: PipelineStages, topo: Topology, kind: Instantiation
) -> tuple[float, IntArray | None]:
    """Optimum of Eq. 5 and one optimal ``(R, S)`` mapping (``inf, None`` if none is finite).

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0], param_bytes=[0, 0], comm_bytes=[[0, 2], [0, 0]])
    >>> brute_force_mapping(st, Topology.from_matrices([[0, 4], [4, 0]]), "p2p")[0]
    0.5
    """
    vals, perms = all_objectives(stages, topo, kind)
    i = int(np.argmin(vals))
    if not math.isfinite(float(vals[i])):
        return math.inf, None
    return float(vals[i]), perms[i].reshape(stages.replicas, stages.n_stages)
