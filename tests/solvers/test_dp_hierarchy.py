"""Two-level accelerator hierarchies (paper 1, appendix C.3): pricing and the exact DP.

The DP's space is contiguous splits in pipeline order where each group's accelerators take
consecutive stages (CPU stages only between groups). The oracle enumerates every assignment,
keeps those in that space and scores them with the evaluator.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnnpart import Objective, Plan, Problem, evaluate
from dnnpart.devices import reference_cluster, two_level_cluster
from dnnpart.errors import ProblemTooLargeError
from dnnpart.graph import GraphBuilder
from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.plan import Status
from dnnpart.solvers import solve
from dnnpart.testing import random_problem


def _cluster(groups: int = 2, per_group: int = 2, cpus: int = 0, memory: float = 1e9,
             intra: float = 100e9, inter: float = 25e9):
    return two_level_cluster(n_groups=groups, accelerators_per_group=per_group,
                             memory_bytes=memory, intra_bandwidth=intra,
                             inter_bandwidth=inter, n_cpus=cpus)


def _fan_problem(cluster) -> Problem:
    """Node 0 feeds nodes 1 and 2 (transfer cost 1); every node takes 1 on an accelerator."""
    b = GraphBuilder()
    for v in range(3):
        b.add_node(v, acc_time=1.0, cpu_time=5.0)
    b.add_edge(0, 1, cost=1.0)
    b.add_edge(0, 2, cost=1.0)
    return Problem(graph=b.build(), cluster=cluster)


# -- pricing --------------------------------------------------------------------------------

def test_cluster_flags_and_rates() -> None:
    flat = reference_cluster(n_accelerators=3, n_cpus=1, memory_bytes=1e9)
    assert not flat.is_hierarchical
    assert not _cluster(groups=1).is_hierarchical
    two = _cluster(cpus=1)
    assert two.is_hierarchical and two.reference_bandwidth == 100e9
    scale = two.transfer_scale()
    assert scale[0, 1] == 1.0 and scale[0, 2] == 4.0 and scale[2, 4] == 4.0 and scale[0, 4] == 4.0


def test_sender_pays_slowest_link_receivers_their_own() -> None:
    p = _fan_problem(_cluster())  # g0acc0, g0acc1, g1acc0, g1acc1
    ev = evaluate(p, Plan(assignment=[0, 1, 2]))
    # sender: compute 1 + one output at the slowest receiver link (inter, x4)
    # g0acc1: 1 + in at intra (x1); g1acc0: 1 + in at inter (x4)
    assert ev.load.tolist() == [5.0, 2.0, 5.0, 0.0]
    assert ev.objective == 5.0
    # both receivers in the sender's group: every transfer at the intra rate
    p3 = _fan_problem(_cluster(per_group=3))
    assert evaluate(p3, Plan(assignment=[0, 1, 2])).load.tolist() == [2.0, 2.0, 2.0, 0, 0, 0]


def test_cpu_receiver_pays_nothing_sender_pays_inter() -> None:
    p = _fan_problem(_cluster(cpus=1))  # cpu0 is device 4
    ev = evaluate(p, Plan(assignment=[0, 1, 4]))
    assert ev.load.tolist() == [5.0, 2.0, 0.0, 0.0, 5.0]


def test_non_uniform_edges_priced_per_link() -> None:
    b = GraphBuilder()
    for v in range(3):
        b.add_node(v, acc_time=1.0, cpu_time=1.0)
    b.add_edge(0, 1, cost=1.0)
    b.add_edge(0, 2, cost=2.0)
    p = Problem(graph=b.build(), cluster=_cluster())
    ev = evaluate(p, Plan(assignment=[0, 1, 2]))
    assert ev.load.tolist() == [1 + 1 + 8.0, 2.0, 1 + 8.0, 0.0]


@given(st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_flat_clusters_ignore_bandwidth(seed: int) -> None:
    """Non-hierarchical clusters price at the host link whatever the bandwidth matrix says."""
    rng = np.random.default_rng(seed)
    p = random_problem(rng, n_nodes=6, n_accelerators=3, n_cpus=1)
    bw = rng.uniform(1e9, 1e10, size=(4, 4))
    other = dataclasses.replace(p.cluster, bandwidth=bw, reference_bandwidth=1e9)
    a = rng.integers(0, 4, size=6)
    one = evaluate(p, Plan(assignment=a))
    two = evaluate(Problem(graph=p.graph, cluster=other, objective=p.objective), Plan(assignment=a))
    assert one.objective == two.objective
    assert np.array_equal(one.load, two.load)


def test_latency_refuses_hierarchies() -> None:
    p = dataclasses.replace(_fan_problem(_cluster()), objective=Objective(kind="latency"))
    with pytest.raises(ValueError, match="hierarch"):
        evaluate(p, Plan(assignment=[0, 1, 2]))


@pytest.mark.parametrize("method", ["ip", "ip-noncontig", "local-search"])
def test_model_based_solvers_refuse(method: str) -> None:
    with pytest.raises(ValueError, match="use dp or brute-force"):
        solve(_fan_problem(_cluster()), method)


# -- the DP against brute force over its space ---------------------------------------------

def _acyclic(n: int, edges: set[tuple[int, int]]) -> bool:
    indeg = [0] * n
    for _, y in edges:
        indeg[y] += 1
    ready = [x for x in range(n) if indeg[x] == 0]
    seen = 0
    while ready:
        x = ready.pop()
        seen += 1
        for e in edges:
            if e[0] == x:
                indeg[e[1]] -= 1
                if indeg[e[1]] == 0:
                    ready.append(e[1])
    return seen == n


def in_space(problem: Problem, stage, assignment: list[int]) -> bool:
    """Pipeline-order split (chain of stage ideals) with each group's stages consecutive."""
    cluster = problem.cluster
    device_of = []
    for s in range(stage.n_stage_nodes):
        devs = {assignment[v] for v in stage.members(s)}
        if len(devs) != 1:
            return False
        device_of.append(devs.pop())
    n_groups = len(set(cluster.group[list(cluster.accelerators)].tolist()))
    is_acc = cluster.is_accelerator()

    def block(dev: int) -> int:
        return int(cluster.group[dev]) if is_acc[dev] else n_groups + dev

    block_edges, dev_edges = set(), set()
    for s in range(stage.n_stage_nodes):
        for t in stage.succ_idx[stage.succ_ptr[s]:stage.succ_ptr[s + 1]].tolist():
            x, y = device_of[s], device_of[t]
            if x != y:
                dev_edges.add((x, y))
                if block(x) != block(y):
                    block_edges.add((block(x), block(y)))
    return _acyclic(n_groups + cluster.n_devices, block_edges) and _acyclic(
        cluster.n_devices, dev_edges
    )


