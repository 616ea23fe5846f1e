"""The DP with replicated stages (paper 1, appendix C.2) against an exhaustive oracle."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnpart.solvers.dp.driver as driver
import dnnpart.solvers.dp.kernels as dpk
import dnnpart.testing.dp_row_twins as row_twins
from dnnpart import Objective, Plan, Problem, Status, evaluate
from dnnpart.devices import reference_cluster, two_level_cluster
from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.graph.training import add_backward_pass
from dnnpart.solvers import solve
from dnnpart.solvers.dp import enumerate_stage_ideals, run_dp
from dnnpart.testing import chain_graph, chain_problem, random_problem


def _pipeline_splits(problem: Problem) -> list[np.ndarray]:
    """Feasible assignments in the DP's space: contiguous parts in pipeline order."""
    g, d = problem.graph, problem.cluster.n_devices
    cls = g.color_class.copy()
    free = cls < 0
    cls[free] = cls.max(initial=0) + 1 + np.arange(int(free.sum()))
    _, group_of = np.unique(cls, return_inverse=True)
    src, dst = g.edge_sources(), g.succ_idx.astype(np.int64)
    fw = ~g.is_backward[src] & ~g.is_backward[dst]
    out = []
    for combo in itertools.product(range(d), repeat=int(group_of.max()) + 1):
        a = np.asarray(combo, dtype=np.int32)[group_of]
        ev = evaluate(problem, Plan(assignment=a))
        if not ev.feasible or not ev.contiguous.all():
            continue
        quotient = nx.DiGraph()
        quotient.add_edges_from((int(u), int(v)) for u, v in zip(a[src[fw]], a[dst[fw]], strict=True)
                                if u != v)
        if nx.is_directed_acyclic_graph(quotient):
            out.append(a)
    return out


def _replication_oracle(problem: Problem) -> float:
    """Best plan over pipeline splits with every way of giving unused devices as replicas."""
    kinds = problem.cluster.kinds()
    d = problem.cluster.n_devices
    best = math.inf
    for a in _pipeline_splits(problem):
        used = set(a.tolist())
        choices = [[j] if j in used else [j] + [p for p in sorted(used) if kinds[p] == kinds[j]]
                   for j in range(d)]
        for replica_of in itertools.product(*choices):
            ev = evaluate(problem, Plan(assignment=a, replica_of=list(replica_of)))
            if ev.feasible:
                best = min(best, ev.objective)
    return best


@st.composite
def replicable_problems(draw: st.DrawFn) -> Problem:
    training = draw(st.booleans())
    n_acc = draw(st.integers(1, 3))
    n_cpu = draw(st.integers(0, 1 if n_acc == 3 else 2))
    n_nodes = draw(st.integers(1, 3 if training else 5))
    p = random_problem(
        np.random.default_rng(draw(st.integers(0, 2**31))), n_nodes=n_nodes,
        edge_prob=draw(st.sampled_from([0.3, 0.7])), n_accelerators=n_acc, n_cpus=n_cpu,
        memory_fraction=draw(st.sampled_from([None, 0.5, 0.8])),
        unsupported_prob=draw(st.sampled_from([0.0, 0.2])), training=training,
        objective=Objective(overlap=draw(st.sampled_from(["none", "compute-comm", "full-duplex"]))),
    )
    # a slow link makes the all-reduce (memory 1..9 "bytes" per node) cost a few time units
    bandwidth = draw(st.sampled_from([500.0, 4e3, 3e4]))
    cluster = reference_cluster(n_accelerators=n_acc, n_cpus=n_cpu, host_bandwidth=bandwidth,
                                memory_bytes=p.cluster.devices[0].memory_bytes)
    return Problem(graph=p.graph, cluster=cluster, objective=p.objective)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replicable_problems())
