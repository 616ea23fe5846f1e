"""Single-sample latency (paper 1, section 4) against an independent event simulation.

Invocation model: an accelerator subgraph ``S`` starts when every input (output of a node
outside ``S`` with an edge into ``S``) is in host DRAM and the accelerator's previous
subgraph has finished; it transfers its inputs in, computes its nodes, and transfers its
outputs out, after which they are in DRAM. A CPU node starts when its inputs are in DRAM;
CPUs are unlimited.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from dnnpart import Objective, Plan, Problem, evaluate
from dnnpart.devices import reference_cluster
from dnnpart.evaluate.latency import derive_subgraphs
from dnnpart.graph import NO_CLASS, Graph, GraphBuilder
from dnnpart.testing.strategies import (
    DrawChooser,
    build_problem,
    contiguous_assignment,
    random_assignment,
    random_topological_order,
)

LATENCY = Objective(kind="latency")


# -- the oracle -------------------------------------------------------------------------------


def _reach(g: Graph) -> list[set[int]]:
    reach = [{v} for v in range(g.n_nodes)]
    for v in range(g.n_nodes - 1, -1, -1):
        for w in g.successors(v):
            reach[v] |= reach[int(w)]
    return reach


def contiguous(g: Graph, s: set[int], reach: list[set[int]] | None = None) -> bool:
    """Definition 3.1 by brute force."""
    reach = _reach(g) if reach is None else reach
    outside = set(range(g.n_nodes)) - s
    return not any(v in reach[u] and reach[v] & s for u in s for v in outside)


def simulate(problem: Problem, assignment, subgraph=None) -> tuple[float, dict[int, float]]:
    """Event simulation of one sample; returns the latency and when each output is in DRAM.

    ``subgraph`` gives each accelerator node's subgraph ordinal (its device runs them in
    increasing ordinal); ``None`` means one subgraph per accelerator.
    """
    g, cl = problem.graph, problem.cluster
    n = g.n_nodes
    a = [int(x) for x in assignment]
    devs = cl.devices
    preds = [[int(u) for u in g.predecessors(v)] for v in range(n)]
    out = {u: [(int(g.succ_idx[e]), float(g.edge_cost[e]))
               for e in range(int(g.succ_ptr[u]), int(g.succ_ptr[u + 1]))] for u in range(n)}
    uniform = {u: len({c for _, c in out[u]}) <= 1 for u in range(n)}
    kind_col = {k: g.device_kinds.index(k) for k in g.device_kinds}

    # units: (device, nodes); accelerators in ordinal order, CPU nodes one by one
    units: list[tuple[int, set[int]]] = []
    queue: dict[int, list[int]] = {}
    for x, dev in enumerate(devs):
        nodes = [v for v in range(n) if a[v] == x]
        if not nodes:
            continue
        if dev.is_accelerator:
            ords = sorted({0 if subgraph is None else int(subgraph[v]) for v in nodes})
            for o in ords:
                part = {v for v in nodes if (0 if subgraph is None else int(subgraph[v])) == o}
                queue.setdefault(x, []).append(len(units))
                units.append((x, part))
        else:
            for v in nodes:
                units.append((x, {v}))

    def duration(x: int, s: set[int]) -> float:
        dev = devs[x]
        compute = sum(float(g.compute_time[v, kind_col[dev.kind]]) for v in s) / dev.speed
        if not dev.is_accelerator:
            return compute
        transfer = 0.0
        senders = {u for v in s for u in preds[v] if u not in s}
        for u in senders:  # in-transfers
            if uniform[u]:
                transfer += out[u][0][1]
            else:
                transfer += sum(c for w, c in out[u] if w in s)
        for u in s:  # out-transfers
            leaving = [c for w, c in out[u] if w not in s]
            if leaving:
                transfer += leaving[0] if uniform[u] else sum(leaving)
        return compute + transfer * float(cl.host_link_scale[x])

    in_dram: dict[int, float] = {}
    started = [False] * len(units)
    busy: dict[int, bool] = {}
    position = dict.fromkeys(queue, 0)
    events: list[tuple[float, int]] = []

    def start_ready(now: float) -> None:
        progress = True
        while progress:
            progress = False
            for i, (x, s) in enumerate(units):
                if started[i]:
                    continue
                inputs = {u for v in s for u in preds[v] if u not in s}
                if not all(u in in_dram for u in inputs):
                    continue
                if devs[x].is_accelerator:
                    if busy.get(x) or queue[x][position[x]] != i:
                        continue
                    busy[x] = True
                started[i] = True
                heapq.heappush(events, (now + duration(x, s), i))
                progress = True

    start_ready(0.0)
    finish = 0.0
    while events:
        now, i = heapq.heappop(events)
        x, s = units[i]
        for v in s:
            in_dram[v] = now
        if devs[x].is_accelerator:
            busy[x] = False
            position[x] += 1
        finish = max(finish, now)
        start_ready(now)
    if len(in_dram) < n:
        return math.inf, in_dram  # some subgraphs wait on each other forever
    return finish, in_dram


def _compare(problem: Problem, plan: Plan) -> None:
    ev = evaluate(problem.with_objective(LATENCY), plan)
    want, when = simulate(problem, plan.assignment, plan.subgraph)
    if math.isinf(want):
        assert ev.objective == math.inf
        assert not ev.feasible
        if len(when) < problem.graph.n_nodes:  # a deadlock, not an unsupported node
            assert any("wait on each other" in v or "deadlock" in v for v in ev.violations)
        return
    assert ev.objective == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert ev.latency is not None
    finish = ev.latency.node_finish
    for v, t in when.items():
        assert finish[v] == pytest.approx(t, rel=1e-9, abs=1e-12), f"node {v}"


# -- random splits ------------------------------------------------------------------------------

SMALL = dict(max_nodes=7, unsupported_prob=0.05, heterogeneous_prob=0.25, objective=LATENCY)


@st.composite
def contiguous_block_splits(draw):
    """Cut a random topological order into blocks, one device each."""
    c = DrawChooser(draw)
    problem = build_problem(c, **SMALL)
    return problem, Plan(assignment=contiguous_assignment(c, problem))


@given(contiguous_block_splits())
def test_latency_equals_simulation_on_block_splits(case) -> None:
    _compare(*case)


@st.composite
def contiguous_random_splits(draw):
    """Random assignments whose accelerator parts are contiguous (checked by brute force)."""
    c = DrawChooser(draw)
    problem = build_problem(c, **SMALL)
    a = random_assignment(c, problem)
    g, reach = problem.graph, _reach(problem.graph)
    for x in problem.cluster.accelerators:
        assume(contiguous(g, {v for v in range(g.n_nodes) if a[v] == x}, reach))
    return problem, Plan(assignment=a)


@given(contiguous_random_splits())
def test_latency_equals_simulation_on_random_contiguous_splits(case) -> None:
    # includes splits whose contiguous parts wait on each other in a cycle (latency inf)
    _compare(*case)


@st.composite
def multi_subgraph_splits(draw, shuffle: bool = False):
    """Cut a random topological order into contiguous blocks and give each block a random
    device; an accelerator runs its blocks in order (or, with ``shuffle``, in any order)."""
    c = DrawChooser(draw)
    problem = build_problem(c, **SMALL)
    g, d = problem.graph, problem.cluster.n_devices
    order = random_topological_order(c, g)
    n_blocks = c.integer(1, g.n_nodes)
    cuts = sorted(c.permutation(g.n_nodes - 1)[: n_blocks - 1]) if g.n_nodes > 1 else []
    blocks: list[list[int]] = [[]]
    for i, v in enumerate(order):
        blocks[-1].append(v)
        if i in cuts:
            blocks.append([])
    a = [0] * g.n_nodes
    sub = [0] * g.n_nodes
    count: dict[int, int] = {}
    block_dev = [c.integer(0, d - 1) for _ in blocks]
    ordinal_of: dict[tuple[int, int], int] = {}
    for b, x in enumerate(block_dev):
        ordinal_of[(x, b)] = count.get(x, 0)
        count[x] = count.get(x, 0) + 1
    if shuffle:
        for x, m in count.items():
            perm = c.permutation(m)
            for key in ordinal_of:
                if key[0] == x:
                    ordinal_of[key] = perm[ordinal_of[key]]
    for b, block in enumerate(blocks):
        for v in block:
            a[v] = block_dev[b]
            sub[v] = 2 * ordinal_of[(block_dev[b], b)] + 1  # gaps: ordinals need not be dense
    return problem, Plan(assignment=a, subgraph=sub)


@given(multi_subgraph_splits())
def test_latency_equals_simulation_with_several_subgraphs_per_accelerator(case) -> None:
    _compare(*case)


@given(multi_subgraph_splits(shuffle=True))
def test_latency_equals_simulation_with_any_subgraph_order(case) -> None:
    # a bad order deadlocks; the evaluator must then say so with latency inf
    _compare(*case)


@given(st.data())
def test_derived_subgraphs_are_contiguous_id_intervals(data) -> None:
    c = DrawChooser(data.draw)
    problem = build_problem(c, max_nodes=7)
    g = problem.graph
    a = np.asarray(random_assignment(c, problem))
    reach = _reach(g)
    for x in problem.cluster.accelerators:
        nodes = np.flatnonzero(a == x)
        ords = derive_subgraphs(g, a, x)
        assert ords.shape == nodes.shape
        assert np.all(np.diff(ords) >= 0), "subgraphs follow node-id order"
        for o in np.unique(ords):
            assert contiguous(g, set(nodes[ords == o].tolist()), reach)
        if contiguous(g, set(nodes.tolist()), reach):
            assert np.all(ords == 0)


# -- hand-computed cases --------------------------------------------------------------------


def _graph(nodes, edges, classes=None) -> Graph:
    b = GraphBuilder()
    for v, (cpu, acc) in nodes.items():
        b.add_node(v, cpu_time=cpu, acc_time=acc, color_class=(classes or {}).get(v, NO_CLASS))
    for u, v, c in edges:
        b.add_edge(u, v, cost=c)
    return b.build()


def _eval(g: Graph, where: dict[int, int], k: int, cpus: int, subgraph=None):
    a = np.empty(g.n_nodes, np.int64)
    idx = g.index_of(list(where))
    a[idx] = list(where.values())
    sub = None
    if subgraph is not None:
        sub = np.zeros(g.n_nodes, np.int64)
        sub[g.index_of(list(subgraph))] = list(subgraph.values())
    p = Problem(graph=g, cluster=reference_cluster(n_accelerators=k, n_cpus=cpus, memory_bytes=1e9),
                objective=LATENCY)
    return evaluate(p, Plan(assignment=a, subgraph=sub))


def test_one_accelerator_no_transfers() -> None:
    g = _graph({0: (9, 1), 1: (9, 2)}, [(0, 1, 0.5)])
    assert _eval(g, {0: 0, 1: 0}, 1, 0).objective == 3


def test_cpu_then_accelerator() -> None:
    g = _graph({0: (5, 1), 1: (9, 1)}, [(0, 1, 0.5)])
    assert _eval(g, {0: 1, 1: 0}, 1, 1).objective == 5 + 0.5 + 1


def test_parallel_branches_on_two_accelerators() -> None:
    # s (cpu 1) -> x (acc0, 4), y (acc1, 2) -> t (cpu 1); transfers 0.5 each
    g = _graph({0: (1, 9), 1: (9, 4), 2: (9, 2), 3: (1, 9)},
               [(0, 1, 0.5), (0, 2, 0.5), (1, 3, 0.5), (2, 3, 0.5)])
    ev = _eval(g, {0: 2, 1: 0, 2: 1, 3: 2}, 2, 1)
    assert ev.objective == 1 + (0.5 + 4 + 0.5) + 1
    # on one accelerator the branches run one after the other
    ev1 = _eval(g, {0: 2, 1: 0, 2: 0, 3: 2}, 2, 1)
    assert ev1.objective == 1 + (0.5 + 6 + 1.0) + 1


def test_cpus_are_unlimited() -> None:
    # three independent CPU nodes of 5 each on a cluster with one CPU: latency 5, not 15
    g = _graph({0: (5, 9), 1: (5, 9), 2: (5, 9)}, [])
    assert _eval(g, {0: 1, 1: 1, 2: 1}, 1, 1).objective == 5


def test_non_contiguous_accelerator_part_runs_as_two_subgraphs() -> None:
    # a (acc0) -> b (cpu) -> c (acc0): {a, c} is not contiguous: two invocations
    g = _graph({0: (9, 1), 1: (3, 9), 2: (9, 2)}, [(0, 1, 0.5), (1, 2, 0.25)])
    derived = _eval(g, {0: 0, 1: 1, 2: 0}, 1, 1)
    assert derived.objective == (1 + 0.5) + 3 + (0.25 + 2)
    explicit = _eval(g, {0: 0, 1: 1, 2: 0}, 1, 1, subgraph={0: 0, 1: 0, 2: 1})
    assert explicit.objective == derived.objective
    wrong_order = _eval(g, {0: 0, 1: 1, 2: 0}, 1, 1, subgraph={0: 1, 1: 0, 2: 0})
    assert wrong_order.objective == math.inf and not wrong_order.feasible


def test_edge_between_subgraphs_of_one_accelerator_goes_through_dram() -> None:
    g = _graph({0: (9, 1), 1: (9, 1)}, [(0, 1, 2.0)])
    ev = _eval(g, {0: 0, 1: 0}, 1, 0, subgraph={0: 0, 1: 1})
    assert ev.objective == (1 + 2) + (2 + 1)


def test_contiguous_parts_waiting_on_each_other_deadlock() -> None:
    # acc0 = {1, 4}, acc1 = {2, 3} with 1 -> 3 and 2 -> 4: both parts are contiguous,
    # but each needs an output of the other before it can be invoked
    g = _graph({1: (9, 1), 2: (9, 1), 3: (9, 1), 4: (9, 1)}, [(1, 3, 0.0), (2, 4, 0.0)])
    ev = _eval(g, {1: 0, 4: 0, 2: 1, 3: 1}, 2, 0)
    assert ev.objective == math.inf and not ev.feasible
    assert simulate(ev_problem(g, 2, 0), _assign(g, {1: 0, 4: 0, 2: 1, 3: 1}))[0] == math.inf


def ev_problem(g: Graph, k: int, cpus: int) -> Problem:
    return Problem(graph=g, cluster=reference_cluster(n_accelerators=k, n_cpus=cpus,
                                                      memory_bytes=1e9), objective=LATENCY)


def _assign(g: Graph, where: dict[int, int]) -> list[int]:
    a = np.empty(g.n_nodes, np.int64)
    a[g.index_of(list(where))] = list(where.values())
    return a.tolist()
