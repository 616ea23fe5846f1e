"""The DP's peeled relaxation (issue 20): light side nodes left out for a lower bound, the
plan extended back, and the full DP pruned by the relaxation's prefix and suffix tables."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dnnpart.solvers.dp.peeled as peeled
import dnnpart.solvers.dp.solve as solve_module
from dnnpart.evaluate import evaluate
from dnnpart.graph.core import build_graph
from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.plan import Status
from dnnpart.problem import Objective, Problem
from dnnpart.solvers import solve
from dnnpart.solvers.dp import IdealLattice, enumerate_stage_ideals, relax, run_dp
from dnnpart.testing import random_problem


@pytest.fixture
def always_peel(monkeypatch: pytest.MonkeyPatch) -> None:
    # small lattices, every one-neighbour leaf and side component peeled
    monkeypatch.setattr(peeled, "PEEL_IDEALS", 1)
    monkeypatch.setattr(peeled, "PEEL_RATIO", 1.0)
    monkeypatch.setattr(relax, "LIGHT_FRACTION", 1e300)


def _problem(seed: int, n_nodes: int, edge_prob: float, overlap: str, memory: float | None,
             n_cpus: int) -> Problem:
    return random_problem(np.random.default_rng(seed), n_nodes=n_nodes, edge_prob=edge_prob,
                          n_accelerators=2, n_cpus=n_cpus, memory_fraction=memory,
                          unsupported_prob=0.1, objective=Objective(overlap=overlap))


def _is_pipeline(problem: Problem, assignment: np.ndarray) -> bool:
    stage = build_stage_graph(problem.graph)
    dev = np.full(stage.n_stage_nodes, -1)
    dev[stage.stage_of] = assignment
    if np.any(dev[stage.stage_of] != assignment):  # a stage node split over devices
        return False
    src = np.repeat(np.arange(stage.n_stage_nodes), np.diff(stage.succ_ptr))
    a, b = dev[src], dev[stage.succ_idx]
    return relax._acyclic(problem.cluster.n_devices, a[a != b], b[a != b])


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**31), st.integers(3, 9), st.sampled_from([0.15, 0.25, 0.4]),
       st.sampled_from(["none", "none", "compute-comm", "full-duplex"]),
       st.sampled_from([None, None, 0.4, 0.7]), st.integers(0, 2))
def test_peeled_dp_keeps_the_optimum(always_peel: None, seed: int, n_nodes: int,
                                     edge_prob: float, overlap: str, memory: float | None,
                                     n_cpus: int) -> None:
    # the plain DP (no bounds: the DP as it was) is the reference; the peeled one proves the
    # same optimum, by the relaxation's bound or by the masked DP, with a pipeline plan
    p = _problem(seed, n_nodes, edge_prob, overlap, memory, n_cpus)
    plain = solve(p, "dp", use_upper_bound=False)
    peeled = solve(p, "dp")
    assert peeled.status is plain.status
    if plain.plan is None:
        return
    assert peeled.status is Status.OPTIMAL
    assert peeled.objective == pytest.approx(plain.objective, rel=1e-9, abs=1e-12)
    plan = peeled.require_plan()
    assert peeled.objective == evaluate(p, plan).objective
    assert _is_pipeline(p, plan.assignment)
    if "peel_lower_bound" in peeled.stats:
        assert peeled.stats["peel_lower_bound"] <= plain.objective * (1 + 1e-9) + 1e-12


def test_both_ways_of_proving_occur(always_peel: None) -> None:
    # over fixed seeds: some optima are proven by the relaxation alone (no slice of the full
    # lattice priced), some by the masked DP; both agree with the plain DP
    by_bound = by_mask = 0
    for seed in range(120):
        p = _problem(seed, 8, 0.2, "none", None, 1)
        r = solve(p, "dp")
        if "peel_lower_bound" not in r.stats:
            continue
        assert r.objective == pytest.approx(solve(p, "dp", peel=False).objective, rel=1e-9)
        if r.stats["slices_priced"] == 0:
            by_bound += 1
        else:
            by_mask += 1
    assert by_bound > 0 and by_mask > 0


def _induced(problem: Problem, keep: np.ndarray) -> Problem:
    g = problem.graph
    src, dst = g.edge_sources(), g.succ_idx.astype(np.int64)
    e = keep[src] & keep[dst]
    ids = g.original_ids
    sub = build_graph(ids[keep], ids[src[e]], ids[dst[e]], compute_time=g.compute_time[keep],
                      edge_cost=g.edge_cost[e], memory_bytes=g.memory_bytes[keep],
                      names=[n for n, k in zip(g.names, keep, strict=True) if k])
    return Problem(graph=sub, cluster=problem.cluster, objective=problem.objective)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(3, 9), st.sampled_from(["none", "full-duplex"]))
def test_peeled_costs_price_the_graph_without_the_peeled_nodes(seed: int, n_nodes: int,
                                                               overlap: str) -> None:
    # G' = G without some stage nodes, priced with G's arrays (relax.peeled_costs), has the
    # optimum of the induced subgraph, which is at most G's
    p = _problem(seed, n_nodes, 0.3, overlap, None, 1)
    stage = build_stage_graph(p.graph, merge_trivial=False)
    rng = np.random.default_rng(seed)
    drop = rng.random(stage.n_stage_nodes) < 0.4
    drop[0] = False
    groups = tuple(np.array([s]) for s in np.flatnonzero(drop))
    peeling = relax.peel(stage, groups)
    costs = relax.peeled_costs(p.graph, peeling.removed_nodes)
    lattice = enumerate_stage_ideals(peeling.stage)
    value = run_dp(p, peeling.stage, lattice, costs=costs).value
    induced = solve(_induced(p, ~peeling.removed_nodes), "dp", use_upper_bound=False)
    expected = induced.objective if induced.plan is not None else math.inf
    assert value == pytest.approx(expected, rel=1e-9, abs=1e-12)
    full = solve(p, "dp", use_upper_bound=False)
    if full.plan is not None:
        assert value <= full.objective * (1 + 1e-9) + 1e-12


def _masks(lattice: IdealLattice, n: int) -> np.ndarray:
    return np.array([lattice.nodes(i, n) for i in range(lattice.n_ideals)])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 9), st.sampled_from([0.15, 0.3, 0.6]))
def test_lattice_maps_match_the_sets(seed: int, n_nodes: int, edge_prob: float) -> None:
    p = _problem(seed, n_nodes, edge_prob, "none", None, 1)
    stage = build_stage_graph(p.graph, merge_trivial=False)
    n = stage.n_stage_nodes
    drop = np.random.default_rng(seed).random(n) < 0.4
    peeling = relax.peel(stage, tuple(np.array([s]) for s in np.flatnonzero(drop)))
    full, sub = enumerate_stage_ideals(stage), enumerate_stage_ideals(peeling.stage)
    m = peeling.stage.n_stage_nodes
    new_id = np.full(n, -1, np.int64)
    new_id[peeling.kept] = np.arange(m)
    # restriction: I without the peeled nodes
    r = relax.restriction_map(full, sub, new_id, m)
    fm, sm = _masks(full, n), _masks(sub, m)
    np.testing.assert_array_equal(fm[:, peeling.kept], sm[r])
    # reversed stage graph: its ideals are the filters, and the complement map finds them
    rev = relax.reverse_stage(peeling.stage)
    rev_lattice = enumerate_stage_ideals(rev)
    assert rev_lattice.n_ideals == sub.n_ideals
    comp = relax.complement_map(sub, rev_lattice, m)
    np.testing.assert_array_equal(_masks(rev_lattice, m)[comp][:, ::-1], ~sm)


def test_peel_set_takes_light_leaves_and_side_components() -> None:
    # 0 -> 1 -> 2 -> 3 plus an isolated chain 4 -> 5: the leaves 0 and 3 and the chain
    g = build_graph(list(range(6)), [0, 1, 2, 4], [1, 2, 3, 5],
                    compute_time=np.ones((6, 2)), edge_cost=np.ones(4))
    stage = build_stage_graph(g, merge_trivial=False)
    # stage id -> original id (one node per stage node here)
    ids = g.original_ids[np.argsort(stage.stage_of)]

    def peeled(light_nodes: list[bool]) -> list[list[int]]:
        light = np.asarray(light_nodes)[ids]
        return sorted(sorted(ids[x].tolist()) for x in relax.peel_set(stage, light))

    assert peeled([True] * 6) == [[0], [3], [4, 5]]
    assert peeled([True, True, True, False, True, False]) == [[0]]


def test_peel_option_is_checked() -> None:
    p = _problem(1, 5, 0.3, "none", None, 1)
    with pytest.raises(ValueError, match="peel"):
        solve(p, "dp", peel="yes")


def test_a_stop_anywhere_keeps_the_meaning(always_peel: None,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # the clock expires after k checks, for every k up to a finished run: each DP of the
    # relaxation and the full one stop there; whatever comes back means what it says
    from dnnpart.solvers.registry import Stopwatch

    p = next(q for seed in range(200)
             if (q := _problem(seed, 9, 0.15, "none", None, 1)) is not None
             and "peel_lower_bound" in solve(q, "dp").stats
             and solve(q, "dp").stats["slices_priced"] > 0)
    best = solve(p, "dp", peel=False).objective
    def limited(k: int) -> type[Stopwatch]:
        calls = [0]

        class Limited(Stopwatch):
            def expired(self) -> bool:
                calls[0] += 1
                return calls[0] > k

        return Limited

    statuses = [Status.UNKNOWN]
    for k in itertools.count():
        if statuses[-1] is Status.OPTIMAL or k > 2000:
            break
        monkeypatch.setattr(solve_module, "Stopwatch", limited(k))
        r = solve(p, "dp")
        statuses.append(r.status)
        if r.status is Status.OPTIMAL:
            assert r.objective == pytest.approx(best, rel=1e-9)
        else:
            assert r.stats["timed_out"] or "peel_lower_bound" not in r.stats
        if r.plan is not None:
            assert r.objective == evaluate(p, r.plan).objective
    assert statuses[-1] is Status.OPTIMAL  # the last k lets the whole run through
    assert statuses[1] is not Status.OPTIMAL
