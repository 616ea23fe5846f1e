"""The ``(S, R)`` pairs the Parmesan methods try, and the bound that orders and prunes them.

A pair is ``S`` stages with ``R`` replicas each on ``S * R <= D`` accelerators (the paper's
tables use all ``D``; see :mod:`.solver` for why idle devices are allowed). Every stage holds
at least one atomic op, so ``S`` is at most their number.

**Compute bound** of a pair (:class:`ComputeBound`): any plan of the pair simulates at least
``max(C / (S R), c_max / R)`` per sample, where ``C`` is the total compute of the graph's
atomic ops and ``c_max`` the largest one's, each node at its fastest accelerator. The
simulator runs one op at a time per device, so a step of ``m`` micro-batches keeps the
``S R`` devices busy for ``m C`` in all, and replica 0 of the stage holding the largest op
runs ``ceil(m / R) >= m / R`` micro-batches of it; the time per sample is the step over ``m``.
Transfers, all-reduces, bubbles and recomputation only add to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph.core import Graph
from dnnpart.pricing.pairs import Topology
from dnnpart.problem import Problem
from dnnpart.solvers.parmesan.opdag import IntArray


def pipeline_pairs(n_devices: int, n_ops: int, stages: int | None = None,
                   replicas: int | None = None) -> list[tuple[int, int]]:
    """``(S, R)`` with ``S * R <= n_devices`` and ``S <= n_ops``; ``stages`` / ``replicas``
    fix one or both. :class:`~dnnpart.errors.UsageError` when the fixed values need more
    devices than there are.

    Examples
    --------
    >>> pipeline_pairs(4, 10)
    [(1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2), (3, 1), (4, 1)]
    >>> pipeline_pairs(4, 2, replicas=2), pipeline_pairs(4, 1, stages=2)
    ([(1, 2), (2, 2)], [])
    """
    for name, value in (("stages", stages), ("replicas", replicas)):
        if value is not None and value > n_devices:
            raise UsageError(f"option {name}={value} exceeds the {n_devices} accelerators")
    if stages is not None and replicas is not None and stages * replicas > n_devices:
        raise UsageError(f"option stages * replicas = {stages * replicas} exceeds the "
                         f"{n_devices} accelerators")
    return [(s, r) for s in range(1, min(n_devices, n_ops) + 1)
            for r in range(1, n_devices // s + 1)
            if (stages is None or s == stages) and (replicas is None or r == replicas)]


@dataclass(frozen=True, slots=True)
class ComputeBound:
    """Total and largest atomic-op compute (graph time units) behind the pairs' bounds.

    Examples
    --------
    >>> ComputeBound(total=12.0, largest=5.0).of(2, 2), ComputeBound(12.0, 5.0).of(4, 1)
    (3.0, 5.0)
    """

    total: float
    largest: float

    @staticmethod
    def of_problem(problem: Problem, graph: Graph, atom: IntArray) -> ComputeBound:
        """The bound's figures for ``graph``'s atomic ops ``atom`` (its nodes are
        ``problem.graph``'s), each node at its fastest accelerator of ``problem.cluster``."""
        cluster = problem.cluster
        acc = list(cluster.accelerators)
        kinds, speeds = cluster.kinds(), cluster.speeds()
        columns = sorted({(graph.device_kinds.index(kinds[a]), float(speeds[a])) for a in acc
                          if kinds[a] in graph.device_kinds})
        if not columns:
            return ComputeBound(total=0.0, largest=0.0)
        fastest = np.min(np.stack([graph.compute_time[:, c] / v for c, v in columns]), axis=0)
        per_op = np.bincount(atom, weights=fastest, minlength=int(atom.max()) + 1 if atom.size
                             else 0)
        return ComputeBound(total=float(per_op.sum()), largest=float(per_op.max(initial=0.0)))

    def of(self, n_stages: int, replicas: int) -> float:
        """Lower bound on the simulated time per sample of any plan of the pair."""
        return max(self.total / (n_stages * replicas), self.largest / replicas)


def first_devices(topo: Topology, n: int) -> Topology:
    """The topology of devices ``0 .. n-1`` (a pair that leaves the others idle).

    Examples
    --------
    >>> first_devices(Topology.from_matrices([[0, 1, 2], [1, 0, 3], [2, 3, 0]]), 2).bandwidth.tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    if n == topo.n_devices:
        return topo
    return Topology.from_matrices(topo.bandwidth[:n, :n], topo.latency[:n, :n])