def test_replicated_dp_is_optimal(problem: Problem) -> None:
    oracle = _replication_oracle(problem)
    dp = solve(problem, "dp", replication=True)
    if math.isinf(oracle):
        assert dp.status is Status.INFEASIBLE
        return
    assert dp.status is Status.OPTIMAL
    assert dp.objective == pytest.approx(oracle, rel=1e-9, abs=1e-9)
    assert dp.objective == evaluate(problem, dp.require_plan()).objective
    unpruned = solve(problem, "dp", replication=True, use_upper_bound=False)
    assert unpruned.objective == pytest.approx(oracle, rel=1e-9, abs=1e-9)
    plain = solve(problem, "dp")
    assert dp.objective <= plain.objective + 1e-9
    dpl = solve(problem, "dpl", replication=True)
    if dpl.plan is not None:
        assert dpl.objective >= dp.objective - 1e-9
        assert dpl.objective == evaluate(problem, dpl.require_plan()).objective


def _training_chain(acc_time: list[float], memory: float, n_acc: int, bandwidth: float) -> Problem:
    g = add_backward_pass(chain_graph(len(acc_time), acc_time=acc_time, memory_bytes=memory),
                          backward_factor=1.0)
    c = reference_cluster(n_accelerators=n_acc, n_cpus=0, memory_bytes=math.inf,
                          host_bandwidth=bandwidth)
    return Problem(graph=g, cluster=c)


def test_cheap_sync_replicates() -> None:
    # forward 8, 1 (backward the same): stage {0} has load 16, stage {1} 2; 1 MB per node.
    # Best: the whole graph (load 18, 4 MB) on 3 replicas: 6 + 2/3 * 4e6 B / 1e9 B/s = 8.67 ms
    # (beats {0} on 2 replicas: 8 + 1/2 * 2e6 / 1e9 s = 9 ms)
    p = _training_chain([8.0, 1.0], 1e6, 3, 2e9)
    r = solve(p, "dp", replication=True)
    assert r.objective == pytest.approx(6.0 + 8.0 / 3.0)
    assert r.require_plan().replica_counts().tolist() == [3, 3, 3]
    assert solve(p, "dp").objective == pytest.approx(16.0)


def test_expensive_sync_keeps_a_plain_pipeline() -> None:
    p = _training_chain([8.0, 1.0], 1e9, 3, 2e9)   # all-reduce of 2 GB: 1000 ms
    r = solve(p, "dp", replication=True)
    assert r.objective == pytest.approx(16.0)
    assert not r.require_plan().is_replicated


def test_overlap_takes_the_max_of_share_and_sync() -> None:
    p = _training_chain([8.0, 1.0], 1e7, 3, 2e9)   # sync 10 ms vs share 8 ms
    p = p.with_objective(Objective(overlap="compute-comm"))
    assert solve(p, "dp", replication=True).objective == pytest.approx(10.0)


def test_cpus_replicate_too() -> None:
    p = chain_problem([1.0, 3.0], n_accelerators=0, n_cpus=2)  # CPU times 10, 30; inference
    r = solve(p, "dp", replication=True)
    assert r.objective == pytest.approx(20.0)
    assert r.require_plan().is_replicated


def test_unequal_links_are_refused_with_a_reason() -> None:
    g = add_backward_pass(chain_graph(2))
    c = two_level_cluster(n_groups=2, accelerators_per_group=1, memory_bytes=1e9,
                          intra_bandwidth=1e10, inter_bandwidth=1e9)
    c3 = two_level_cluster(n_groups=2, accelerators_per_group=2, memory_bytes=1e9,
                           intra_bandwidth=1e10, inter_bandwidth=1e9)
    solve(Problem(graph=g, cluster=c), "dp", replication=True)  # one pair: one bandwidth
    with pytest.raises(ValueError, match="same bandwidth"):
        solve(Problem(graph=g, cluster=c3), "dp", replication=True)


def test_option_is_validated() -> None:
    with pytest.raises(ValueError, match="replication"):
        solve(chain_problem([1.0], n_accelerators=1), "dp", replication="yes")