def brute_force_in_space(problem: Problem) -> float:
    stage = build_stage_graph(problem.graph, merge_trivial=False)
    n, d = problem.graph.n_nodes, problem.cluster.n_devices
    best = math.inf
    for s_assign in itertools.product(range(d), repeat=stage.n_stage_nodes):
        a = [s_assign[stage.stage_of[v]] for v in range(n)]
        if not in_space(problem, stage, a):
            continue
        ev = evaluate(problem, Plan(assignment=a))
        if ev.feasible:
            best = min(best, ev.objective)
    return best


@st.composite
def hierarchy_problems(draw: st.DrawFn) -> Problem:
    per_group = draw(st.integers(1, 2))
    cpus = draw(st.integers(0, 1))
    training = draw(st.booleans())
    n_nodes = draw(st.integers(2, 3 if training else 6 if per_group == 2 else 7))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = random_problem(rng, n_nodes=n_nodes, edge_prob=0.5, training=training,
                          unsupported_prob=draw(st.sampled_from([0.0, 0.2])))
    total = float(base.graph.memory_bytes.sum())
    memory = draw(st.sampled_from([math.inf, 0.5 * total, 0.7 * total]))
    inter = draw(st.sampled_from([25e9, 50e9, 100e9]))
    cluster = _cluster(per_group=per_group, cpus=cpus, memory=memory, inter=inter)
    if cpus and draw(st.booleans()):  # host memory is unbounded unless a cluster says so
        cpu_memory = draw(st.sampled_from([0.3 * total, 0.6 * total]))
        cluster = dataclasses.replace(cluster, devices=tuple(
            dataclasses.replace(x, memory_bytes=cpu_memory) if x.kind == "cpu" else x
            for x in cluster.devices))
    overlap = draw(st.sampled_from(["none", "none", "compute-comm", "full-duplex"]))
    return Problem(graph=base.graph, cluster=cluster, objective=Objective(overlap=overlap))


