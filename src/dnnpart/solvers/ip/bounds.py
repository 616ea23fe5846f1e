"""A lower bound on the max load from packing the largest units, transfers left out.

Why
---
On workloads whose transfers are cheap the max-load program is a scheduling problem: put
units (colour classes, lone nodes) on devices so that the most loaded one is light. The LP
relaxation sees only the work bound (total work over the devices' speeds); when a few large
units cannot be spread evenly (layer GNMT inference: 17 units of 7 to 25 ms on 6
accelerators) the optimum sits well above it and the solver's bound stays there (30.1 against
a plan of 31.69). Packing just those large units, every transfer dropped, is a small program
that a solver closes in seconds, and its optimum is a valid bound of the real one.

Validity
--------
Let ``P`` be the problem and ``R`` the *packing relaxation* written by
:func:`build_packing_relaxation`: the ``N`` units of largest least compute time, the same
devices, memory capacities and objective groups, every transfer cost 0 and no contiguity.
For any plan ``p`` of ``P`` take its restriction ``r`` to the kept units; ``r`` is a solution
of ``R`` (every kept unit on one device it may use, memory only lower). On every device and
in every overlap mode (appendix C.1) a load of ``P`` is a maximum of sums of non-negative
terms (compute, transfers in, transfers out); the load of ``R`` under ``r`` is the same
maximum with the transfer terms and the dropped units' compute removed, so it is no larger.
Each group's max load, and hence the objective (their sum), is therefore no larger in ``R``
under ``r`` than in ``P`` under ``p``: ``OPT(R) <= OPT(P)``, and any proven bound of ``R``
(``<= OPT(R)``) bounds ``P``. ``tests/solvers/test_ip_bounds.py`` checks
``bound <= brute-force optimum`` on random small problems (hypothesis).
"""

from __future__ import annotations

import math

import numpy as np

from dnnpart.graph.algorithms import colocation_units
from dnnpart.problem import Problem
from dnnpart.solvers.ip.throughput import ThroughputModel, build_throughput, device_times

#: Most units kept in the packing relaxation.
PACKED_UNITS = 32

#: Units whose least compute time is below ``objective / SMALL_UNIT_RATIO`` are left out: they
#: give the packing so much freedom that CP-SAT no longer closes it (layer GNMT inference: the
#: 17 units of 6.9 ms and more close in seconds; with the next 15 units of 0.2 ms its bound
#: stays at the work bound, measured), and they change the optimum little.
SMALL_UNIT_RATIO = 8.0


def packed_units(problem: Problem, objective: float, limit: int = PACKED_UNITS) -> int:
    """How many units to pack: those above ``objective / SMALL_UNIT_RATIO``, at most ``limit``.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> packed_units(chain_problem([4, 1, 1, 4], n_accelerators=2), objective=10.0)
    2
    """
    t = device_times(problem)
    unit_ptr, unit_nodes = colocation_units(problem.graph)
    unit_of = np.repeat(np.arange(unit_ptr.shape[0] - 1), np.diff(unit_ptr))
    unit_time = np.zeros((unit_ptr.shape[0] - 1, t.shape[1]))
    np.add.at(unit_time, unit_of, t[unit_nodes])
    least = unit_time.min(axis=1, initial=np.inf)
    return min(limit, int((least > objective / SMALL_UNIT_RATIO).sum()))


def build_packing_relaxation(problem: Problem, n_units: int = PACKED_UNITS) -> ThroughputModel:
    """The packing relaxation of ``problem``'s max-load program (module docstring).

    Its solutions are no plans (the small units are left out); only its bound is used.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> tm = build_packing_relaxation(chain_problem([4, 1, 1, 4], n_accelerators=2), n_units=2)
    >>> int((tm.x >= 0).any(axis=1).sum())
    2
    """
    return build_throughput(problem, contiguous=False, communication=False, largest_units=n_units)


#: Capacity of the unbounded arcs: above every finite cut (those are scaled below 2**29), and
#: within the int32 capacities of scipy's maximum_flow.
_BIG = 1 << 30


