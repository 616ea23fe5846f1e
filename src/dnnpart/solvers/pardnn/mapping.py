"""LFLAM: locality-first lookahead and level-aware mapping (paper 2, §3.1.2, Alg. 2).

Choices where the paper is silent or ambiguous (also in ``docs/methods/pardnn.md``):

* **Levels and spans.** After slicing, the levels are recomputed with the communication
  inside every cluster set to zero (``tl_cl``, ``bl_cl``); a node is expected to run over
  ``[tl_cl, tl_cl + comp)``. ``span(sc) = [max over parents p of the first node of tl_cl(p)
  + comp(p), min over children c of the last node of tl_cl(c))`` (0 without parents, +inf
  without children), and "work in span" is the computation of the nodes whose expected run
  *meets* the span (not only those starting in it: a long node running across a narrow span
  occupies its device there). Two Fenwick trees per device and two for the unmapped work,
  indexed by the rank of the distinct start and finish levels, give it as "work starting
  before the span's end minus work finished by its start".
* **Criticality** of a linear cluster ``v1..vm``: ``tl_cl(v1) + Σ comp + bl_cl(vm) -
  comp(vm)``, the longest source-sink path through all of it. Sorted non-increasing, ties
  to the lower first node.
* **Eligibility.** Totally communicating: all its positive communication goes to nodes
  already on one device. Maximally communicating (only when CCR ≥ 10): its communication with
  the most communicating device exceeds its total communication / K. A cluster without
  communication is never eligible.
* **Conditions.** (a) the unmapped work in its span (its own excluded) is at least the
  imbalance the move creates, Σ_{q≠p} max(0, load_p + W − load_q); (b) after the move p is
  not above the most loaded other device; (c) its communication with p exceeds the *sum* W +
  load_p + unmapped work in span (the conservative reading: only then does communication
  dominate every schedule of that work on p).
* **Loop.** The printed ``iteration ≥ log|V|`` is read as "repeat while something was mapped
  and fewer than ⌈log₂|V|⌉ passes were made".
* **Eq. 1.** ``n ∈ pc`` is read as ``n ∈ pe``; only communication with *mapped* nodes counts;
  ties go to the device with the most communication, then to the lowest index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dnnpart.solvers.pardnn import kernels as k
from dnnpart.solvers.pardnn.inputs import Costs, FloatArray, IntArray
from dnnpart.solvers.pardnn.levels import levels
from dnnpart.solvers.pardnn.slicing import Slicing

#: Graphs at or above this communication-to-computation ratio are "highly communicating"
#: (paper 2 citing Sinnen): maximally communicating clusters become eligible too.
CCR_THRESHOLD = 10.0


@dataclass(slots=True, eq=False)
class MappingState:
    """Everything LFLAM keeps while it maps (mutable: ``device``, ``cl_device``, the trees)."""

    costs: Costs
    slicing: Slicing
    comm_cl: FloatArray
    tl_cl: FloatArray
    bl_cl: FloatArray
    rank: IntArray
    n_levels: int
    lo_rank: IntArray
    hi_rank: IntArray
    cl_weight: FloatArray
    order: IntArray
    device: IntArray
    cl_device: IntArray
    dev_tree: FloatArray
    unm_tree: FloatArray
    ccr: float


def prepare(costs: Costs, slicing: Slicing, fixed: IntArray | None = None) -> MappingState:
    """Levels with intra-cluster communication zeroed, spans, order, initial trees.

    Primary ``j`` starts on device ``j``; nodes outside every cluster go to ``fixed[node]``,
    which may name a device beyond the K mapped onto (e.g. a CPU for pinned ops).
    """
    n, kk = costs.n, slicing.k
    key = np.where(slicing.cluster >= 0, slicing.cluster, -2 - np.arange(n))
    src = costs.edge_sources()
    comm_cl = np.where(key[src] != key[costs.succ_idx], costs.comm, 0.0)
    tl_cl, bl_cl = levels(costs, comm=comm_cl)
    n_cl = slicing.n_clusters
    sizes = np.diff(slicing.cl_ptr)
    nonempty = sizes > 0
    # pinned nodes are in no cluster: cl_nodes may be shorter than n, or empty (padded so that
    # an empty cluster's index stays in range; its first/last node is never used)
    padded = np.append(slicing.cl_nodes, 0)
    first = np.where(nonempty, padded[slicing.cl_ptr[:-1]], 0)
    last = np.where(nonempty, padded[np.maximum(slicing.cl_ptr[1:] - 1, 0)], 0)
    cl_weight = np.zeros(n_cl)
    if slicing.cl_nodes.size:
        np.add.at(cl_weight, slicing.cluster[slicing.cl_nodes], costs.comp[slicing.cl_nodes])
    crit = tl_cl[first] + cl_weight + bl_cl[last] - costs.comp[last]
    sec = np.arange(kk, n_cl, dtype=np.int64)
    order = sec[np.lexsort((first[sec], -crit[sec]))]
    fin_cl = tl_cl + costs.comp
    lv = np.unique(np.concatenate((tl_cl, fin_cl)))
    rank = np.stack((np.searchsorted(lv, tl_cl), np.searchsorted(lv, fin_cl)), axis=1).astype(np.int64)
    pred_fin, succ_start = k.span_bounds(costs.succ_ptr, costs.succ_idx, costs.comp, tl_cl)
    lo, hi = pred_fin[first], succ_start[last]
    # ranks for overlap_work: levels at or below the span's start, levels below its end
    lo_rank = np.where(lo < hi, np.searchsorted(lv, lo, side="right"), 0).astype(np.int64)
    hi_rank = np.where(lo < hi, np.searchsorted(lv, hi, side="left"), 0).astype(np.int64)
    device = np.full(n, -1, np.int64)
    in_primary = (slicing.cluster >= 0) & (slicing.cluster < kk)
    device[in_primary] = slicing.cluster[in_primary]
    if fixed is not None:
        outside = slicing.cluster < 0
        device[outside] = fixed[outside]
    if np.any((slicing.cluster < 0) & (device < 0)):
        raise ValueError("a node outside every cluster has no fixed device")
    cl_device = np.full(n_cl, -1, np.int64)
    primaries = min(kk, n_cl)  # a slicing may run out of nodes (and clusters) before K
    cl_device[:primaries] = np.arange(primaries)
    n_levels = int(lv.shape[0])
    def trees(mask: np.ndarray) -> FloatArray:
        return np.stack([
            k.fw_build(np.bincount(rank[mask, side], weights=costs.comp[mask], minlength=n_levels))
            for side in range(2)
        ])

    dev_tree = np.stack([trees(device == d) for d in range(kk)]) if kk else np.zeros((0, 2, n_levels + 1))
    unm_tree = trees(device < 0)
    total_comp = float(costs.comp.sum())
    ccr = float(costs.comm.sum()) / total_comp if total_comp > 0 else math.inf
    return MappingState(
        costs=costs, slicing=slicing, comm_cl=comm_cl, tl_cl=tl_cl, bl_cl=bl_cl, rank=rank,
        n_levels=n_levels, lo_rank=lo_rank, hi_rank=hi_rank, cl_weight=cl_weight, order=order,
        device=device, cl_device=cl_device, dev_tree=dev_tree, unm_tree=unm_tree, ccr=ccr,
    )


def lookahead_pass(state: MappingState) -> int:
    """One locality-first lookahead pass; returns the number of clusters it mapped."""
    c, s = state.costs, state.slicing
    return int(
        k.lookahead_pass(
            state.order, s.cl_ptr, s.cl_nodes, s.cluster, state.device, state.cl_device,
            state.cl_weight, state.lo_rank, state.hi_rank, state.rank, c.comp, c.succ_ptr,
            c.succ_idx, c.pred_ptr, c.pred_idx, c.pred_edge, c.comm, state.dev_tree,
            state.unm_tree, state.ccr >= CCR_THRESHOLD,
        )
    )


def level_aware_pass(state: MappingState) -> None:
    """Map every remaining secondary by Eq. 1."""
    c, s = state.costs, state.slicing
    k.level_aware_pass(
        state.order, s.cl_ptr, s.cl_nodes, s.cluster, state.device, state.cl_device, state.lo_rank,
        state.hi_rank, state.rank, c.comp, c.succ_ptr, c.succ_idx, c.pred_ptr, c.pred_idx,
        c.pred_edge, c.comm, state.dev_tree, state.unm_tree,
    )


def eq1_inputs(state: MappingState, cluster: int) -> tuple[FloatArray, FloatArray]:
    """Span loads per device (from the trees) and communication with each device."""
    c, s = state.costs, state.slicing
    kk = s.k
    loads, comm_with = np.zeros(kk), np.zeros(kk)
    k.span_loads(state.dev_tree, state.lo_rank[cluster], state.hi_rank[cluster], loads)
    k.cluster_comm(cluster, s.cl_ptr, s.cl_nodes, s.cluster, state.device, c.succ_ptr, c.succ_idx,
                   c.pred_ptr, c.pred_idx, c.pred_edge, c.comm, comm_with)
    return loads, comm_with


def max_passes(n: int) -> int:
    """⌈log₂ |V|⌉ lookahead passes at most (at least one)."""
    return max(1, math.ceil(math.log2(max(n, 2))))


def lflam(costs: Costs, slicing: Slicing, fixed: IntArray | None = None) -> tuple[IntArray, dict[str, float]]:
    """Alg. 2: node -> device and statistics (passes, clusters mapped by lookahead, CCR).

    Examples
    --------
    >>> from dnnpart.solvers.pardnn.slicing import slice_graph
    >>> c = Costs.from_edges(4, [0, 0, 1, 2], [1, 2, 3, 3], comp=[1.0, 5.0, 1.0, 1.0],
    ...                      comm=[1.0, 1.0, 1.0, 1.0])
    >>> device, info = lflam(c, slice_graph(c, 2))
    >>> device.tolist()
    [0, 0, 1, 0]
    """
    state = prepare(costs, slicing, fixed)
    limit = max_passes(costs.n)
    passes = 0
    by_lookahead = 0
    while True:
        mapped = lookahead_pass(state)
        passes += 1
        by_lookahead += mapped
        if mapped == 0 or passes >= limit:
            break
    level_aware_pass(state)
    info = {"lookahead_passes": float(passes), "lookahead_mapped": float(by_lookahead), "ccr": state.ccr}
    return state.device, info