def _check_kernel_value(problem: Problem, expected: float) -> None:
    """The compiled row kernel's own value (``solve`` reports the evaluator's price of its
    plan instead) is the least max-load of the space, and its plan is worth it."""
    from dnnpart.solvers.dp import enumerate_stage_ideals
    from dnnpart.solvers.dp.devices import device_model
    from dnnpart.solvers.dp.hierarchy import hierarchy_model, run_hierarchy_dp

    stage = build_stage_graph(problem.graph, merge_trivial=False)
    model = device_model(problem)
    out = run_hierarchy_dp(problem, stage, enumerate_stage_ideals(stage),
                           hierarchy_model(problem, model.comm_scale), acc_time=model.acc_time,
                           cpu_time=model.cpu_time, acc_cap=model.acc_cap, cpu_cap=model.cpu_cap)
    if math.isinf(expected):
        assert math.isinf(out.value) and out.assignment is None
        return
    assert out.value == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert out.assignment is not None
    ev = evaluate(problem, Plan(assignment=out.assignment))
    assert ev.feasible and ev.objective == pytest.approx(out.value, rel=1e-9, abs=1e-9)
    assert in_space(problem, stage, out.assignment.tolist())


@given(hierarchy_problems())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_dp_equals_brute_force_in_its_space(problem: Problem) -> None:
    expected = brute_force_in_space(problem)
    _check_kernel_value(problem, expected)
    r = solve(problem, "dp")
    if math.isinf(expected):
        assert r.status is Status.INFEASIBLE
        return
    assert r.status is Status.OPTIMAL
    assert r.objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert r.objective == evaluate(problem, r.require_plan()).objective
    stage = build_stage_graph(problem.graph, merge_trivial=False)
    assert in_space(problem, stage, r.require_plan().assignment.tolist())
    assert "one segment per group" in r.search_space
    # the pruning bound changes nothing
    assert solve(problem, "dp", use_upper_bound=False).objective == pytest.approx(r.objective)


def test_dp_keeps_the_work_in_one_group_when_inter_links_are_slow() -> None:
    """A chain on 2x2 accelerators whose inter-group transfers cost 10 times more."""
    b = GraphBuilder()
    times = [4.0, 4.0, 4.0, 4.0]
    for v, t in enumerate(times):
        b.add_node(v, acc_time=t, cpu_time=100.0)
    for v in range(3):
        b.add_edge(v, v + 1, cost=1.0 if v != 1 else 0.5)
    p = Problem(graph=b.build(), cluster=_cluster(inter=10e9))  # inter transfers x10
    r = solve(p, "dp")
    assert r.status is Status.OPTIMAL
    # one group, cut at the cheap edge 1 -> 2: 8 + 0.5 (intra); across groups 8 + 5 = 13
    assert r.objective == pytest.approx(8.5)
    used = {int(p.cluster.group[x]) for x in r.require_plan().assignment.tolist()}
    assert len(used) == 1
    assert r.objective == pytest.approx(brute_force_in_space(p))


def test_dp_refuses_large_lattices() -> None:
    rng = np.random.default_rng(0)
    base = random_problem(rng, n_nodes=8, edge_prob=0.0)  # 2^8 ideals
    p = Problem(graph=base.graph, cluster=_cluster())
    with pytest.raises(ProblemTooLargeError, match="max_hierarchy_ideals"):
        solve(p, "dp", max_hierarchy_ideals=100)
    # replication runs the flat DP, which prices the host link: not proven on a hierarchy
    r = solve(p, "dp", replication=True)
    assert r.status is Status.FEASIBLE and "not proven" in r.search_space