def test_replicated_kernel_compiles_like_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compilation check against the kernels' own source (``.py_func``); correctness:
    :func:`test_replicated_kernel_equals_its_twin`."""
    rng = np.random.default_rng(11)
    for training in (False, True):
        base = random_problem(rng, n_nodes=5, n_accelerators=3, n_cpus=1, memory_fraction=0.6,
                              training=training)
        p = Problem(graph=base.graph, objective=base.objective,
                    cluster=reference_cluster(n_accelerators=3, n_cpus=1, host_bandwidth=4e3,
                                              memory_bytes=base.cluster.devices[0].memory_bytes))
        stage = build_stage_graph(p.graph)
        lattice = enumerate_stage_ideals(stage)
        with monkeypatch.context() as m:  # small lattices would run the kernels' source
            m.setattr(driver, "SMALL_COVER_PAIRS", 0)
            fast = run_dp(p, stage, lattice, replication=True)
        with monkeypatch.context() as m:
            for name in ("fill_plain", "fill_replicated"):
                m.setattr(driver, name, getattr(dpk, name).py_func)
            slow = run_dp(p, stage, lattice, replication=True)
        assert slow.value == fast.value
        assert slow.slices_priced == fast.slices_priced
        np.testing.assert_array_equal(slow.assignment, fast.assignment)
        np.testing.assert_array_equal(slow.replica_of, fast.replica_of)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replicable_problems(), st.sampled_from([1.0, 1.3, math.inf]))
def test_replicated_kernel_equals_its_twin(problem: Problem, factor: float) -> None:
    # dnnpart.testing.dp_row_twins.fill_replicated fills each row from the recurrence's definition; integer
    # times, costs and memory keep the sums exact (the all-reduce is priced alike in both)
    stage = build_stage_graph(problem.graph)
    lattice = enumerate_stage_ideals(stage)
    best = run_dp(problem, stage, lattice, replication=True).value
    upper = factor if not math.isfinite(best * factor) else best * factor
    with pytest.MonkeyPatch.context() as m:
        m.setattr(driver, "SMALL_COVER_PAIRS", 0)
        m.setattr(driver, "SMALL_LATTICE", 0)
        compiled = run_dp(problem, stage, lattice, upper=upper, replication=True, keep_table=True)
        for name in ("fill_plain", "fill_replicated"):
            m.setattr(driver, name, getattr(row_twins, name))
        twin = run_dp(problem, stage, lattice, upper=upper, replication=True, keep_table=True)
    assert compiled.table is not None and twin.table is not None
    np.testing.assert_array_equal(twin.table, compiled.table)
    assert (twin.slices_priced, twin.slices_pruned) == (compiled.slices_priced,
                                                        compiled.slices_pruned)
    plan = twin.plan()
    if plan is not None:
        assert evaluate(problem, plan).objective == pytest.approx(twin.value, rel=1e-9)


def test_threads_fill_the_same_replicated_tables() -> None:
    # each thread prices its slices' replica loads in scratch of its own: with one shared
    # array the threads read each other's loads and the table came out too low
    for seed in (0, 4):
        base = random_problem(np.random.default_rng(seed), n_nodes=16, edge_prob=0.12,
                              n_accelerators=4, n_cpus=2, training=True)
        p = Problem(graph=base.graph, objective=base.objective,
                    cluster=reference_cluster(n_accelerators=4, n_cpus=2, host_bandwidth=4e3,
                                              memory_bytes=1e9))
        stage = build_stage_graph(p.graph)
        lattice = enumerate_stage_ideals(stage)
        one = run_dp(p, stage, lattice, replication=True, keep_table=True)
        for _ in range(2):
            two = run_dp(p, stage, lattice, replication=True, threads=2, keep_table=True)
            assert two.table is not None and one.table is not None
            np.testing.assert_array_equal(two.table, one.table)
            assert two.slices_priced == one.slices_priced


def test_devices_without_a_link_are_not_replicated() -> None:
    p = _training_chain([8.0, 1.0], 1e6, 3, 0.0)   # bandwidth 0: no all-reduce possible
    r = solve(p, "dp", replication=True)
    assert r.objective == pytest.approx(16.0)
    assert not r.require_plan().is_replicated
    forced = evaluate(p, Plan(assignment=[0, 1, 1, 0], replica_of=[0, 1, 0]))
    assert math.isinf(forced.objective)
