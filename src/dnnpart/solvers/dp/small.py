"""The throughput DP's rows in numpy, for small lattices before numba is loaded (start-up).

Loading numba and the cached DP kernel costs about 0.6 s of a process; the plain-Python twin
of :func:`~dnnpart.solvers.dp.kernels.fill_plain` costs as much on op BERT-3 (10 us a slice).
This module fills the same tables with array operations instead of a walk, a *level* at a
time (the ideals of one size, which never contain one another and read only smaller ones):

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

Speed (start-up; ``docs/results/startup.md``): a level's pairs ``(I, J)`` are priced
together, a row's best cell by segmented minima (``np.minimum.reduceat``; ties to the lowest
``J``, as ``argmin`` and the kernel take them), each boundary column and each DP cell as one
contiguous array (gathers by ``take`` on 1-d arrays cost a tenth of 2-d fancy indexing), and
no BLAS product (OpenBLAS threads spin on a second core after one). Every slice gets the
same float operations in the same order as when the rows were filled one at a time (the row
sums of the transfer columns in numpy's order: :func:`_row_sums`), so the tables are those
of the row-at-a-time version to the bit (compared on the 14 reference workloads and 900
random problems when it was replaced); op BERT-3 inference: about 0.1 s instead of 0.3 s.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import Graph
from dnnpart.graph.stage_graph import StageGraph
from dnnpart.solvers.dp.ideals import IdealLattice
from dnnpart.solvers.dp.kernels import KIND_ACC, KIND_CPU, KIND_FEWER_ACC, KIND_FEWER_CPU

FloatArray = npt.NDArray[np.float64]

#: Subset tests word by word up to this many 64-node words, else on the 3-d array at once.
_WORD_LOOP = 4


def _items(
    graph: Graph, stage: StageGraph, node_cost: FloatArray, uniform: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], FloatArray] | None:
    """Transfer items: source stage node, ``(stage nodes, items)`` target incidence, cost
    (see module docstring);
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
    incidence = np.zeros((stage.n_stage_nodes, len(src_l)), np.int32)
    for k, ts in enumerate(tgt_l):
        incidence[ts, k] = 1
    return np.asarray(src_l, np.int64), incidence, np.asarray(cost_l, np.float64)


def _level_cuts(lattice: IdealLattice) -> list[int]:
    """Starts of the runs of ideals of one size (and ``n_ideals``): such ideals never
    contain one another, and their parents lie in earlier runs."""
    parent = lattice.parent.tolist()
    size = [0] * lattice.n_ideals
    cuts = [0]
    for i in range(1, lattice.n_ideals):
        size[i] = size[parent[i]] + 1
        if size[i] != size[i - 1]:
            cuts.append(i)
    return [*cuts, lattice.n_ideals]


def _accumulate(
    lattice: IdealLattice, cuts: list[int], per_node: npt.NDArray[np.generic], how: str,
) -> npt.NDArray[np.generic]:
    """Per ideal, ``per_node`` rows summed (``how="add"``: ideal ``i`` gets its parent's
    value plus its added node's, the order of ``ideal_sums``) or or-ed over its nodes."""
    out = np.zeros((lattice.n_ideals, *per_node.shape[1:]), per_node.dtype)
    for lo, hi in itertools.pairwise(cuts[1:]):
        up, new = out[lattice.parent[lo:hi]], per_node[lattice.added[lo:hi]]
        out[lo:hi] = up + new if how == "add" else up | new
    return out