def test_hierarchy_without_bandwidths_is_refused() -> None:
    """Groups with unspecified (infinite) links would make every transfer free: refuse."""
    from dnnpart.errors import FormatError
    from dnnpart.io.cluster_file import parse_cluster

    spec = {"devices": [{"name": "gpu", "count": 2, "kind": "accelerator", "group": 0},
                        {"name": "tpu", "count": 2, "kind": "accelerator", "group": 1}]}
    with pytest.raises(FormatError, match="gpu0 -> gpu1"):
        parse_cluster(spec)
    spec["bandwidth"] = [[math.inf if i == j else (100e9 if i // 2 == j // 2 else 10e9)
                          for j in range(4)] for i in range(4)]
    cluster = parse_cluster(spec)
    assert cluster.is_hierarchical and cluster.transfer_scale()[0, 2] == pytest.approx(10.0)


@given(hierarchy_problems(), st.sampled_from([math.inf, 0.0]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_numba_kernel_and_its_source_equal_the_plain_dp(problem: Problem, upper: float) -> None:
    """The compiled hierarchy DP agrees with the plain implementation (the same recurrence
    over Python-int bitmasks, written separately), value, plan and pruning. Running the
    kernels' own source (``jit=False``, ``.py_func``) too checks compilation only; the
    brute-force tests above check the recurrence itself."""
    from dnnpart.solvers.dp import enumerate_stage_ideals
    from dnnpart.solvers.dp.devices import device_model
    from dnnpart.solvers.dp.hierarchy import (
        hierarchy_model,
        run_hierarchy_dp,
        run_hierarchy_dp_plain,
    )

    stage = build_stage_graph(problem.graph, merge_trivial=False)
    lattice = enumerate_stage_ideals(stage)
    model = device_model(problem)
    levels = hierarchy_model(problem, model.comm_scale)
    kw = dict(acc_time=model.acc_time, cpu_time=model.cpu_time, acc_cap=model.acc_cap,
              cpu_cap=model.cpu_cap)
    if upper == 0.0:  # a bound at the optimum prunes but keeps it
        first = run_hierarchy_dp_plain(problem, stage, lattice, levels, **kw)
        upper = first.value
    plain = run_hierarchy_dp_plain(problem, stage, lattice, levels, upper=upper, **kw)
    priced = []
    for jit in (True, False):
        out = run_hierarchy_dp(problem, stage, lattice, levels, upper=upper, jit=jit, **kw)
        assert out.value == plain.value
        priced.append(out.slices_priced)
        # the kernel prunes segments that cannot improve the row: never more work
        assert out.slices_priced <= plain.slices_priced
        if plain.assignment is None:
            assert out.assignment is None
        else:
            assert out.assignment is not None
            assert out.assignment.tolist() == plain.assignment.tolist()
    assert priced[0] == priced[1]


@given(st.integers(0, 2**32 - 1), st.integers(2, 9), st.floats(0.0, 0.6))
@settings(max_examples=40, deadline=None)
def test_small_enumeration_equals_the_kernel(seed: int, n: int, p: float) -> None:
    """The plain-Python ideal walk used before numba loads gives the kernel's exact lattice."""
    from dnnpart.solvers.dp.ideals import _ZOBRIST_SEED, enumerate_small
    from dnnpart.solvers.dp.lattice_kernels import enumerate_lattice

    rng = np.random.default_rng(seed)
    stage = build_stage_graph(random_problem(rng, n_nodes=n, edge_prob=p).graph,
                              merge_trivial=False)
    m = stage.n_stage_nodes
    zobrist = np.random.default_rng(_ZOBRIST_SEED).integers(
        0, np.iinfo(np.uint64).max, size=m, dtype=np.uint64, endpoint=True)
    args = (m, stage.pred_ptr, stage.pred_idx, stage.succ_ptr, stage.succ_idx)
    want = enumerate_lattice(*args, zobrist, 10_000, 100_000)
    got = enumerate_small(*args, 10_000, 100_000)
    assert got is not None
    assert got[0] == want[0]
    for a, b in zip(got[1:], want[1:], strict=True):
        assert a.tolist() == b.tolist()
    assert enumerate_small(*args, max(1, int(want[0]) - 1), 100_000) is None
