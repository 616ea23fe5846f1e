"""The mapper's view of Eqs. 5-7: the instantiation rule, term lists and lower bounds (Eqs. 8-9).

The stage times themselves are the shared ones of :mod:`dnnpart.pricing.stages` (Eq. 5, with
the transfer and ring all-reduce times of :mod:`dnnpart.pricing.pairs`: ``L + M / B`` per
transfer -- the paper has ``M / B``, the latency term is 0 when no latency matrix is given --
and ``2 (R - 1) (L + P / (R B))`` per ring pair, the ring ``r -> r+1 -> ... -> r`` in replica
index order). Choices where the paper is silent (also in ``docs/methods/parmesan.md``):

* **Instantiation rule** (Sec. 5.2): all-reduce size ``sum_s 2 (R - 1) / R * P(s)`` (bytes one
  replica sends in its rings per step) over inter-stage size ``sum M(s, s')`` (bytes one
  pipeline copy moves per step); Eq. 7 when the ratio is larger than 1, else Eq. 6.
* **Eq. 8** is computed with an exact assignment (``scipy.optimize.linear_sum_assignment``)
  instead of the paper's sorting rule: both give the same value without latency
  (rearrangement inequality), only the assignment stays exact with latency terms or with
  different directions to one neighbour. **Eq. 9** for ``R >= 3`` picks the two ring
  neighbours among the two cheapest devices of each side (exact for a min of a max).
* **Matching bound** (an addition): Eqs. 8-9 take, per stage, its best device, even when
  several stages want the same one. The search starts from the bottleneck assignment over the
  same per-(stage, device) values instead (each of the ``D`` vertices on its own device),
  which is a valid bound at least as high.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from dnnpart import interrupt
from dnnpart.pricing.pairs import Topology
from dnnpart.pricing.stages import check_mapping
from dnnpart.stages import FloatArray, IntArray, PipelineStages

Instantiation = Literal["p2p", "allreduce"]
_BIG = 1e300


@dataclass(frozen=True, slots=True)
class Terms:
    """Pairwise cost terms of ``G'`` under one instantiation.

    Term ``i`` costs ``weight[i] / B[p(a), p(b)] + n_lat[i] * L[p(a), p(b)]``. Under Eq. 6
    (``combine = "sum"``) it adds to the times of ``a`` and ``b``; under Eq. 7
    (``combine = "max"``) the time of every replica of ``stage[i]`` is ``c_u`` plus the max of
    its terms.
    """

    a: IntArray
    b: IntArray
    weight: FloatArray
    n_lat: FloatArray
    stage: IntArray
    combine: Literal["sum", "max"]


def ring_weight(stages: PipelineStages) -> FloatArray:
    """``2 (R - 1) P(s) / R`` per stage: bytes per ring link per step (Eq. 7)."""
    r = stages.replicas
    return np.asarray(2.0 * (r - 1) * stages.param_bytes / r, dtype=np.float64)


def choose_instantiation(stages: PipelineStages) -> Instantiation:
    """Eq. 7 when all-reduce bytes exceed inter-stage bytes, else Eq. 6 (Sec. 5.2).

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0], param_bytes=[10, 10],
    ...                     comm_bytes=[[0, 1], [0, 0]], replicas=2)
    >>> choose_instantiation(st)
    'allreduce'
    """
    ar = float(ring_weight(stages).sum())
    p2p = float(stages.comm_bytes.sum())
    if p2p == 0.0:
        return "allreduce" if ar > 0 else "p2p"
    return "allreduce" if ar / p2p > 1.0 else "p2p"


def build_terms(stages: PipelineStages, kind: Instantiation) -> Terms:
    """The term list of Eq. 6 (``p2p``) or Eq. 7 (``allreduce``) over vertices ``r * S + s``."""
    s_n, r_n = stages.n_stages, stages.replicas
    a: list[int] = []
    b: list[int] = []
    w: list[float] = []
    nl: list[float] = []
    st: list[int] = []
    if kind == "p2p":
        src, dst = np.nonzero(stages.comm_bytes)
        for r in range(r_n):
            for s, t in zip(src.tolist(), dst.tolist(), strict=True):
                a.append(r * s_n + s)
                b.append(r * s_n + t)
                w.append(float(stages.comm_bytes[s, t]))
                nl.append(1.0)
                st.append(s)
        combine: Literal["sum", "max"] = "sum"
    else:
        ring = ring_weight(stages)
        for s in range(s_n):
            if r_n < 2 or ring[s] == 0:
                continue
            for r in range(r_n):
                a.append(r * s_n + s)
                b.append(((r + 1) % r_n) * s_n + s)
                w.append(float(ring[s]))
                nl.append(2.0 * (r_n - 1))
                st.append(s)
        combine = "max"
    return Terms(a=np.array(a, np.int64), b=np.array(b, np.int64), weight=np.array(w),
                 n_lat=np.array(nl), stage=np.array(st, np.int64), combine=combine)


def total_p2p_time(stages: PipelineStages, topo: Topology, device_of: npt.ArrayLike) -> float:
    """Sum over the inter-stage transfers of all copies of their transfer time (Fig. 2's
    "total communication latency")."""
    dev = check_mapping(stages, topo, device_of)
    src, dst = np.nonzero(stages.comm_bytes)
    return float(topo.transfer_time(stages.comm_bytes[src, dst][None, :], dev[:, src], dev[:, dst]).sum())


def _stop_point() -> None:
    """The tables take minutes on thousands of devices: stop there when asked (Ctrl-C, the
    time limit of the guard around them)."""
    if interrupt.stop_requested():
        raise interrupt.Stopped


def p2p_device_table(stages: PipelineStages, topo: Topology) -> FloatArray:
    """``(S, D)``: ``c_u(s)`` plus Eq. 8's inner minimum for stage ``s`` on device ``d``."""
    d_n = topo.n_devices
    comm = stages.comm_bytes
    table = np.tile(stages.compute[:, None], (1, d_n)).astype(np.float64)
    for s in range(stages.n_stages):
        nbrs = [t for t in range(stages.n_stages) if t != s and (comm[s, t] > 0 or comm[t, s] > 0)]
        if not nbrs:
            continue
        mats = [(topo.pair_matrix(float(comm[s, t])) if comm[s, t] > 0 else None,
                 topo.pair_matrix(float(comm[t, s])) if comm[t, s] > 0 else None)
                for t in nbrs]
        for d in range(d_n):
            _stop_point()
            cost = np.zeros((len(nbrs), d_n))
            for i, (out_m, in_m) in enumerate(mats):
                if out_m is not None:
                    cost[i] += out_m[d, :]
                if in_m is not None:
                    cost[i] += in_m[:, d]
            cost[:, d] = np.inf
            finite = np.where(np.isfinite(cost), cost, _BIG)
            from scipy.optimize import linear_sum_assignment  # lazy: 0.2-0.5 s to import

            rows, cols = linear_sum_assignment(finite)
            val = float(finite[rows, cols].sum())
            table[s, d] += np.inf if val >= _BIG else val
    return table


