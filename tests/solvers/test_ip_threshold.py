"""Threshold descent (solvers/ip/threshold.py) against brute force and the evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from dnnpart import Plan, evaluate
from dnnpart.solvers import solve
from dnnpart.solvers.ip.threshold import descend
from dnnpart.testing import chain_problem
from dnnpart.testing.strategies import problems

FAST = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _feasible_start(problem) -> Plan | None:
    """Any feasible plan: the brute force's worst is not at hand, so take a single device."""
    for d in range(problem.cluster.n_devices):
        plan = Plan(assignment=np.full(problem.graph.n_nodes, d, np.int32))
        if evaluate(problem, plan).feasible:
            return plan
    return None


@FAST
@given(problems(max_nodes=6, max_accelerators=3, max_cpus=1, random_objective=True, training=None))
def test_descent_never_worse_and_its_bound_is_valid(problem) -> None:
    start = _feasible_start(problem)
    if start is None:
        return
    ref = solve(problem, "brute-force")
    out = descend(problem, start, contiguous=False, time_limit=10.0, ambition=0.5)
    ev = evaluate(problem, out.plan)
    assert ev.feasible
    assert out.objective == ev.objective
    assert ref.objective - 1e-9 <= out.objective <= evaluate(problem, start).objective + 1e-9
    assert out.bound <= ref.objective + 1e-9  # a refuted threshold proves OPT above it


@FAST
@given(problems(max_nodes=6, max_accelerators=2, max_cpus=1))
def test_contiguous_descent_stays_contiguous(problem) -> None:
    start = solve(problem, "dp")
    if start.plan is None:
        return
    out = descend(problem, start.plan, contiguous=True, time_limit=10.0)
    assert evaluate(problem, out.plan).contiguous.all()
    assert out.objective <= start.objective + 1e-9


def test_descent_reaches_the_optimum_of_a_chain_and_proves_it() -> None:
    p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    out = descend(p, Plan(assignment=np.zeros(4, np.int32)), contiguous=False, time_limit=10.0)
    assert out.objective == pytest.approx(5.0)
    # descent keeps aiming below 5 until the thresholds are refuted, which proves 5 - eps
    assert out.bound <= 5.0
    assert any(phase["proven_above"] for phase in out.phases)


def test_ip_reports_descent_and_keeps_objective_equal_to_evaluate() -> None:
    from dnnpart.testing import random_problem

    p = random_problem(np.random.default_rng(3), n_nodes=14, n_accelerators=3, n_cpus=1)
    r = solve(p, "ip-noncontig", time_limit=4.0, gap=0.0, threads=1, descent=True)
    assert r.plan is not None and r.objective == evaluate(p, r.plan).objective
    assert r.bound is None or r.bound <= r.objective + 1e-9
    off = solve(p, "ip-noncontig", time_limit=4.0, gap=0.0, threads=1, descent=False)
    assert "descent_phases" not in off.stats
    assert not math.isnan(off.objective)
