r"""Peeled relaxation of the throughput DP: a lower bound from a smaller lattice .

Why
---
Captured graphs owe most of their ideals to a few light nodes that hang off the main graph:
whole weakly connected components that compute something nobody reads (BERT's position-id
and token-type chains), and sources or sinks with one neighbour (a dangling ``unsqueeze``).
A lattice is the product of its components' lattices, so three chains of 4-5 nodes multiply
the ideals by 150 (BERT-base, 4 layers: 148,200 ideals; 988 without them).

What
----
Let ``R`` be a set of stage nodes (:func:`peel_set`) and ``G' = G - R`` the graph without
their original nodes. Then ``OPT(G') <= OPT(G)`` over the DP's space (contiguous splits in
pipeline order):

* A split of ``G`` is a chain of ideals; each ideal minus ``R`` is an ideal of ``G'`` (``G'``
  has a subset of ``G``'s edges between its nodes), so the restriction is a split of ``G'``
  with the same devices in the same order.
* Under the restriction no device's load grows: it loses the compute of its ``R`` nodes, the
  transfers of edges with an end in ``R`` disappear, and a uniform node's output is charged
  once per device that reads it, which can only drop when readers leave (paper 1's load,
  the evaluator's, every overlap mode: each is a max or sum of these terms). Memory only
  drops, so the restriction is feasible.

The DP solves ``G'`` exactly (its lattice is small) and its plan is extended to ``G``
(:func:`extend_plan`: ``R``'s groups placed one by one where they raise the objective least,
keeping the device graph acyclic, i.e. a pipeline order). If the extension's objective, by
the evaluator, is at most ``OPT(G')`` it is optimal for ``G``: no DP over ``G``'s lattice is
needed (it pays when the peeled nodes fit into some device's slack at the optimum, as the
few 5 us operators of the real captures do).

Otherwise the full DP over ``G`` runs below ``UB`` (the better of the extension and DPL),
skipping cells. The same restriction argument holds for every cell: a split of ``G`` below
``UB`` that passes through the cell ``(I, a, c)`` (ideal ``I`` on at most ``a``
accelerators and ``c`` CPUs, the rest ``G \ I`` on the others) restricts to a split of
``G'`` through ``(I \ R, a, c)`` whose two sides are each below ``UB``. So the cell is
skipped when ``G'``'s best split of ``I \ R`` on ``(a, c)`` (the DP table over ``G'``'s
lattice, the *prefix*) or of ``G' \ I`` on the other devices (the *suffix*: the DP over
the reversed stage graph, whose ideals are ``G'``'s filters) is not below ``UB``
(:func:`cell_mask`). Every cell the DP's optimal chain passes through survives (the DP's
cells mean "at most ``a``, ``c`` devices", and a chain through ``(J, a - 1, c)`` leaves at
most ``k - a + 1`` accelerators to the rest), so the optimum below ``UB`` is unchanged: the
same argument as the work bound's (:func:`~dnnpart.solvers.dp.kernels.cell_is_live`),
with a bound that sees transfers and contiguity. On BERT-base with 2 layers 0.44% of the
cells survive (the relaxation's optimum is 3.2% below the true one).

The comparisons allow a relative ``1e-9`` for float sums taken in another order (the DP's
value and the evaluator's objective of the same plan can differ in the last bits): a plan
is reported optimal when its objective is at most ``OPT(G') (1 + 1e-9)``.

Which nodes (:func:`peel_set`): whole weakly connected components other than the largest,
and, only where that leaves too many ideals, also sources with one successor and sinks with
one predecessor in it (never both ends of an edge): the fewer nodes left out, the closer
the bound. Each is *light*: its compute on every device kind it can run on at most
:data:`LIGHT_FRACTION` of the DP's load lower bound, so that it fits in a device's slack.
Only lattices from ``PEEL_IDEALS`` ideals whose peeled lattice has at most ``PEEL_RATIO``
of them try it (:mod:`dnnpart.solvers.dp.peeled`); not with replication or the GPipe form.
Choices: ``docs/methods/tarnawski2020.md``; figures: ``docs/results/dp.md``.

The DP over ``G'`` runs on ``G``'s own arrays: ``R``'s nodes are never in a slice, their
edges cost nothing and a uniform node's out-degree counts only successors in ``G'``
(:func:`peeled_costs`), which is exactly ``G'``'s load.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.evaluate import Evaluation, evaluate
from dnnpart.graph.core import Graph
from dnnpart.graph.scc import strong_components
from dnnpart.graph.stage_graph import StageGraph, _csr
from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.solvers.dp.ideals import IdealLattice
from dnnpart.solvers.dp.lattice_kernels import ideal_sums

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Relative slack of the optimality check (float sums in another order).
MATCH_SLACK = 1e-9
#: A peeled source or sink computes at most this fraction of the load lower bound.
LIGHT_FRACTION = 0.05


@dataclass(frozen=True, slots=True)
class Peeling:
    """``G'``: the stage graph without ``removed`` stage nodes, and how to map back.

    ``stage`` is ``G'``'s stage graph (its ``stage_of`` gives ``-1`` for peeled original
    nodes), ``kept`` maps its stage ids to ``G``'s, ``groups`` lists the peeled stage nodes
    (``G``'s ids) in the units :func:`extend_plan` places together, ``removed_nodes`` masks
    the peeled original nodes.
    """

    stage: StageGraph
    kept: IntArray
    groups: tuple[IntArray, ...]
    removed_nodes: BoolArray


def _weak_components(stage: StageGraph) -> IntArray:
    # the strong components of the graph with every edge both ways
    src = np.repeat(np.arange(stage.n_stage_nodes), np.diff(stage.succ_ptr))
    dst = stage.succ_idx.astype(np.int64)
    _, comp = strong_components(stage.n_stage_nodes, np.concatenate((src, dst)),
                                np.concatenate((dst, src)))
    return np.asarray(comp, np.int64)


def peel_set(stage: StageGraph, light: BoolArray, *, leaves: bool = True) -> tuple[IntArray, ...]:
    """Groups of stage nodes to peel: every weakly connected component but the one with the
    most stage nodes (whole, if all its nodes are ``light``), and with ``leaves`` in that one
    each ``light`` source with one successor and each ``light`` sink with one predecessor
    (singly, never both ends of an edge).

    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> sg = build_stage_graph(chain_graph(4))
    >>> [g.tolist() for g in peel_set(sg, np.array([True, False, False, True]))]
    [[0], [3]]
    """
    n = stage.n_stage_nodes
    if n < 3:
        return ()
    comp = _weak_components(stage)
    sizes = np.bincount(comp, minlength=n)
    main = int(np.argmax(sizes))
    groups: list[IntArray] = []
    for c in np.flatnonzero(sizes).tolist():
        if c != main:
            members = np.flatnonzero(comp == c)
            if light[members].all():
                groups.append(members)
    if not leaves:
        return tuple(groups)
    indeg, outdeg = np.diff(stage.pred_ptr), np.diff(stage.succ_ptr)
    taken = np.zeros(n, np.bool_)
    for s in range(n):
        if comp[s] != main or not light[s]:
            continue
        if indeg[s] == 0 and outdeg[s] == 1:
            other = stage.succ_idx[stage.succ_ptr[s]]
        elif outdeg[s] == 0 and indeg[s] == 1:
            other = stage.pred_idx[stage.pred_ptr[s]]
        else:
            continue
        if not taken[other]:  # never both ends of an edge: the main part stays
            taken[s] = True
            groups.append(np.array([s], np.int64))
    return tuple(groups)


def peel(stage: StageGraph, groups: tuple[IntArray, ...]) -> Peeling:
    """``G'``'s stage graph: ``stage`` without the stage nodes of ``groups``."""
    n = stage.n_stage_nodes
    removed = np.zeros(n, np.bool_)
    for g in groups:
        removed[g] = True
    kept = np.flatnonzero(~removed)
    new_id = np.full(n, -1, np.int64)
    new_id[kept] = np.arange(kept.size)
    src = np.repeat(np.arange(n), np.diff(stage.succ_ptr))
    dst = stage.succ_idx
    keep_edge = ~removed[src] & ~removed[dst]
    s_src, s_dst = new_id[src[keep_edge]], new_id[dst[keep_edge]]
    m = int(kept.size)
    succ_ptr, succ_idx = _csr(m, s_src, s_dst)
    pred_ptr, pred_idx = _csr(m, s_dst, s_src)
    stage_of = new_id[stage.stage_of]
    removed_nodes = stage_of < 0
    member_idx = np.argsort(stage_of, kind="stable")[int(removed_nodes.sum()):].astype(np.int64)
    member_ptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(stage_of[~removed_nodes], minlength=m), out=member_ptr[1:])
    # ids stay a topological order: the kept nodes keep their relative order
    sub = StageGraph(
        n_stage_nodes=m, succ_ptr=succ_ptr, succ_idx=succ_idx, pred_ptr=pred_ptr,
        pred_idx=pred_idx, member_ptr=member_ptr, member_idx=member_idx, stage_of=stage_of,
        n_artificial=0, n_sccs_merged=0,
    )
    return Peeling(stage=sub, kept=kept, groups=groups, removed_nodes=removed_nodes)


def peeled_costs(graph: Graph, removed_nodes: BoolArray) -> tuple[FloatArray, BoolArray,
                                                                   FloatArray, IntArray]:
    """``(node_cost, uniform, edge_cost, outdeg)`` pricing ``G'`` with ``G``'s arrays: peeled
    nodes send nothing, edges touching them cost nothing, out-degrees count kept successors.

    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(3)
    >>> peeled_costs(g, np.array([False, False, True]))[3].tolist()
    [1, 0, 0]
    """
    node_cost, uniform = graph.node_out_cost()
    src = graph.edge_sources()
    dst = graph.succ_idx.astype(np.int64)
    touching = removed_nodes[src] | removed_nodes[dst]
    edge_cost = np.where(touching, 0.0, graph.edge_cost)
    node_cost = np.where(removed_nodes, 0.0, node_cost)
    outdeg = np.bincount(src[~removed_nodes[dst]], minlength=graph.n_nodes).astype(np.int64)
    return (np.ascontiguousarray(node_cost, np.float64), uniform,
            np.ascontiguousarray(edge_cost, np.float64), outdeg)


def _acyclic(n_dev: int, a: IntArray, b: IntArray) -> bool:
    """Whether the device graph with edges ``a -> b`` (``a != b``) has no cycle."""
    adj = np.zeros((n_dev, n_dev), np.bool_)
    adj[a, b] = True
    indeg = adj.sum(axis=0)
    ready = [d for d in range(n_dev) if indeg[d] == 0]
    seen = 0
    while ready:
        d = ready.pop()
        seen += 1
        for e in np.flatnonzero(adj[d]).tolist():
            indeg[e] -= 1
            if indeg[e] == 0:
                ready.append(e)
    return seen == n_dev


def _key(ev: Evaluation) -> tuple[float, ...]:
    # feasible first, then the least objective, then the loads from the largest down
    load = np.sort(np.asarray(ev.load, np.float64))[::-1]
    return (0.0 if ev.feasible else 1.0, float(ev.objective), *load.tolist())


def extend_plan(problem: Problem, stage: StageGraph, peeling: Peeling,
                assignment: npt.NDArray[np.int32]) -> Plan:
    """``assignment`` (of ``G'``'s nodes; peeled ones ignored) extended to ``G``: each peeled
    group starts on its neighbour's device (on the least loaded device without one), then
    groups move, one at a time and twice round, to the device where the objective, then that
    device's load, is least, keeping the stage graph's device order acyclic (a pipeline).
    The result is always a split in the DP's space.
    """
    n_dev = problem.cluster.n_devices
    dev_of_stage = np.full(stage.n_stage_nodes, -1, np.int64)
    kept_nodes = ~peeling.removed_nodes
    dev_of_stage[stage.stage_of[kept_nodes]] = assignment[kept_nodes]
    src = np.repeat(np.arange(stage.n_stage_nodes), np.diff(stage.succ_ptr))
    dst = stage.succ_idx

    def plan_of(devs: IntArray) -> Plan:
        return Plan(assignment=devs[stage.stage_of].astype(np.int32))

    def ok(devs: IntArray) -> bool:
        a, b = devs[src], devs[dst]
        cross = a != b
        return _acyclic(n_dev, a[cross], b[cross])

    base = evaluate(problem, plan_of(np.where(dev_of_stage < 0, 0, dev_of_stage)))
    idle = int(np.argmin(base.load))
    for g in peeling.groups:
        nbrs = np.concatenate([stage.succ_idx[stage.succ_ptr[s]:stage.succ_ptr[s + 1]]
                               for s in g.tolist()] +
                              [stage.pred_idx[stage.pred_ptr[s]:stage.pred_ptr[s + 1]]
                               for s in g.tolist()])
        placed = dev_of_stage[nbrs]
        placed = placed[placed >= 0]
        dev_of_stage[g] = int(placed[0]) if placed.size else idle
    if not ok(dev_of_stage):  # only neighbours' devices: cannot happen; safe fallback
        raise AssertionError("peeled extension broke the pipeline order")
    best = evaluate(problem, plan_of(dev_of_stage))
    for _ in range(2):
        for g in peeling.groups:
            home = int(dev_of_stage[g[0]])
            for d in range(n_dev):
                if d == home:
                    continue
                trial = dev_of_stage.copy()
                trial[g] = d
                if not ok(trial):
                    continue
                ev = evaluate(problem, plan_of(trial))
                if _key(ev) < _key(best):
                    dev_of_stage, best, home = trial, ev, d
    return plan_of(dev_of_stage)


def reverse_stage(stage: StageGraph) -> StageGraph:
    """``stage`` with its edges reversed (ids reversed, so still a topological order): its
    ideals are ``stage``'s filters, the sets a split's last devices hold.

    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> rev = reverse_stage(build_stage_graph(chain_graph(3)))
    >>> rev.succ_idx.tolist(), rev.stage_of.tolist()
    ([1, 2], [2, 1, 0])
    """
    m = stage.n_stage_nodes
    flip = np.arange(m - 1, -1, -1)
    src = np.repeat(np.arange(m), np.diff(stage.succ_ptr))
    r_src, r_dst = flip[stage.succ_idx], flip[src]
    succ_ptr, succ_idx = _csr(m, r_src, r_dst)
    pred_ptr, pred_idx = _csr(m, r_dst, r_src)
    stage_of = np.where(stage.stage_of >= 0, m - 1 - stage.stage_of, -1)
    inside = stage_of >= 0
    member_idx = np.argsort(np.where(inside, stage_of, -1), kind="stable")
    member_idx = member_idx[int((~inside).sum()):].astype(np.int64)
    member_ptr = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(stage_of[inside], minlength=m), out=member_ptr[1:])
    return StageGraph(
        n_stage_nodes=m, succ_ptr=succ_ptr, succ_idx=succ_idx, pred_ptr=pred_ptr,
        pred_idx=pred_idx, member_ptr=member_ptr, member_idx=member_idx, stage_of=stage_of,
        n_artificial=0, n_sccs_merged=0,
    )


def _levels(lattice: IdealLattice) -> list[int]:
    """Where each level (ideals of one size) of ``lattice`` starts, from size 1, and its end."""
    sizes = ideal_sums(lattice.parent, lattice.added,
                       np.ones(int(lattice.added.max(initial=0)) + 1))
    return [1, *(np.flatnonzero(np.diff(sizes)) + 1).tolist()[1:], lattice.n_ideals]


def _ideal_bits(lattice: IdealLattice, n: int, flip: bool = False) -> npt.NDArray[np.uint64]:
    """Each ideal as a bitset over ``n`` nodes (node ``n - 1 - v`` for ``v`` if ``flip``),
    built a level at a time from the parents' (8 bytes per 64 nodes per ideal)."""
    words = max(1, (n + 63) // 64)
    bits = np.zeros((lattice.n_ideals, words), np.uint64)
    node = lattice.added.astype(np.int64)
    if flip:
        node = n - 1 - node
    one = np.uint64(1)
    for lo, hi in itertools.pairwise(_levels(lattice)):
        rows = bits[lattice.parent[lo:hi]]
        v = node[lo:hi]
        rows[np.arange(hi - lo), v >> 6] |= one << (v & 63).astype(np.uint64)
        bits[lo:hi] = rows
    return bits


def complement_map(lattice: IdealLattice, reverse: IdealLattice, n: int) -> IntArray:
    """For each ideal ``K`` of a stage graph (``lattice``), the index in ``reverse`` (the
    lattice of :func:`reverse_stage`) of the filter ``G' \\ K``."""
    fwd = _ideal_bits(lattice, n)
    rev = _ideal_bits(reverse, n, flip=True)  # back to the forward ids
    full = fwd[-1]
    index = {row.tobytes(): i for i, row in enumerate(rev)}
    return np.array([index[(full ^ row).tobytes()] for row in fwd], np.int64)


def restriction_map(lattice: IdealLattice, sub: IdealLattice, new_id: IntArray,
                    n_sub: int) -> npt.NDArray[np.int32]:
    """For each ideal ``I`` of ``G`` (``lattice``, ids of ``G``'s stage graph), the index in
    ``sub`` (``G'``'s lattice) of ``I`` without the peeled nodes (``new_id`` -1 there).

    ``I = parent + v`` restricts to ``r(parent)`` when ``v`` is peeled, and otherwise to the
    ideal of ``G'`` that covers ``r(parent)`` by ``v``: one of ``sub``'s cover pairs.
    """
    upper = np.repeat(np.arange(sub.n_ideals, dtype=np.int64), np.diff(sub.down_ptr))
    keys = sub.down_lower.astype(np.int64) * n_sub + sub.down_node
    order = np.argsort(keys)
    keys, upper = keys[order], upper[order]
    parent, added = lattice.parent.astype(np.int64), lattice.added.astype(np.int64)
    out = np.zeros(lattice.n_ideals, np.int64)
    for lo, hi in itertools.pairwise(_levels(lattice)):
        rp = out[parent[lo:hi]]
        v = new_id[added[lo:hi]]
        kept = v >= 0
        pos = np.searchsorted(keys, rp[kept] * n_sub + v[kept])
        res = rp.copy()
        res[kept] = upper[pos]
        out[lo:hi] = res
    return out.astype(np.int32)


def cell_mask(prefix: FloatArray, suffix: FloatArray, complement: IntArray,
              upper: float) -> npt.NDArray[np.int8]:
    """Per ideal ``K`` of ``G'`` and cell ``(a, c)``: 1 where ``G'``'s best split of ``K`` on
    ``a`` accelerators and ``c`` CPUs (``prefix``) and of the rest on the others (``suffix``
    at the complement) are both below ``upper`` (with :data:`MATCH_SLACK`).

    A split of ``G`` below ``upper`` through the cell ``(I, a, c)`` restricts to a split of
    ``G'`` through ``(I \\ R, a, c)`` with loads no larger, so both are below ``upper``: the
    cells left 0 are on no split of ``G`` below it.
    """
    tol = upper * (1 + MATCH_SLACK)
    rest = suffix[complement][:, ::-1, ::-1]  # n_acc - a accelerators, n_cpu - c CPUs
    return ((prefix < tol) & (rest < tol)).astype(np.int8)