def allreduce_device_table(stages: PipelineStages, topo: Topology) -> FloatArray:
    """``(S, D)``: ``c_u(s)`` plus Eq. 9's ``c_AR^min(s, d)``.

    A stage's ring terms cost ``k L + w / B`` over a link; without latency that is ``w`` times
    the link's ``1 / B``, and the cheapest placement of a replica's two ring neighbours scales
    with ``w`` (a max and a min of scaled values are the scaled max and min, rounding
    included): one table of ``1 / B`` serves every stage. With latency, one per stage.
    """
    r_n, d_n = stages.replicas, topo.n_devices
    table = np.tile(stages.compute[:, None], (1, d_n)).astype(np.float64)
    if r_n < 2:
        return table
    ring = ring_weight(stages)
    unit = (ring_neighbour_cost(topo.inv_bandwidth, r_n)
            if not topo.latency.any() and (ring > 0).any() else None)
    for s in range(stages.n_stages):
        if ring[s] == 0:
            continue
        _stop_point()
        if unit is not None:
            table[s] += float(ring[s]) * unit
        else:
            table[s] += ring_neighbour_cost(topo.pair_matrix(float(ring[s]), 2.0 * (r_n - 1)), r_n)
    return table


#: Devices per block of :func:`ring_neighbour_cost` (two (block, D) arrays at once).
_NEIGHBOUR_BLOCK = 256


def ring_neighbour_cost(pm: FloatArray, r_n: int) -> FloatArray:
    """Per device ``d``, the cheapest ring terms of a replica there: its previous replica on
    ``e`` (``pm[e, d]``) and its next on ``f`` (``pm[d, f]``), ``e, f != d``, the larger of the
    two; ``e != f`` unless ``R = 2`` (then one neighbour both ways). Over the two cheapest ``e``
    and the two cheapest ``f`` (an optimal pair is among them), a block of devices at a time.

    Examples
    --------
    >>> pm = np.array([[0.0, 1.0, 5.0], [2.0, 0.0, 3.0], [4.0, 6.0, 0.0]])
    >>> ring_neighbour_cost(pm, 2).tolist()     # d = 0: e = f = 1, max(pm[1, 0], pm[0, 1])
    [2.0, 2.0, 5.0]
    >>> ring_neighbour_cost(pm, 3).tolist()     # d = 0: e = 2, f = 1: max(4, 1)
    [4.0, 3.0, 4.0]
    """
    d_n = pm.shape[0]
    out = np.empty(d_n)
    for lo in range(0, d_n, _NEIGHBOUR_BLOCK):
        _stop_point()
        hi = min(d_n, lo + _NEIGHBOUR_BLOCK)
        rows = np.arange(hi - lo)
        a = pm[:, lo:hi].T.copy()  # a[i, e]: from e into device lo + i
        b = pm[lo:hi, :].copy()  # b[i, f]: from device lo + i to f
        a[rows, rows + lo] = np.inf
        b[rows, rows + lo] = np.inf
        if r_n == 2:
            out[lo:hi] = np.maximum(a, b).min(axis=1)
            continue
        firsts = []
        for m in (a, b):  # the two cheapest, ties to the lower index (a stable sort's first two)
            i1 = m.argmin(axis=1)
            v1 = m[rows, i1]
            m[rows, i1] = np.inf
            i2 = m.argmin(axis=1)
            firsts.append(((i1, v1), (i2, m[rows, i2])))
        best = np.full(hi - lo, np.inf)
        for e, ae in firsts[0]:
            for f, bf in firsts[1]:
                np.minimum(best, np.where(e != f, np.maximum(ae, bf), np.inf), out=best)
        out[lo:hi] = best
    return out


