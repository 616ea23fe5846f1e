"""Greedy memory filling (paper 1, section 7): never exceeds memory when it returns a plan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from tests.workloads import over_workloads

from dnnpart import Objective, Status, evaluate
from dnnpart.devices import reference_cluster
from dnnpart.io import read_problem
from dnnpart.problem import Problem
from dnnpart.scenarios import latency_scenario
from dnnpart.solvers import solve
from dnnpart.testing import chain_graph
from dnnpart.testing.strategies import problems


@given(problems(max_nodes=8, memory_prob=0.9))
def test_greedy_never_violates_memory(problem: Problem) -> None:
    result = solve(problem, "greedy")
    if result.plan is None:
        assert result.status is Status.UNKNOWN
        return
    ev = evaluate(problem, result.plan)
    assert np.all(ev.memory_bytes <= problem.cluster.memory_capacity() * (1 + 1e-9))
    assert ev.feasible, ev.violations
    assert result.status is Status.FEASIBLE


@given(problems(max_nodes=8, memory_prob=0.9, objective=Objective(kind="latency"), training=False))
def test_greedy_latency_plans_are_feasible(problem: Problem) -> None:
    result = solve(problem, "greedy")
    if result.plan is not None:
        assert evaluate(problem, result.plan).feasible


def test_fills_accelerators_in_order_then_cpu() -> None:
    g = chain_graph(5, memory_bytes=1.0)
    p = Problem(graph=g, cluster=reference_cluster(n_accelerators=2, n_cpus=1, memory_bytes=2.0))
    assert solve(p, "greedy").require_plan().assignment.tolist() == [0, 0, 1, 1, 2]


def test_no_room_anywhere_gives_no_plan() -> None:
    g = chain_graph(3, memory_bytes=1.0)
    p = Problem(graph=g, cluster=reference_cluster(n_accelerators=1, n_cpus=0, memory_bytes=2.0))
    result = solve(p, "greedy")
    assert result.plan is None and result.status is Status.UNKNOWN


@pytest.mark.parametrize("model", over_workloads(["bert24", "resnet50", "inceptionv3", "gnmt"]))
def test_greedy_latency_is_valid_on_the_latency_scenarios(workloads_dir: Path, model: str) -> None:
    graph = read_problem(workloads_dir / "throughput" / "LayerGraphs" / f"{model}_inference.json").graph
    scenario = latency_scenario(graph)
    result = solve(scenario, "greedy")
    ev = evaluate(scenario, result.require_plan())
    assert ev.feasible, ev.violations
    assert result.objective == ev.objective and np.isfinite(result.objective)
    # the paper: greedy places every node on an accelerator on all its workloads
    assert set(result.require_plan().assignment.tolist()) <= set(scenario.cluster.accelerators)