def fill_small(
    lattice: IdealLattice, stage: StageGraph, graph: Graph, node_cost: FloatArray,
    uniform: npt.NDArray[np.bool_], acc_time: FloatArray, cpu_time: FloatArray,
    acc_cap: float, cpu_cap: float, comm_scale: float, overlap: int, upper: float,
    dp: FloatArray, prev_lower: npt.NDArray[np.int32], prev_kind: npt.NDArray[np.int8],
) -> int | None:
    """Fill every row of ``dp``/``prev_lower``/``prev_kind`` as
    :func:`~dnnpart.solvers.dp.kernels.fill_plain` does; returns the number
    of slices priced, or ``None`` (tables untouched) when some edge is not ordered by the
    stage DAG (see :func:`_items`).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.solvers.dp import enumerate_stage_ideals
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
    found = _items(graph, stage, node_cost, uniform)
    if found is None:
        return None
    src, incidence, cost = found
    n_items = src.shape[0]
    cuts = _level_cuts(lattice)

    fin_a, fin_c = np.isfinite(acc_time), np.isfinite(cpu_time)
    per_node = np.stack([np.where(fin_a, acc_time, 0.0), np.where(fin_c, cpu_time, 0.0),
                         (~fin_a).astype(np.float64), (~fin_c).astype(np.float64),
                         graph.memory_bytes.astype(np.float64)], axis=1)
    per_stage = np.stack([np.bincount(stage.stage_of, weights=per_node[:, k], minlength=n_stage)
                          for k in range(per_node.shape[1])], axis=1)
    sums = _accumulate(lattice, cuts, per_stage, "add")
    comp_a, comp_c, bad_a, bad_c, mem = (np.ascontiguousarray(sums[:, k]) for k in range(5))

    # per ideal: its stage nodes, and per item how many of its targets are inside
    member = _accumulate(lattice, cuts, np.eye(n_stage, dtype=np.bool_), "or")
    inside = _accumulate(lattice, cuts, incidence, "add")
    n_targets = incidence.sum(axis=0).astype(np.int32)
    src_in = member[:, src]
    boundary = src_in & (inside < n_targets[None, :])
    out_boundary = (boundary * cost[None, :]).sum(axis=1)
    width = max(1, int(boundary.sum(axis=1).max())) if n_items else 1
    # boundary items of every ideal, padded with item `n_items`: no cost, no targets
    bd = np.full((n_ideals, width), n_items, np.int64)
    rows, ks = np.nonzero(boundary)
    first = np.searchsorted(rows, rows)  # each row's first entry: rows are sorted
    bd[rows, np.arange(rows.size) - first] = ks
    inside_p = np.hstack([inside, np.zeros((n_ideals, 1), np.int32)])
    cost_p = np.concatenate([cost, [0.0]])
    n_targets_p = np.concatenate([n_targets, [0]])
    edge = _Boundary(
        items=np.ascontiguousarray(bd.T), cost=np.ascontiguousarray(cost_p[bd].T),
        inside=np.ascontiguousarray(np.take_along_axis(inside_p, bd, axis=1).T),
        n_targets=np.ascontiguousarray(n_targets_p[bd].T), inside_flat=inside_p.ravel(),
        stride=n_items + 1, out=out_boundary)
    # subset tests on bit sets: words of 64 stage nodes
    pad = -n_stage % 64
    bits = np.packbits(np.hstack([member, np.zeros((n_ideals, pad), np.bool_)]), axis=1)
    bits = bits.view(np.uint64)
    words = np.ascontiguousarray(bits.T)  # a word's column contiguous

    inf = np.inf
    priced = 0
    # the tables cell by cell (``(accelerators, CPUs, ideals)``): a cell's column contiguous
    shape = (*dp.shape[1:], n_ideals)
    table = _Tables(np.full(shape, inf), np.full(shape, -1, np.int32),
                    np.full(shape, -1, np.int8))
    table.value[:, :, 0] = 0.0
    # Rows of one level (ideals of one size) read only smaller ideals: each level is filled
    # at once, every slice with the float operations a row at a time would take (ties to
    # the lowest J): the same tables to the bit.
    for lo, hi in itertools.pairwise(cuts[1:]):
        # every J below a row's ideal I is an earlier ideal whose bits lie in I's
        if words.shape[0] <= _WORD_LOOP:
            outside = words[0, None, :lo] & ~words[0, lo:hi, None]
            for w in range(1, words.shape[0]):
                outside |= words[w, None, :lo] & ~words[w, lo:hi, None]
            below = outside == 0
        else:
            below = ~np.any(bits[None, :lo] & ~bits[lo:hi, None], axis=2)
        row, js = np.nonzero(below)                      # by row, then by J
        big = row + lo
        ca, cc = comp_a[big] - comp_a[js], comp_c[big] - comp_c[js]
        m = mem[big] - mem[js]
        acc_ok = (n_acc > 0) & (bad_a[big] - bad_a[js] == 0) & (m <= acc_cap)
        cpu_ok = (n_cpu > 0) & (bad_c[big] - bad_c[js] == 0) & (m <= cpu_cap)
        lb = np.minimum(np.where(acc_ok, ca, inf), np.where(cpu_ok, cc, inf))
        keep = lb < upper
        if keep.any():
            big, js = big[keep], js[keep]
            ca, cc, acc_ok, cpu_ok = ca[keep], cc[keep], acc_ok[keep], cpu_ok[keep]
            priced += int(js.size)
            _fill_level(big, js, ca, cc, acc_ok, cpu_ok, edge, comm_scale, overlap, table)
        _fewer_devices_rows(table, lo, hi)
    dp[...] = table.value.transpose(2, 0, 1)
    prev_lower[...] = table.lower.transpose(2, 0, 1)
    prev_kind[...] = table.kind.transpose(2, 0, 1)
    return priced


class _Tables(NamedTuple):
    """``dp``, ``prev_lower`` and ``prev_kind`` indexed ``[a, c, ideal]``."""

    value: FloatArray
    lower: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int8]


class _Boundary(NamedTuple):
    """Per column (``(width, n_ideals)`` arrays) and ideal: its boundary items (padded with a
    no-cost, no-target item), their costs, targets inside and target counts; ``inside_flat``
    how many targets of each item (``stride`` a row) each ideal holds; the boundary's
    outgoing cost."""

    items: npt.NDArray[np.int64]
    cost: FloatArray
    inside: npt.NDArray[np.int32]
    n_targets: npt.NDArray[np.int32]
    inside_flat: npt.NDArray[np.int32]
    stride: int
    out: FloatArray


def _row_sums(columns: list[FloatArray]) -> FloatArray:
    """``np.stack(columns, axis=1).sum(axis=1)``, bit for bit: numpy adds fewer than 8
    items left to right (the test compares); from 8 its pairwise order, on the stack."""
    if len(columns) >= 8:
        summed: FloatArray = np.stack(columns, axis=1).sum(axis=1)
        return summed
    total = columns[0]
    for column in columns[1:]:
        total = total + column
    return total


def _fill_level(
    big: npt.NDArray[np.int64], js: npt.NDArray[np.int64], ca: FloatArray, cc: FloatArray,
    acc_ok: npt.NDArray[np.bool_], cpu_ok: npt.NDArray[np.bool_], edge: _Boundary,
    comm_scale: float, overlap: int, table: _Tables,
) -> None:
    """Price the slices ``big[k] \\ js[k]`` (grouped by ``big``, ``js`` ascending in each
    group) and take each row's best cells."""
    inf = np.inf
    # per column of J's boundary items: how many of their targets lie in I (and in J),
    # their costs; the row sums in numpy's order (left to right below 8 columns)
    at = big * edge.stride
    into_cols, leave_cols = [], []
    for item, cost, inside, n_targets in zip(edge.items, edge.cost, edge.inside,
                                             edge.n_targets, strict=True):
        in_big = edge.inside_flat.take(at + item.take(js))
        cost_j = cost.take(js)
        into_cols.append(cost_j * (in_big > inside.take(js)))
        leave_cols.append(cost_j * (in_big < n_targets.take(js)))
    into_sum, leave_sum = _row_sums(into_cols), _row_sums(leave_cols)
    c_in = into_sum * comm_scale
    c_out = (edge.out[big] - leave_sum) * comm_scale
    if overlap == 0:
        acc_load = ca + c_in + c_out
    elif overlap == 1:
        acc_load = np.maximum(ca, c_in + c_out)
    else:
        acc_load = np.maximum(ca, np.maximum(c_in, c_out))
    acc_load = np.where(acc_ok, acc_load, inf)
    cpu_load = np.where(cpu_ok, cc, inf)
    n_acc, n_cpu = table.value.shape[0] - 1, table.value.shape[1] - 1
    if big[0] == big[-1]:  # one row (a linear lattice's levels): all cells at once
        _fill_row(int(big[0]), js, acc_load, cpu_load, n_acc, n_cpu, table)
        return
    new_row = np.concatenate(([True], big[1:] != big[:-1]))
    starts = np.flatnonzero(new_row)
    rows = big[starts]
    counts = np.diff(np.append(starts, js.size))
    group = np.cumsum(new_row) - 1
    # accelerator cells first, then CPU cells (which compare with the former's results)
    cells = [(KIND_ACC, acc_load, a, c, a - 1, c) for a in range(1, n_acc + 1)
             for c in range(n_cpu + 1)]
    cells += [(KIND_CPU, cpu_load, a, c, a, c - 1) for a in range(n_acc + 1)
              for c in range(1, n_cpu + 1)]
    for kind, load, a, c, a_j, c_j in cells:
        cand = np.maximum(table.value[a_j, c_j].take(js), load)
        best = np.minimum.reduceat(cand, starts)
        current = table.value[a, c, rows]
        better = best < current
        if not better.any():
            continue
        # the first J (lowest) reaching the row's best, as argmin takes it
        hit = np.flatnonzero(cand == np.repeat(best, counts))
        first_hit = hit[np.concatenate(([True], group[hit[1:]] != group[hit[:-1]]))]
        table.value[a, c, rows] = np.where(better, best, current)
        table.lower[a, c, rows] = np.where(better, js[first_hit], table.lower[a, c, rows])
        table.kind[a, c, rows] = np.where(better, kind, table.kind[a, c, rows])


