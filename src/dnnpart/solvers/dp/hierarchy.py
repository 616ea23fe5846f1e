"""Throughput DP for two-level accelerator hierarchies (paper 1, appendix C.3).

In a hierarchical cluster (accelerators in several groups, e.g.
:func:`~dnnpart.devices.two_level_cluster`) a transfer costs the edge's cost times the rate of
the link it uses (:meth:`~dnnpart.devices.Cluster.transfer_scale`): ``intra`` between two
accelerators of one group, ``inter`` between groups and between an accelerator and a CPU.

Search space
------------
Contiguous splits in pipeline order (a chain of ideals of the stage graph, as for the flat DP)
in which the stages of each group's accelerators are *consecutive*: the pipeline is a sequence
of blocks, each either one group's segment ``J \\ I`` (split inside over up to ``a``
accelerators of that group) or one CPU stage. Splits whose group segments interleave (group 0,
group 1, group 0) or with a CPU stage between two stages of one group are outside it; the
brute-force oracle over all splits covers those on tiny graphs.

Inside a segment ``G = J \\ I`` the rate of every transfer is known from ``G`` alone: a node's
output goes at ``inter`` if some receiver lies outside ``G`` (another group or a CPU), else at
``intra``; an input from outside ``G`` comes at ``inter``, from ``G`` at ``intra``. Groups are
identical, so the outer DP only counts groups and CPUs used.

Complexity
----------
``O(I^2)`` segments, each with an inner DP over the ideals between its ends (``O(I^2 a)``):
``O(I^4 a)`` slice prices in the worst case, cut by an upper bound (a slice or segment whose
compute alone exceeds it is skipped). :func:`run_hierarchy_dp` runs the numba kernels of
:mod:`~dnnpart.solvers.dp.hierarchy_kernels`, which also skip a segment that cannot beat the
row's current values and a state whose remaining compute cannot fit on the accelerators left
of its group; :func:`run_hierarchy_dp_plain` is the plain-Python twin. The solver refuses
lattices above ``max_hierarchy_ideals`` ideals (default 500: op BERT-3, 477 ideals, takes
about 10 s CPU; op BERT-6, 936 ideals, does not finish in 120 s).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart._arrays import set_bits
from dnnpart.errors import UsageError
from dnnpart.graph.stage_graph import StageGraph
from dnnpart.problem import Problem
from dnnpart.solvers.dp.ideals import IdealLattice
from dnnpart.solvers.method import Progress, Stopwatch

#: Default cap on the ideals the hierarchy DP accepts.
DEFAULT_MAX_HIERARCHY_IDEALS = 500

_SLACK = 1e-9


@dataclass(frozen=True, slots=True)
class HierarchyModel:
    """Link rates and group layout of a two-level cluster, as the hierarchy DP needs them.

    ``groups[g]`` lists the accelerator indices of group ``g`` (all groups the same size);
    ``intra``/``inter`` are load units per unit of edge cost (host link scale included).
    """

    groups: tuple[tuple[int, ...], ...]
    cpus: tuple[int, ...]
    intra: float
    inter: float


def _one_value(values: npt.NDArray[np.float64], what: str) -> float:
    if values.size == 0:
        return 0.0
    if values.min() != values.max():
        raise UsageError(
            f"the hierarchy DP needs one rate for {what}; they range from "
            f"{values.min():.6g} to {values.max():.6g} (use brute-force for general links)"
        )
    return float(values[0])


def hierarchy_model(problem: Problem, comm_scale: float) -> HierarchyModel:
    """Check that the cluster is a regular two-level hierarchy and read its link rates.

    Examples
    --------
    >>> from dnnpart.devices import two_level_cluster
    >>> from dnnpart.testing import chain_graph
    >>> c = two_level_cluster(n_groups=2, accelerators_per_group=2, memory_bytes=1e9,
    ...                       intra_bandwidth=100e9, inter_bandwidth=25e9)
    >>> m = hierarchy_model(Problem(graph=chain_graph(3, acc_time=1.0, cost=1.0), cluster=c), 1.0)
    >>> m.groups, m.intra, m.inter
    (((0, 1), (2, 3)), 1.0, 4.0)
    """
    cluster = problem.cluster
    accs = np.asarray(cluster.accelerators, dtype=np.int64)
    labels = cluster.group[accs]
    groups = tuple(tuple(int(x) for x in accs[labels == g]) for g in np.unique(labels))
    if len({len(g) for g in groups}) != 1:
        raise UsageError(
            "the hierarchy DP needs groups of equal size; got "
            f"{[len(g) for g in groups]} accelerators per group"
        )
    scale = cluster.transfer_scale()
    same = labels[:, None] == labels[None, :]
    off = ~np.eye(accs.size, dtype=np.bool_)
    block = scale[np.ix_(accs, accs)]
    intra = _one_value(block[same & off], "links inside a group")
    inter_parts = [block[~same]]
    cpus = np.asarray(cluster.cpus, dtype=np.int64)
    if cpus.size:
        inter_parts += [scale[np.ix_(accs, cpus)].ravel(), scale[np.ix_(cpus, accs)].ravel()]
    inter = _one_value(np.concatenate(inter_parts), "links between groups and to CPUs")
    return HierarchyModel(groups=groups, cpus=cluster.cpus, intra=intra * comm_scale,
                          inter=inter * comm_scale)


@dataclass(frozen=True, slots=True)
class HierarchyOutcome:
    """Raw result of :func:`run_hierarchy_dp`: DP value (``inf`` if none below the bound or
    stopped early), assignment of original nodes, whether it finished, slices priced."""

    value: float
    assignment: npt.NDArray[np.int32] | None
    finished: bool
    slices_priced: int


class _Pricer:
    """Loads of candidate slices; node sets are Python-int bitmasks over original nodes."""

    def __init__(self, problem: Problem, model: HierarchyModel, acc_time: npt.NDArray[np.float64],
                 cpu_time: npt.NDArray[np.float64], acc_cap: float, cpu_cap: float) -> None:
        graph = problem.graph
        n = graph.n_nodes
        node_cost, uniform = graph.node_out_cost()
        self.cost = node_cost.tolist()
        self.uniform = uniform.tolist()
        self.succ: list[int] = [0] * n
        self.pred: list[int] = [0] * n
        self.out_edges: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        src, dst = graph.edge_sources().tolist(), graph.succ_idx.tolist()
        for u, v, c in zip(src, dst, graph.edge_cost.tolist(), strict=True):
            self.succ[u] |= 1 << v
            self.pred[v] |= 1 << u
            self.out_edges[u].append((v, c))
        self.acc_time = acc_time.tolist()
        self.cpu_time = cpu_time.tolist()
        self.memory = graph.memory_bytes.tolist()
        self.acc_cap, self.cpu_cap = acc_cap, cpu_cap
        self.intra, self.inter = model.intra, model.inter
        self.overlap = problem.objective.overlap
        self.priced = 0

    def _memory_ok(self, nodes: list[int], cap: float) -> bool:
        return bool(sum(self.memory[v] for v in nodes) <= cap)

    def cpu(self, s: int) -> float:
        nodes = set_bits(s)
        if not self._memory_ok(nodes, self.cpu_cap):
            return math.inf
        return float(sum(self.cpu_time[v] for v in nodes))

    def acc(self, s: int, segment: int) -> float:
        """Load of slice ``s`` on an accelerator whose group holds ``segment``."""
        self.priced += 1
        nodes = set_bits(s)
        if not self._memory_ok(nodes, self.acc_cap):
            return math.inf
        compute = float(sum(self.acc_time[v] for v in nodes))
        if not math.isfinite(compute):
            return math.inf
        intra, inter, outside = self.intra, self.inter, ~segment
        comm_out = comm_in = 0.0
        feeders = 0
        for u in nodes:
            feeders |= self.pred[u]
            ext = self.succ[u] & ~s
            if not ext:
                continue
            if self.uniform[u]:
                comm_out += self.cost[u] * (inter if ext & outside else intra)
            else:
                for v, c in self.out_edges[u]:
                    if not (s >> v) & 1:
                        comm_out += c * (inter if (outside >> v) & 1 else intra)
        for p in set_bits(feeders & ~s):
            rate = inter if (outside >> p) & 1 else intra
            if self.uniform[p]:
                comm_in += self.cost[p] * rate
            else:
                comm_in += rate * sum(c for v, c in self.out_edges[p] if (s >> v) & 1)
        if self.overlap == "none":
            return compute + comm_in + comm_out
        if self.overlap == "compute-comm":
            return max(compute, comm_in + comm_out)
        return max(compute, comm_in, comm_out)


def run_hierarchy_dp_plain(
    problem: Problem, stage: StageGraph, lattice: IdealLattice, model: HierarchyModel, *,
    acc_time: npt.NDArray[np.float64], cpu_time: npt.NDArray[np.float64], acc_cap: float,
    cpu_cap: float, upper: float = math.inf, clock: Stopwatch | None = None,
    progress: Progress | None = None,
) -> HierarchyOutcome:
    """Best split of the search space (module docstring) with max-load ``<= upper``.

    The plain-Python reference twin of :func:`run_hierarchy_dp` (Python-int bitmasks, ``dict``
    tables); tests check that both agree.

    Examples
    --------
    >>> from dnnpart.devices import two_level_cluster
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.solvers.dp import enumerate_stage_ideals
    >>> c = two_level_cluster(n_groups=2, accelerators_per_group=1, memory_bytes=1e9,
    ...                       intra_bandwidth=100e9, inter_bandwidth=50e9)
    >>> p = Problem(graph=chain_graph(2, acc_time=3.0, cost=1.0), cluster=c)
    >>> sg = build_stage_graph(p.graph)
    >>> t = p.graph.time_on("accelerator")
    >>> out = run_hierarchy_dp_plain(p, sg, enumerate_stage_ideals(sg), hierarchy_model(p, 1.0),
    ...                              acc_time=t, cpu_time=t, acc_cap=1e9, cpu_cap=-1.0)
    >>> out.value, out.assignment.tolist()   # 3 compute + 1 transfer at twice the cost
    (5.0, [0, 1])
    """
    n_ideals = lattice.n_ideals
    members = [0] * stage.n_stage_nodes
    for v, s in enumerate(stage.stage_of.tolist()):
        members[s] |= 1 << v
    ideal = [0] * n_ideals  # original-node bitmask of every ideal
    parent, added = lattice.parent.tolist(), lattice.added.tolist()
    for i in range(1, n_ideals):
        ideal[i] = ideal[parent[i]] | members[added[i]]
    # accelerator compute of every ideal, for the cheap lower bound of a slice
    finite_time = np.where(np.isfinite(acc_time), acc_time, 0.0).tolist()
    n_bad = (~np.isfinite(acc_time)).astype(np.int64).tolist()
    comp = [0.0] * n_ideals
    bad = [0] * n_ideals
    for i in range(1, n_ideals):
        nodes = set_bits(members[added[i]])
        comp[i] = comp[parent[i]] + sum(finite_time[v] for v in nodes)
        bad[i] = bad[parent[i]] + sum(n_bad[v] for v in nodes)
    limit = upper * (1 + _SLACK) + _SLACK if math.isfinite(upper) else math.inf
    # below[j]: ideals strictly inside ideal j, in lattice (subset-first) order
    below: list[list[int]] = [[] for _ in range(n_ideals)]
    for j in range(n_ideals):
        mj = ideal[j]
        below[j] = [i for i in range(j) if not ideal[i] & ~mj]
    pricer = _Pricer(problem, model, acc_time, cpu_time, acc_cap, cpu_cap)
    n_groups, a = len(model.groups), len(model.groups[0])
    n_cpu = len(model.cpus)

    def acc_possible(i: int, j: int, parts: int) -> bool:
        return bad[j] == bad[i] and comp[j] - comp[i] <= parts * limit

    def segment(lo: int, hi: int) -> tuple[float, list[int]]:
        """Best split of ideal ``hi`` minus ideal ``lo`` over <= ``a`` accelerators."""
        seg_mask = ideal[hi] & ~ideal[lo]
        inside = [k for k in below[hi] if not ideal[lo] & ~ideal[k]] + [hi]
        best: dict[int, list[float]] = {lo: [0.0] * (a + 1)}
        back: dict[tuple[int, int], int] = {}
        for k2 in inside[1:]:
            row = [math.inf] * (a + 1)
            for k in inside:
                if k == k2:
                    break
                if k not in best or ideal[k] & ~ideal[k2] or not acc_possible(k, k2, 1):
                    continue
                prev = best[k]
                if not any(x < math.inf for x in prev[:a]):
                    continue
                load = pricer.acc(ideal[k2] & ~ideal[k], seg_mask)
                if load > limit:
                    continue
                for m in range(1, a + 1):
                    value = max(prev[m - 1], load)
                    if value < row[m]:
                        row[m], back[(k2, m)] = value, k
            best[k2] = row
        row = best.get(hi, [math.inf] * (a + 1))
        m = min(range(a + 1), key=lambda x: (row[x], x))
        if not math.isfinite(row[m]):
            return math.inf, []
        found, chain, k = row[m], [hi], hi
        while k != lo:
            k = back[(k, m)]
            m -= 1
            chain.append(k)
        return found, chain[::-1]

    inf = math.inf
    shape = (n_groups + 1, n_cpu + 1)
    table = [[[inf] * shape[1] for _ in range(shape[0])] for _ in range(n_ideals)]
    choice: dict[tuple[int, int, int], tuple[str, int, list[int]]] = {}
    table[0] = [[0.0] * shape[1] for _ in range(shape[0])]
    for j in range(1, n_ideals):
        if clock is not None and clock.expired():
            return HierarchyOutcome(inf, None, False, pricer.priced)
        if progress is not None and j % 16 == 0:
            elapsed = f", {clock.elapsed:.1f} s" if clock is not None else ""
            progress.update(f"DP (hierarchy): {j:,}/{n_ideals:,} rows, "
                            f"{pricer.priced:,} slices priced{elapsed}", j / n_ideals)
        cur = table[j]
        for i in below[j]:
            prev = table[i]
            if any(prev[h][c] < inf for h in range(n_groups) for c in range(n_cpu + 1)) and (
                acc_possible(i, j, a)
            ):
                value, chain = segment(i, j)
                if value <= limit:
                    for h in range(1, n_groups + 1):
                        for c in range(n_cpu + 1):
                            cand = max(prev[h - 1][c], value)
                            if cand < cur[h][c]:
                                cur[h][c] = cand
                                choice[(j, h, c)] = ("group", i, chain)
            if n_cpu and any(prev[h][c] < inf for h in range(n_groups + 1) for c in range(n_cpu)):
                load = pricer.cpu(ideal[j] & ~ideal[i])
                if load <= limit:
                    for h in range(n_groups + 1):
                        for c in range(1, n_cpu + 1):
                            cand = max(prev[h][c - 1], load)
                            if cand < cur[h][c]:
                                cur[h][c] = cand
                                choice[(j, h, c)] = ("cpu", i, [])
        # fewer groups or CPUs than available is allowed
        for h in range(n_groups + 1):
            for c in range(n_cpu + 1):
                for h2, c2 in ((h - 1, c), (h, c - 1)):
                    if h2 >= 0 and c2 >= 0 and cur[h2][c2] < cur[h][c]:
                        cur[h][c] = cur[h2][c2]
                        choice[(j, h, c)] = ("fewer", h2, [c2])
    full = n_ideals - 1
    value = table[full][n_groups][n_cpu]
    if not math.isfinite(value):
        return HierarchyOutcome(inf, None, True, pricer.priced)
    assignment = np.full(problem.graph.n_nodes, -1, np.int32)
    j, h, c = full, n_groups, n_cpu
    while j > 0:
        kind, i, chain = choice[(j, h, c)]
        if kind == "fewer":
            h, c = i, chain[0]
            continue
        if kind == "cpu":
            _place(assignment, ideal[j] & ~ideal[i], model.cpus[c - 1])
            c -= 1
        else:
            devices = model.groups[h - 1]
            for t, (lo, hi) in enumerate(itertools.pairwise(chain)):
                _place(assignment, ideal[hi] & ~ideal[lo], devices[t])
            h -= 1
        j = i
    assert np.all(assignment >= 0), "hierarchy DP left nodes unplaced"
    return HierarchyOutcome(value, assignment, True, pricer.priced)


def ideal_members(stage: StageGraph, lattice: IdealLattice) -> npt.NDArray[np.bool_]:
    """``out[i, v]``: original node ``v`` lies in ideal ``i`` (one row per ideal)."""
    n = stage.stage_of.shape[0]
    stage_rows = np.zeros((stage.n_stage_nodes, n), np.bool_)
    stage_rows[stage.stage_of, np.arange(n)] = True
    out = np.zeros((lattice.n_ideals, n), np.bool_)
    parent, added = lattice.parent, lattice.added
    for i in range(1, lattice.n_ideals):
        np.logical_or(out[parent[i]], stage_rows[added[i]], out=out[i])
    return out


def run_hierarchy_dp(
    problem: Problem, stage: StageGraph, lattice: IdealLattice, model: HierarchyModel, *,
    acc_time: npt.NDArray[np.float64], cpu_time: npt.NDArray[np.float64], acc_cap: float,
    cpu_cap: float, upper: float = math.inf, clock: Stopwatch | None = None,
    progress: Progress | None = None, jit: bool = True,
) -> HierarchyOutcome:
    """:func:`run_hierarchy_dp_plain` over dense arrays, one numba kernel call per row.

    Same recurrence, loop order and result; ``jit=False`` runs the kernels' plain-Python
    twins (``.py_func``). The stop flag and the clock are checked between rows.

    Examples
    --------
    >>> from dnnpart.devices import two_level_cluster
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.solvers.dp import enumerate_stage_ideals
    >>> c = two_level_cluster(n_groups=2, accelerators_per_group=1, memory_bytes=1e9,
    ...                       intra_bandwidth=100e9, inter_bandwidth=50e9)
    >>> p = Problem(graph=chain_graph(2, acc_time=3.0, cost=1.0), cluster=c)
    >>> sg = build_stage_graph(p.graph)
    >>> t = p.graph.time_on("accelerator")
    >>> out = run_hierarchy_dp(p, sg, enumerate_stage_ideals(sg), hierarchy_model(p, 1.0),
    ...                        acc_time=t, cpu_time=t, acc_cap=1e9, cpu_cap=-1.0, jit=False)
    >>> out.value, out.assignment.tolist()
    (5.0, [0, 1])
    """
    from dnnpart.solvers.dp import hierarchy_kernels as hk

    row_fn: Callable[..., Any] = hk.hierarchy_row if jit else hk.hierarchy_row.py_func
    sub_fn: Callable[..., Any] = hk.subset_matrix if jit else hk.subset_matrix.py_func
    graph = problem.graph
    n_ideals = lattice.n_ideals
    member = ideal_members(stage, lattice)
    packed = np.packbits(member, axis=1)
    pad = (-packed.shape[1]) % 8
    words = np.ascontiguousarray(np.pad(packed, ((0, 0), (0, pad)))).view(np.uint64)
    sub = sub_fn(words)
    finite = np.where(np.isfinite(acc_time), acc_time, 0.0)
    n_bad = (~np.isfinite(acc_time)).astype(np.int64)
    # accelerator compute of every ideal (same summation order as the plain twin)
    comp = np.zeros(n_ideals)
    bad = np.zeros(n_ideals, np.int64)
    groups_of = [np.flatnonzero(stage.stage_of == s) for s in range(stage.n_stage_nodes)]
    parent, added = lattice.parent.tolist(), lattice.added.tolist()
    fin, nb = finite.tolist(), n_bad.tolist()
    comp_l, bad_l = [0.0] * n_ideals, [0] * n_ideals
    for i in range(1, n_ideals):
        nodes = groups_of[added[i]].tolist()
        comp_l[i] = comp_l[parent[i]] + sum(fin[v] for v in nodes)
        bad_l[i] = bad_l[parent[i]] + sum(nb[v] for v in nodes)
    comp[:], bad[:] = comp_l, bad_l
    limit = upper * (1 + _SLACK) + _SLACK if math.isfinite(upper) else math.inf
    n_groups, a = len(model.groups), len(model.groups[0])
    n_cpu = len(model.cpus)
    node_cost, uniform = graph.node_out_cost()
    overlap = {"none": 0, "compute-comm": 1, "full-duplex": 2}[problem.objective.overlap]
    shape = (n_ideals, n_groups + 1, n_cpu + 1)
    table = np.full(shape, math.inf)
    table[0] = 0.0
    kind = np.zeros(shape, np.int8)
    arg = np.zeros(shape, np.int64)
    arg_h = np.zeros(shape, np.int64)
    arg_c = np.zeros(shape, np.int64)
    chain = np.zeros(a + 2, np.int64)
    fixed = (sub, member, comp, bad, np.ascontiguousarray(acc_time, np.float64),
             np.ascontiguousarray(cpu_time, np.float64),
             np.ascontiguousarray(graph.memory_bytes, np.float64), float(acc_cap),
             float(cpu_cap), graph.succ_ptr.astype(np.int64), graph.succ_idx.astype(np.int64),
             graph.pred_ptr.astype(np.int64), graph.pred_idx.astype(np.int64),
             graph.edge_cost.astype(np.float64), node_cost.astype(np.float64),
             uniform.astype(np.bool_), float(model.intra), float(model.inter), overlap, chain)
    priced = 0
    for j in range(1, n_ideals):
        if clock is not None and clock.expired():
            return HierarchyOutcome(math.inf, None, False, priced)
        if progress is not None and j % 16 == 0:
            elapsed = f", {clock.elapsed:.1f} s" if clock is not None else ""
            progress.update(f"DP (hierarchy): {j:,}/{n_ideals:,} rows, "
                            f"{priced:,} slices priced{elapsed}", j / n_ideals)
        got, _ = row_fn(j, -1, n_groups, n_cpu, a, limit, table, kind, arg, arg_h, arg_c, *fixed)
        priced += int(got)
    full = n_ideals - 1
    value = float(table[full, n_groups, n_cpu])
    if not math.isfinite(value):
        return HierarchyOutcome(math.inf, None, True, priced)
    assignment = np.full(graph.n_nodes, -1, np.int32)
    j, h, c = full, n_groups, n_cpu
    while j > 0:
        code = int(kind[j, h, c])
        if code == hk.CHOICE_FEWER:
            h, c = int(arg_h[j, h, c]), int(arg_c[j, h, c])
            continue
        i = int(arg[j, h, c])
        if code == hk.CHOICE_CPU:
            assignment[member[j] & ~member[i]] = model.cpus[c - 1]
            c -= 1
        else:
            assert code == hk.CHOICE_GROUP, "hierarchy DP: row without a choice"
            _, length = row_fn(j, i, n_groups, n_cpu, a, limit, table, kind, arg, arg_h, arg_c,
                               *fixed)
            devices = model.groups[h - 1]
            for t, (lo, hi) in enumerate(itertools.pairwise(chain[:length].tolist())):
                assignment[member[hi] & ~member[lo]] = devices[t]
            h -= 1
        j = i
    assert np.all(assignment >= 0), "hierarchy DP left nodes unplaced"
    return HierarchyOutcome(value, assignment, True, priced)


def _place(assignment: npt.NDArray[np.int32], mask: int, device: int) -> None:
    for v in set_bits(mask):
        assignment[v] = device
