"""The ``stages`` objective's figures for every interval of block units: what the block DP
(:mod:`dnnpart.solvers.block_pipeline`) searches over, and what says why nothing fits.

Stage ``i`` of a pipeline runs on the ``i``-th accelerator of the cluster (choice: the
cluster's order is the pipeline's; a topology-aware order is paper 4's mapping, ``parmesan``).
For units ``[a, b)`` on stage ``i``: compute on that device, the messages at its two
boundaries priced between it and its neighbours' devices, and memory by
:func:`~dnnpart.pricing.chain.stage_memory` -- the same functions
:func:`dnnpart.evaluate.evaluate` scores a finished plan with, so the DP's value is the plan's
objective.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.graph.blocks import BlockUnits, node_units
from dnnpart.graph.core import Graph
from dnnpart.pricing.chain import (
    MESSAGE_KINDS,
    UP,
    F,
    boundary_bytes,
    chain_compute,
    message_time,
    node_activation_bytes,
    optimizer_factor,
    positions_sum,
    recomputation_ends,
    stage_memory,
    weight_readers,
)
from dnnpart.pricing.liveness import piece_working
from dnnpart.pricing.loads import node_times
from dnnpart.pricing.pairs import Topology
from dnnpart.problem import Problem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class ChainTables:
    """Prefix sums and boundary times over ``U`` units for stages on ``devices`` in order.

    Attributes
    ----------
    units : the units (:func:`~dnnpart.graph.blocks.node_units`).
    devices : the devices stage ``0, 1, ...`` run on.
    compute : ``(len(devices), U + 1)`` prefix sums of unit compute on each stage's device.
    boundary : ``(U - 1, len(devices) - 1)``: Eq. 6 time of boundary ``j``'s messages between
        stage ``i``'s device and stage ``i + 1``'s.
    weights : ``(U + 1, U + 1)``: weight bytes of units ``[a, b)`` (a tied weight once).
    activations : ``(U + 1,)`` prefix sums of stashed bytes.
    inputs : ``(U,)`` bytes a stage starting at unit ``a`` receives from below.
    working : ``(U,)`` one micro-batch's working set of each unit beyond its stash
        (:func:`~dnnpart.pricing.liveness.piece_working`); a stage counts its largest.
    recompute : ``(len(devices), U + 1, U + 1)``: with recomputation, the forward time a stage
        of units ``[a, b)`` runs again (:func:`~dnnpart.pricing.chain.recomputed_forward`,
        which depends on where the stage ends, so no prefix sum); ``None`` without.
    """

    units: BlockUnits
    devices: tuple[int, ...]
    compute: FloatArray
    boundary: FloatArray
    weights: FloatArray
    activations: FloatArray
    inputs: FloatArray
    working: FloatArray
    capacity: FloatArray
    k: float
    training: bool
    recompute: FloatArray | None = None

    @property
    def n_units(self) -> int:
        return self.units.n_units

    def stage_time(self, i: int, a: npt.ArrayLike, b: int) -> FloatArray:
        """Times of stage ``i`` holding units ``[a, b)``, for an array of starts ``a``."""
        starts = np.asarray(a, dtype=np.int64)
        t = self.compute[i, b] - self.compute[i, starts]
        if self.recompute is not None:
            t = t + self.recompute[i, starts, b]
        if i > 0:
            t = t + np.where(starts > 0, self.boundary[np.maximum(starts - 1, 0), i - 1], 0.0)
        if b < self.n_units:
            t = t + self.boundary[b - 1, i]
        out: FloatArray = np.asarray(t, dtype=np.float64)
        return out

    def memory(self, problem: Problem, i: int, n_stages: int, a: npt.ArrayLike, b: int) -> FloatArray:
        """Peak memory of stage ``i`` of ``n_stages`` holding units ``[a, b)``, per start ``a``
        (:func:`~dnnpart.pricing.chain.stage_memory`, element-wise)."""
        obj = problem.objective
        starts = np.asarray(a, dtype=np.int64)
        largest = np.maximum.accumulate(self.working[:b][::-1])[::-1]  # max of units [a, b)
        out: FloatArray = np.asarray(stage_memory(
            weights=self.weights[starts, b], activations=self.activations[b] - self.activations[starts],
            inputs=self.inputs[starts], stage=i, n_stages=n_stages, schedule=obj.schedule,
            microbatches=obj.microbatches, recompute=obj.recompute, training=self.training,
            k=self.k, working=largest[starts]).total, dtype=np.float64)
        return out


def stage_devices(problem: Problem) -> tuple[int, ...]:
    """The devices stages run on, in order: the accelerators (every device if none)."""
    acc = tuple(int(d) for d in problem.cluster.accelerators)
    return acc or tuple(range(problem.cluster.n_devices))


def chain_tables(problem: Problem, units: BlockUnits | None = None) -> ChainTables:
    """The tables of ``problem``'s block units (see :class:`ChainTables`).

    Examples
    --------
    >>> from dnnpart.problem import Objective
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2).with_objective(Objective(kind="stages"))
    >>> t = chain_tables(p)
    >>> t.n_units, t.stage_time(0, [0], 2).tolist(), t.stage_time(1, [2], 3).tolist()
    (3, [3.0], [3.0])
    """
    g, cluster, obj = problem.graph, problem.cluster, problem.objective
    units = node_units(g) if units is None else units
    n_units = units.n_units
    devices = stage_devices(problem)
    compute = np.zeros((len(devices), n_units + 1))
    times = np.stack([node_times(g, cluster, np.full(g.n_nodes, d, np.int64)) for d in devices])
    for i in range(len(devices)):
        compute[i, 1:] = np.cumsum(chain_compute(times[i], g, units.unit, n_units, False))
    recompute = interval_recompute(g, units.unit, n_units, times) \
        if obj.recompute and g.is_training else None
    crossing = boundary_bytes(g, units.unit, n_units)
    topo = Topology.from_matrices(cluster.bandwidth, cluster.latency)
    boundary = np.zeros((max(n_units - 1, 0), max(len(devices) - 1, 0)))
    for j in range(n_units - 1):
        for i in range(len(devices) - 1):
            boundary[j, i] = message_time(topo, crossing[j], devices[i], devices[i + 1],
                                          cluster.time_unit_s)
    up_f = [c for c, (d, pu, _) in enumerate(MESSAGE_KINDS) if d == UP and pu == F]
    inputs = np.zeros(n_units)
    if n_units > 1:
        inputs[1:] = crossing[:, up_f].sum(axis=1)
    acts = np.zeros(n_units + 1)
    acts[1:] = np.cumsum(positions_sum(node_activation_bytes(g), units.unit, n_units))
    return ChainTables(
        units=units, devices=devices, compute=compute, boundary=boundary,
        weights=_interval_weights(problem, units), activations=acts, inputs=inputs,
        working=piece_working(g, units.unit, n_units),
        capacity=cluster.memory_capacity()[np.asarray(devices, np.int64)].astype(np.float64),
        k=optimizer_factor(g), training=g.is_training, recompute=recompute)


def interval_recompute(g: Graph, unit: IntArray, n_units: int, times: FloatArray) -> FloatArray:
    """``R[i, a, b]``: the forward time a stage of units ``[a, b)`` recomputes with node times
    ``times[i]`` (:func:`~dnnpart.pricing.chain.recomputed_forward` of that stage).

    A forward node ``n`` of unit ``u`` is rebuilt by a stage ``[a, b)`` holding it when its id
    is at most ``L(a, b)``, the last id :func:`~dnnpart.pricing.chain.recomputation_ends`
    marks among units ``[a, b)``; ``L`` only grows as ``a`` falls, so for each ``b`` the node
    counts for every ``a <= min(u, A_n)``, ``A_n`` the last start whose ``L`` reaches it: one
    sorted search and one sum per ``b`` (units need not be contiguous in the graph's order).
    Rows of identical node times are computed once.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(3, memory_bytes=2.0)
    >>> r = interval_recompute(g, np.array([0, 1, 2]), 3, np.array([[1.0, 2.0, 4.0]]))
    >>> float(r[0, 0, 3]), float(r[0, 1, 2])
    (7.0, 2.0)
    """
    out = np.zeros((times.shape[0], n_units + 1, n_units + 1))
    forward = np.flatnonzero(~g.is_backward)
    fu = np.asarray(unit, dtype=np.int64)[forward]
    ends = recomputation_ends(g)[forward]
    last = np.full(n_units, -1, dtype=np.int64)  # per unit, its last node a recomputation needs
    np.maximum.at(last, fu[ends], forward[ends])
    rows, inverse = np.unique(times, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    for b in range(1, n_units + 1):
        reach = np.maximum.accumulate(last[:b][::-1])[::-1]  # L(a, b), nonincreasing in a
        inside = fu < b
        ids, own = forward[inside], fu[inside]
        # the starts a with L(a, b) >= id: a prefix of 0..b-1 since L falls with a
        count = np.searchsorted(-reach, -ids, side="right")
        upto = np.minimum(count - 1, own)  # the node counts for a = 0..upto
        keep = upto >= 0
        for r, row in enumerate(rows):
            per = np.bincount(upto[keep], weights=row[ids[keep]], minlength=b)
            out[inverse == r, :b, b] = np.cumsum(per[::-1])[::-1]
    return out


def _interval_weights(problem: Problem, units: BlockUnits) -> FloatArray:
    """``W[a, b]``: bytes of the weights held or read by units ``[a, b)``."""
    n_units = units.n_units
    single = np.zeros(n_units)
    out = np.zeros((n_units + 1, n_units + 1))
    _, size, readers = weight_readers(problem.graph)
    for nbytes, who in zip(size.tolist(), readers, strict=True):
        touched = np.unique(units.unit[who])
        if touched.size == 1:
            single[int(touched[0])] += nbytes
            continue
        for a in range(n_units):  # [a, b) touches it once b passes its first unit >= a
            first = touched[touched >= a]
            if first.size:
                out[a, int(first[0]) + 1:] += nbytes
    prefix = np.concatenate(([0.0], np.cumsum(single)))
    out += np.maximum(prefix[None, :] - prefix[:, None], 0.0)
    return out
