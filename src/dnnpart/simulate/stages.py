"""Pipeline stages from a node -> device plan (paper 1's plans simulate as pipelines).

A stage is a device holding nodes (a *primary*) with its replicas (``plan.replica_of``), in
ring order: ``plan.pipeline_copy`` where the plan records it (paper 4's mappings), else
device-index order. The simulator runs micro-batch ``j`` on the stage's device number
``j mod r`` of that order, so the recorded copies decide which replica talks to which.
Stages are ordered by their forward data flow; the plan must be contiguous (each device's
forward part and backward part convex) and the forward quotient graph acyclic, otherwise
:func:`stages_from_plan` refuses it with a message.

Per stage: ``forward`` / ``backward`` = summed node times on the primary; ``weight_bytes`` =
summed ``param_bytes`` where the graph has phase-2 arrays, else summed ``memory_bytes`` (paper
1's per-node memory, which its replication term also reads as weights);
``activation_bytes`` = its stash per micro-batch when the graph carries ``output_bytes`` (0
otherwise; :func:`~dnnpart.pricing.chain.node_activation_bytes`); ``input_bytes`` = bytes its
forward part receives per micro-batch. Each cross-device edge becomes a
:class:`~dnnpart.simulate.pipeline.StageEdge` (phase F for forward nodes, B for backward
ones), bytes per (tensor, destination stage) as the op emulator counts them.
"""

from __future__ import annotations

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph.kernels import contiguity_violation
from dnnpart.plan import Plan
from dnnpart.pricing.chain import node_activation_bytes, node_weight_bytes
from dnnpart.pricing.loads import node_times
from dnnpart.problem import Problem
from dnnpart.simulate.ops import transfer_bytes
from dnnpart.stages import B, F, Stage, StageEdge


def stage_order(problem: Problem, plan: Plan) -> list[int]:
    """The plan's devices that hold nodes, ordered by their forward data flow (Kahn's order of
    the forward quotient graph, ties by first node); ``UsageError`` when they feed each other
    in a cycle.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> stage_order(chain_problem([1.0, 2.0, 3.0], n_accelerators=2), Plan(assignment=[1, 1, 0]))
    [1, 0]
    """
    order, why = chain_order(problem, plan)
    if why:
        raise UsageError(f"the pipeline objective needs stages in a chain of data flow; {why}")
    return order


def chain_order(problem: Problem, plan: Plan) -> tuple[list[int], str]:
    """``(order, "")``: the plan's devices that hold nodes in forward data-flow order, or
    ``([], why)`` when they feed each other in a cycle.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> chain_order(chain_problem([1.0, 2.0], n_accelerators=2), Plan(assignment=[1, 0]))
    ([1, 0], '')
    """
    g, c = problem.graph, problem.cluster
    a = plan.assignment.astype(np.int64)
    primaries = np.unique(a)
    src = g.edge_sources()
    dst = g.succ_idx.astype(np.int64)
    fwd_edge = ~g.is_backward[src] & ~g.is_backward[dst] & (a[src] != a[dst])
    # order stages by the forward quotient graph (Kahn, ties by first node)
    first = {int(d): int(np.flatnonzero(a == d)[0]) for d in primaries.tolist()}
    succ: dict[int, set[int]] = {int(d): set() for d in primaries.tolist()}
    indeg = dict.fromkeys(succ, 0)
    for u, v in zip(a[src[fwd_edge]].tolist(), a[dst[fwd_edge]].tolist(), strict=True):
        if v not in succ[u]:
            succ[u].add(v)
            indeg[v] += 1
    order: list[int] = []
    ready = sorted((first[d], d) for d, k in indeg.items() if k == 0)
    while ready:
        _, d = ready.pop(0)
        order.append(d)
        for w in succ[d]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append((first[w], w))
                ready.sort()
    if len(order) < len(succ):
        stuck = sorted(c.devices[d].name for d, k in indeg.items() if k > 0)
        return [], f"devices {', '.join(stuck)} feed each other in a cycle (non-contiguous plan)"
    return order, ""


def stages_from_plan(problem: Problem, plan: Plan) -> tuple[list[Stage], list[StageEdge]]:
    """Stages (in forward order) and their dependencies; ``ValueError`` for other plans.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2)
    >>> st, ed = stages_from_plan(p, Plan(assignment=[0, 0, 1]))
    >>> [(s.devices, s.forward) for s in st], [(e.src, e.dst) for e in ed]
    ([((0,), 3.0), ((1,), 3.0)], [(0, 1)])
    """
    g, c = problem.graph, problem.cluster
    a = plan.assignment.astype(np.int64)
    if a.shape != (g.n_nodes,):
        raise UsageError(f"plan assigns {a.shape[0]} nodes, the graph has {g.n_nodes}")
    primaries = np.unique(a)
    for dev in primaries.tolist():
        for part in (False, True):
            member = (a == dev) & (g.is_backward == part)
            if member.any():
                u, _ = contiguity_violation(g.n_nodes, g.succ_ptr, g.succ_idx, member)
                if u >= 0:
                    raise UsageError(
                        f"the pipeline objective needs a contiguous plan: the "
                        f"{'backward' if part else 'forward'} part on {c.devices[dev].name} is "
                        f"not contiguous (e.g. around {g.label(u)}); score it with makespan"
                    )
    src = g.edge_sources()
    dst = g.succ_idx.astype(np.int64)
    order = stage_order(problem, plan)
    index = {d: i for i, d in enumerate(order)}
    times = node_times(g, c, a)
    weights = node_weight_bytes(g)
    act_node = node_activation_bytes(g)
    tb = transfer_bytes(g)
    # bytes per (tensor, destination stage): the largest edge to that stage
    cross = np.flatnonzero(a[src] != a[dst])
    per_tensor: dict[tuple[int, int, int, int], float] = {}
    for e in cross.tolist():
        u, v = int(src[e]), int(dst[e])
        key = (u, index[int(a[v])], int(g.is_backward[u]), int(g.is_backward[v]))
        per_tensor[key] = max(per_tensor.get(key, 0.0), float(tb[e]))
    agg: dict[tuple[int, int, int, int], float] = {}
    inputs = np.zeros(len(order))
    for (u, s_dst, pu, pv), nbytes in per_tensor.items():
        k = (index[int(a[u])], s_dst, pu, pv)
        agg[k] = agg.get(k, 0.0) + nbytes
        if pu == F and pv == F:
            inputs[s_dst] += nbytes
    edges = [StageEdge(src=s0, dst=s1, bytes=nb, src_phase=B if p0 else F, dst_phase=B if p1 else F)
             for (s0, s1, p0, p1), nb in sorted(agg.items())]
    stages = []
    for i, d in enumerate(order):
        mine = a == d
        replicas = tuple(int(x) for x in plan.ring(d))  # pipeline copy = ring order
        stages.append(Stage(
            devices=replicas,
            forward=float(times[mine & ~g.is_backward].sum()),
            backward=float(times[mine & g.is_backward].sum()),
            weight_bytes=float(weights[mine].sum()),
            activation_bytes=float(act_node[mine].sum()),
            input_bytes=float(inputs[i]),
            name=c.devices[d].name,
        ))
    return stages, edges