def device_table(stages: PipelineStages, topo: Topology, kind: Instantiation) -> FloatArray:
    """Per stage and device, a lower bound on the stage time of a replica placed there."""
    if kind == "p2p":
        return p2p_device_table(stages, topo)
    return allreduce_device_table(stages, topo)


def matching_bound(stages: PipelineStages, table: FloatArray) -> float:
    """Bottleneck assignment over ``table``: the least ``t`` such that every vertex (``R``
    per stage) gets its own device with ``table[s, d] <= t``. At least Eqs. 8-9's
    ``max_s min_d table[s, d]`` (those let stages share their best device).

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0], param_bytes=[0, 0], comm_bytes=[[0, 0], [0, 0]])
    >>> matching_bound(st, np.array([[1.0, 5.0], [2.0, 9.0]]))  # both like device 0
    5.0
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    values = np.unique(table[np.isfinite(table)])
    if values.size == 0:
        return float("inf")
    s_n, d_n, r_n = table.shape[0], table.shape[1], stages.replicas

    def ok(t: float) -> bool:
        # the R replicas of a stage are R rows with its devices: built as index arrays, not
        # as a dense (S R, D) matrix (16.7 M cells at 4,096 devices)
        allowed = [np.flatnonzero(table[s] <= t).astype(np.int32) for s in range(s_n)]
        indptr = np.zeros(s_n * r_n + 1, np.int32 if r_n * sum(a.size for a in allowed) < 2**31 else np.int64)
        np.cumsum(np.repeat([a.size for a in allowed], r_n), out=indptr[1:])
        indices = np.concatenate([np.tile(a, r_n) for a in allowed]).astype(indptr.dtype)
        graph = csr_matrix((np.ones(indices.size, np.bool_), indices, indptr), shape=(s_n * r_n, d_n))
        m = maximum_bipartite_matching(graph, perm_type="column")
        return bool(np.all(m >= 0))

    # the least feasible value: feasibility only grows with t
    first = bisect.bisect_left(range(values.size), True, key=lambda i: ok(float(values[i])))
    return float(values[first]) if first < values.size else float("inf")


def lower_bound_p2p(stages: PipelineStages, topo: Topology) -> float:
    """Eq. 8: ``max_s c_u(s) + min_d min_{injective p} sum_{s' in adj(s)} M / B(d, p(s'))``.

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0, 0], param_bytes=[0, 0, 0],
    ...                     comm_bytes=[[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    >>> topo = Topology.from_matrices([[0, 1, 2], [1, 0, 4], [2, 4, 0]])
    >>> lower_bound_p2p(st, topo)  # the middle stage on device 2: 1/2 + 1/4
    0.75
    """
    return float(max(float(stages.compute.max()), p2p_device_table(stages, topo).min(axis=1).max()))


def lower_bound_allreduce(stages: PipelineStages, topo: Topology) -> float:
    """Eq. 9: ``max_s c_u(s) + min_d`` (cheapest placement of the two ring neighbours of a
    replica on ``d``, max of the two ring terms).

    Examples
    --------
    >>> st = PipelineStages(compute=[1], param_bytes=[4], comm_bytes=[[0]], replicas=2)
    >>> topo = Topology.from_matrices([[0, 2], [2, 0]])
    >>> lower_bound_allreduce(st, topo)  # 1 + 2*(2-1)*4/2 / 2
    3.0
    """
    return float(allreduce_device_table(stages, topo).min(axis=1).max())


def lower_bound(
    stages: PipelineStages, topo: Topology, kind: Instantiation, *, matching: bool = False
) -> float:
    """Eq. 8 or Eq. 9 for the chosen instantiation; with ``matching=True`` the bottleneck
    assignment over the same per-device values (:func:`matching_bound`), never lower."""
    table = device_table(stages, topo, kind)
    paper = float(table.min(axis=1).max())
    if kind == "p2p":
        paper = max(paper, float(stages.compute.max()))
    if not matching:
        return paper
    return max(paper, matching_bound(stages, table))
