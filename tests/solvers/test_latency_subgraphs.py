"""Latency with several subgraphs per accelerator (paper 1, section 4) against an oracle.

The oracle (:mod:`tests.latency_orders`) scores every subgraph division and order of every
split with ``evaluate``; ``brute-force`` (which prunes) and the integer program with
``subgraphs_per_device=q`` are held to it: no plan beats the optimum over all orders, the IP's
bound never exceeds the optimum over its own space (at most ``q`` subgraphs per accelerator,
CPU parts contiguous), and a proven IP run meets that optimum within its gap.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from tests.latency_orders import latency_optimum

from dnnpart import Objective, Plan, evaluate
from dnnpart.devices import reference_cluster
from dnnpart.graph import GraphBuilder
from dnnpart.plan import Status
from dnnpart.problem import LATENCY, Problem
from dnnpart.solvers import solve
from dnnpart.testing.strategies import seeded_problems

PROBLEMS = seeded_problems(8, seed=4242, max_nodes=5, max_accelerators=2, max_cpus=1,
                           training=None, objective=Objective(kind=LATENCY))
TOL = 1e-9


@functools.cache
def _optimum(index: int, q: int | None, contiguous_cpus: bool = False) -> float:
    return latency_optimum(PROBLEMS[index], q, contiguous_cpus)


def _scored(problem: Problem, result: object) -> None:
    plan = result.plan  # type: ignore[attr-defined]
    if plan is not None:
        assert result.objective == evaluate(problem, plan).objective  # type: ignore[attr-defined]


@pytest.mark.parametrize("index", range(len(PROBLEMS)))
def test_brute_force_meets_the_order_oracle(index: int) -> None:
    problem = PROBLEMS[index]
    for q in (1, 2):  # any number: the conformance suite
        result = solve(problem, "brute-force", subgraphs_per_device=q)
        _scored(problem, result)
        best = _optimum(index, q)
        assert result.objective == best or math.isclose(result.objective, best, rel_tol=TOL)
        assert result.status is (Status.OPTIMAL if math.isfinite(best) else Status.INFEASIBLE)


@pytest.mark.parametrize("index", range(len(PROBLEMS)))
def test_ip_with_two_subgraphs_per_device_meets_the_oracle(index: int) -> None:
    problem = PROBLEMS[index]
    result = solve(problem, "ip", subgraphs_per_device=2)
    _scored(problem, result)
    everything, own = _optimum(index, None), _optimum(index, 2, True)
    if result.plan is not None and evaluate(problem, result.plan).feasible:
        assert result.objective >= everything - TOL * max(1.0, everything)
    if result.bound is not None and math.isfinite(own):
        assert result.bound <= own + TOL * max(1.0, own)
    if result.status is Status.OPTIMAL:
        assert result.objective <= own * 1.01 + TOL  # the default gap is 1%
    if result.status is Status.INFEASIBLE:
        assert own == math.inf


def test_a_second_subgraph_lowers_latency_by_hand() -> None:
    """a -> b -> c with b only on the CPU: one subgraph {a, c} on the accelerator waits for b,
    which waits for a (a deadlock); two subgraphs, a then c, run 1 + 1 (out) + 1 (b) + 1 (in)
    + 1 = 5 ms."""
    builder = GraphBuilder()
    for v, (cpu, acc) in enumerate([(10.0, 1.0), (1.0, math.inf), (10.0, 1.0)]):
        builder.add_node(v, cpu_time=cpu, acc_time=acc, memory_bytes=1.0)
    builder.add_edge(0, 1, cost=1.0)
    builder.add_edge(1, 2, cost=1.0)
    graph = builder.build()
    problem = Problem(graph=graph, cluster=reference_cluster(n_accelerators=1, n_cpus=1,
                                                             memory_bytes=10.0),
                      objective=Objective(kind=LATENCY))
    a = np.array([0, 1, 0], np.int32)
    assert math.isinf(evaluate(problem, Plan(assignment=a, subgraph=np.zeros(3, np.int32))).objective)
    two = evaluate(problem, Plan(assignment=a, subgraph=np.array([0, 0, 1], np.int32))).objective
    assert solve(problem, "brute-force", subgraphs_per_device=1).objective > two
    assert solve(problem, "brute-force").objective <= two
    assert latency_optimum(problem) <= two