def _fill_row(
    big: int, js: npt.NDArray[np.int64], acc_load: FloatArray, cpu_load: FloatArray,
    n_acc: int, n_cpu: int, table: _Tables,
) -> None:
    """:func:`_fill_level` for one row ``big``: each kind's cells at once."""
    below = table.value[:, :, js]                         # (a, c, J)
    for kind, load, n, source, target in (
        (KIND_ACC, acc_load, n_acc, np.s_[:-1, :], np.s_[1:, :]),
        (KIND_CPU, cpu_load, n_cpu, np.s_[:, :-1], np.s_[:, 1:]),
    ):
        if n == 0:
            continue
        cand = np.maximum(below[source], load)
        first = cand.argmin(axis=2)                      # the lowest J, as the kernel
        best = np.take_along_axis(cand, first[..., None], axis=2)[..., 0]
        cell = (*target, big)
        current = table.value[cell]
        better = best < current
        table.value[cell] = np.where(better, best, current)
        table.lower[cell] = np.where(better, js[first], table.lower[cell])
        table.kind[cell] = np.where(better, kind, table.kind[cell])


def _fewer_devices_rows(table: _Tables, lo: int, hi: int) -> None:
    """:func:`~dnnpart.solvers.dp.kernels._fewer_devices` on the rows ``lo..hi-1`` at once."""
    value, kinds = table.value, table.kind
    for a in range(value.shape[0]):
        for c in range(value.shape[1]):
            cell = value[a, c, lo:hi]
            kind = kinds[a, c, lo:hi]
            for (a2, c2), fewer in (((a - 1, c), KIND_FEWER_ACC), ((a, c - 1), KIND_FEWER_CPU)):
                if min(a2, c2) < 0:
                    continue
                other = value[a2, c2, lo:hi]
                smaller = other < cell
                cell[smaller] = other[smaller]
                kind[smaller] = fewer