def cut_bound(problem: Problem) -> float:
    """A lower bound on the max load from the transfers each unit's device cannot avoid.

    Why
    ---
    On transfer-heavy graphs the optimum is often set by one unit: whichever device hosts it
    either hosts its neighbours too (their compute) or pays the transfers to them, and so on
    outwards (operator ResNet-50 training: two units of 63.8 ms of compute whose device,
    whatever else it takes, carries 255.19). The LP relaxation sees little of this (bound
    152.40 there); a minimum cut per unit sees all of it.

    Validity
    --------
    Only for overlap mode ``none`` (0 otherwise). Take any plan without replication, a unit
    ``u`` and the device ``d`` hosting it, and let ``S`` be the set of units on ``d``. If
    ``d`` pays no transfers (a CPU), its load is at least ``u``'s compute on ``d``. Otherwise
    its load (forward plus backward, which the objective bounds in both training forms: ``max
    load`` and ``max FW + max BW`` are each at least one device's total) is the compute of
    ``S`` on ``d`` plus, times ``d``'s host-link scale: ``c_v`` for each uniform node ``v`` in
    ``S`` with a consumer outside ``S`` (out), ``c_w`` for each uniform node ``w`` outside
    ``S`` with a consumer in ``S`` (in, at least once per receiving device), and the cost of
    each crossing edge of a non-uniform node (out and in), as in
    :mod:`dnnpart.pricing.loads`. That is the capacity of the ``u``-``t`` cut ``S`` in this
    network (units as vertices; ``u``'s own arc to ``t`` is in every cut): unit -> ``t`` with its
    compute on ``d`` (unbounded where it cannot run or fit there); for a uniform producer
    ``v``: ``U(v) -> O_v`` with ``c_v`` and ``O_v -> U(w)`` unbounded for each consumer ``w``
    (an out-transfer is paid once however many consumers leave), ``U(w) -> I_v`` unbounded
    and ``I_v -> U(v)`` with ``c_v`` (an in-transfer once per device); for a non-uniform
    producer, each crossing edge both ways with its cost. Placing each auxiliary vertex
    ``O_v``, ``I_v`` on the side that makes no unbounded edge cross, the cut's capacity is at
    most that load; so the minimum cut is at most the load of ``d``,
    whatever the plan. Minimising over the devices ``u`` may use and maximising over the
    units gives a lower bound of every plan's objective. Capacities are scaled to integers
    rounding down, which only lowers the cut. ``tests/solvers/test_ip_bounds.py`` checks
    ``bound <= brute-force optimum`` on random small problems (hypothesis).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> # two nodes, a transfer of 5 between them: apart each device pays 1 + 5; together 2
    >>> round(cut_bound(chain_problem([1.0, 1.0], n_accelerators=2, cost=5.0)), 6)
    2.0
    """
    if problem.objective.overlap != "none" or problem.cluster.is_hierarchical:
        return 0.0
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_flow

    graph, cluster = problem.graph, problem.cluster
    times = device_times(problem)
    unit_ptr, unit_nodes = colocation_units(graph)
    n_units = unit_ptr.shape[0] - 1
    unit_of = np.empty(graph.n_nodes, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    unit_time = np.zeros((n_units, cluster.n_devices))
    np.add.at(unit_time, unit_of, times)
    unit_mem = np.bincount(unit_of, weights=graph.memory_bytes, minlength=n_units)
    cap = cluster.memory_capacity()
    unit_time[unit_mem[:, None] > cap[None, :] * (1 + 1e-12)] = np.inf
    scale = np.where(cluster.is_accelerator(), cluster.host_link_scale, 0.0)

    # transfer structure on units: (tail, head, cost) arcs and auxiliary vertices
    node_cost, uniform = graph.node_out_cost()
    src = graph.edge_sources().astype(np.int64)
    dst = graph.succ_idx.astype(np.int64)
    cross = unit_of[src] != unit_of[dst]
    arcs: list[tuple[int, int, float]] = []  # cost arcs (before the device's link scale)
    big: list[tuple[int, int]] = []
    n_vertices = n_units + 1  # + sink
    for v in np.unique(src[cross & uniform[src]]).tolist():
        heads = np.unique(unit_of[dst[(src == v) & cross]]).tolist()
        o_v, i_v = n_vertices, n_vertices + 1
        n_vertices += 2
        arcs += [(int(unit_of[v]), o_v, float(node_cost[v])), (i_v, int(unit_of[v]), float(node_cost[v]))]
        big += [(o_v, h) for h in heads] + [(h, i_v) for h in heads]
    for e in np.flatnonzero(cross & ~uniform[src]).tolist():
        a, b = int(unit_of[src[e]]), int(unit_of[dst[e]])
        arcs += [(a, b, float(graph.edge_cost[e])), (b, a, float(graph.edge_cost[e]))]
    sink = n_units

    best = 0.0
    per_unit = np.full(n_units, np.inf)
    seen: dict[tuple[object, ...], int] = {}
    for d in range(cluster.n_devices):
        key = (tuple(unit_time[:, d].tolist()), float(scale[d]))
        if key in seen:
            continue
        seen[key] = d
        t_d = unit_time[:, d]
        if scale[d] <= 0:
            per_unit = np.minimum(per_unit, t_d)
            continue
        finite = float(np.where(np.isfinite(t_d), t_d, 0.0).sum() + scale[d] * sum(c for *_, c in arcs))
        res = float(1 << 29) / max(finite, 1e-9)  # integer units per ms, totals below 2**29
        tails = [u for u in range(n_units)] + [a for a, _, _ in arcs] + [a for a, _ in big]
        heads_ = [sink] * n_units + [b for _, b, _ in arcs] + [b for _, b in big]
        caps = ([int(t * res) if math.isfinite(t) else _BIG for t in t_d.tolist()]
                + [int(c * scale[d] * res) for *_, c in arcs] + [_BIG] * len(big))
        # parallel arcs add up in the sparse matrix (as they should: capacities of one cut)
        net = csr_array((np.asarray(caps, np.int32), (np.asarray(tails), np.asarray(heads_))),
                        shape=(n_vertices, n_vertices))
        net.sum_duplicates()
        for u in range(n_units):
            if not math.isfinite(t_d[u]) or t_d[u] >= per_unit[u]:
                continue
            # the arc u -> t (u's own compute) lies in every cut: the flow includes it
            flow = maximum_flow(net, u, sink, method="dinic").flow_value
            per_unit[u] = min(per_unit[u], flow / res)
    best = float(per_unit.max(initial=0.0))
    return best if math.isfinite(best) else 0.0
