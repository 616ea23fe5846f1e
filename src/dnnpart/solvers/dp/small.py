"""The throughput DP's rows in numpy, for small lattices before numba is loaded (start-up).

Loading numba and the cached DP kernel costs about 0.6 s of a process; the plain-Python twin
of :func:`~dnnpart.solvers.dp.kernels.dp_fill` costs as much on op BERT-3 (10 us a slice).
This module fills the same tables with array operations per row instead of a walk:

* compute, memory and unplaceable-node counts are additive over nodes, so a slice
  ``I \\ J`` has ``sum[I] - sum[J]`` (per-ideal prefix sums);
* transfers are not additive, but they only involve ``J``'s *boundary*: a transfer item (a
  uniform node's output, sent once per device reading it, or one edge of a non-uniform
  node) is charged to the slice ``I \\ J`` as outgoing iff its source is in the slice and a
  target is outside ``I`` (no target can be in ``J``, an ideal), so
  ``out = out_boundary(I) - sum over J's boundary items with a target outside I``; and as
  incoming iff its source is in ``J`` and a target in ``I \\ J``, which needs a target
  outside ``J``: only ``J``'s boundary items again. Boundaries are small (the lattice's width).

The slices priced are the kernel's (every ``J`` below ``I`` whose slice's least compute is
below ``upper``: along a walk the compute only grows, so the kernel reaches exactly these),
and the values are the kernel's up to float rounding (sums taken in another order); ties may
pick another split of the same value. Tests compare it with the kernel and brute force.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import Graph
from dnnpart.solvers.dp.ideals import IdealLattice
from dnnpart.solvers.dp.kernels import KIND_ACC, KIND_CPU, _fewer_devices, ideal_sums
from dnnpart.solvers.dp.preprocess import StageGraph

FloatArray = npt.NDArray[np.float64]


def ideal_bits(lattice: IdealLattice, n_stage: int) -> npt.NDArray[np.uint64]:
    """``(n_ideals, words)`` membership bit sets of the ideals over the stage nodes."""
    words = max(1, (n_stage + 63) // 64)
    bits = np.zeros((lattice.n_ideals, words), np.uint64)
    parent, added = lattice.parent.tolist(), lattice.added.tolist()
    for i in range(1, lattice.n_ideals):
        bits[i] = bits[parent[i]]
        v = added[i]
        bits[i, v >> 6] |= np.uint64(1) << np.uint64(v & 63)
    return bits


def _items(
    graph: Graph, stage: StageGraph, node_cost: FloatArray, uniform: npt.NDArray[np.bool_],
    words: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], FloatArray] | None:
    """Transfer items: source stage node, target stage bit set, cost (see module docstring);
    ``None`` when an edge joins stage nodes the stage DAG does not order (a training graph's
    loss-to-gradient edges): then a target may lie in an ideal without its source."""
    stage_succ = [set(stage.succ_idx[stage.succ_ptr[s]:stage.succ_ptr[s + 1]].tolist())
                  for s in range(stage.n_stage_nodes)]
    src_l: list[int] = []
    tgt_l: list[list[int]] = []
    cost_l: list[float] = []
    stage_of = stage.stage_of.tolist()
    succ_ptr, succ_idx = graph.succ_ptr.tolist(), graph.succ_idx.tolist()
    for u in range(graph.n_nodes):
        su = stage_of[u]
        targets = [(stage_of[succ_idx[e]], e) for e in range(succ_ptr[u], succ_ptr[u + 1])
                   if stage_of[succ_idx[e]] != su]
        if not targets:
            continue
        if any(t not in stage_succ[su] for t, _ in targets):
            return None
        if uniform[u]:
            src_l.append(su)
            tgt_l.append([t for t, _ in targets])
            cost_l.append(float(node_cost[u]))
        else:
            for t, e in targets:
                src_l.append(su)
                tgt_l.append([t])
                cost_l.append(float(graph.edge_cost[e]))
    tgt = np.zeros((len(src_l), words), np.uint64)
    for k, ts in enumerate(tgt_l):
        for t in ts:
            tgt[k, t >> 6] |= np.uint64(1) << np.uint64(t & 63)
    return np.asarray(src_l, np.int64), tgt, np.asarray(cost_l, np.float64)


def _bit_list(words: npt.NDArray[np.uint64]) -> list[int]:
    return [64 * w + b for w in range(words.shape[0]) for b in range(64)
            if (int(words[w]) >> b) & 1]


def fill_small(
    lattice: IdealLattice, stage: StageGraph, graph: Graph, node_cost: FloatArray,
    uniform: npt.NDArray[np.bool_], acc_time: FloatArray, cpu_time: FloatArray,
    acc_cap: float, cpu_cap: float, comm_scale: float, overlap: int, upper: float,
    dp: FloatArray, prev_lower: npt.NDArray[np.int32], prev_kind: npt.NDArray[np.int8],
) -> int | None:
    """Fill every row of ``dp``/``prev_lower``/``prev_kind`` as
    :func:`~dnnpart.solvers.dp.kernels.dp_fill` does without replication; returns the number
    of slices priced, or ``None`` (tables untouched) when some edge is not ordered by the
    stage DAG (see :func:`_items`).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.solvers.dp import build_stage_graph, enumerate_stage_ideals
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> sg = build_stage_graph(p.graph)
    >>> lat = enumerate_stage_ideals(sg)
    >>> dp = np.empty((lat.n_ideals, 3, 1)); pl = np.empty(dp.shape, np.int32)
    >>> pk = np.empty(dp.shape, np.int8)
    >>> cost, uni = p.graph.node_out_cost()
    >>> t = p.graph.time_on("accelerator")
    >>> fill_small(lat, sg, p.graph, cost, uni, t, np.full(4, np.inf), np.inf, -1.0, 0.0, 0,
    ...            np.inf, dp, pl, pk)
    10
    >>> float(dp[-1, 2, 0])
    5.0
    """
    n_ideals = lattice.n_ideals
    n_acc, n_cpu = dp.shape[1] - 1, dp.shape[2] - 1
    n_stage = stage.n_stage_nodes
    words = max(1, (n_stage + 63) // 64)
    found = _items(graph, stage, node_cost, uniform, words)
    if found is None:
        return None
    src, tgt, cost = found
    bits = ideal_bits(lattice, n_stage)

    def per_ideal(values: FloatArray) -> FloatArray:
        per_stage = np.bincount(stage.stage_of, weights=values, minlength=n_stage)
        return np.asarray(ideal_sums(lattice.parent, lattice.added, per_stage))

    fin_a, fin_c = np.isfinite(acc_time), np.isfinite(cpu_time)
    comp_a = per_ideal(np.where(fin_a, acc_time, 0.0))
    comp_c = per_ideal(np.where(fin_c, cpu_time, 0.0))
    bad_a = per_ideal((~fin_a).astype(np.float64))
    bad_c = per_ideal((~fin_c).astype(np.float64))
    mem = per_ideal(graph.memory_bytes.astype(np.float64))

    n_items = src.shape[0]
    # per ideal and item: how many of its targets are inside (a float matrix product: exact
    # for these small counts), and whether its source is
    member = ((bits[:, np.arange(n_stage) >> 6] >> (np.arange(n_stage) & 63).astype(np.uint64))
              & np.uint64(1)).astype(np.float32)
    incidence = np.zeros((n_stage, n_items), np.float32)
    for k in range(n_items):
        for t in _bit_list(tgt[k]):
            incidence[t, k] = 1.0
    inside = np.rint(member @ incidence).astype(np.int32)         # (n_ideals, items)
    n_targets = incidence.sum(axis=0).astype(np.int32)
    src_in = member[:, src] > 0
    boundary = src_in & (inside < n_targets[None, :])
    cost_p = np.concatenate([cost, [0.0]])
    out_boundary = (boundary * cost[None, :]).sum(axis=1)
    width = max(1, int(boundary.sum(axis=1).max())) if n_items else 1
    # boundary items of every ideal, padded with item `n_items`: no cost, no targets
    bd = np.full((n_ideals, width), n_items, np.int64)
    for i in np.flatnonzero(boundary.any(axis=1)).tolist():
        ks = np.flatnonzero(boundary[i])
        bd[i, : ks.size] = ks
    inside_p = np.hstack([inside, np.zeros((n_ideals, 1), np.int32)])
    n_targets_p = np.concatenate([n_targets, [0]])

    inf = np.inf
    priced = 0
    dp[0] = 0.0
    prev_lower[0] = -1
    prev_kind[0] = -1
    for big in range(1, n_ideals):
        dp[big] = inf
        prev_lower[big] = -1
        prev_kind[big] = -1
        below = np.flatnonzero(np.all((bits[:big] & ~bits[big]) == 0, axis=1))
        ca, cc = comp_a[big] - comp_a[below], comp_c[big] - comp_c[below]
        m = mem[big] - mem[below]
        acc_ok = (n_acc > 0) & (bad_a[big] - bad_a[below] == 0) & (m <= acc_cap)
        cpu_ok = (n_cpu > 0) & (bad_c[big] - bad_c[below] == 0) & (m <= cpu_cap)
        lb = np.minimum(np.where(acc_ok, ca, inf), np.where(cpu_ok, cc, inf))
        keep = lb < upper
        if not keep.any():
            _fewer_devices(dp, prev_kind, big)  # type: ignore[no-untyped-call]
            continue
        js, ca, cc, acc_ok, cpu_ok = below[keep], ca[keep], cc[keep], acc_ok[keep], cpu_ok[keep]
        priced += int(js.size)
        items = bd[js]                                   # (P, width)
        in_big = inside_p[big, items]
        into = in_big > inside_p[js[:, None], items]
        c_in = (cost_p[items] * into).sum(axis=1) * comm_scale
        leaves = in_big < n_targets_p[items]
        c_out = (out_boundary[big] - (cost_p[items] * leaves).sum(axis=1)) * comm_scale
        if overlap == 0:
            acc_load = ca + c_in + c_out
        elif overlap == 1:
            acc_load = np.maximum(ca, c_in + c_out)
        else:
            acc_load = np.maximum(ca, np.maximum(c_in, c_out))
        acc_load = np.where(acc_ok, acc_load, inf)
        cpu_load = np.where(cpu_ok, cc, inf)
        dpj = dp[js]
        if n_acc > 0:
            cand = np.maximum(dpj[:, :-1, :], acc_load[:, None, None])
            best, arg = cand.min(axis=0), cand.argmin(axis=0)
            better = best < dp[big, 1:, :]
            dp[big, 1:, :] = np.where(better, best, dp[big, 1:, :])
            prev_lower[big, 1:, :] = np.where(better, js[arg], prev_lower[big, 1:, :])
            prev_kind[big, 1:, :] = np.where(better, KIND_ACC, prev_kind[big, 1:, :])
        if n_cpu > 0:
            cand = np.maximum(dpj[:, :, :-1], cpu_load[:, None, None])
            best, arg = cand.min(axis=0), cand.argmin(axis=0)
            better = best < dp[big, :, 1:]
            dp[big, :, 1:] = np.where(better, best, dp[big, :, 1:])
            prev_lower[big, :, 1:] = np.where(better, js[arg], prev_lower[big, :, 1:])
            prev_kind[big, :, 1:] = np.where(better, KIND_CPU, prev_kind[big, :, 1:])
        _fewer_devices(dp, prev_kind, big)  # type: ignore[no-untyped-call]
    return priced
