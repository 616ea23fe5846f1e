"""The packing bound (solvers/ip/bounds.py) is a valid lower bound and certifies packings."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnnpart.graph.algorithms import colocation_units
from dnnpart.solvers import solve
from dnnpart.solvers.ip.backend import BackendSettings
from dnnpart.solvers.ip.bounds import build_packing_relaxation, cut_bound, packed_units
from dnnpart.solvers.ip.cpsat import solve_cpsat
from dnnpart.solvers.ip.highs import solve_highs
from dnnpart.solvers.ip.throughput import device_times
from dnnpart.testing import chain_problem
from dnnpart.testing.strategies import problems

FAST = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1, random_objective=True, training=None),
       st.integers(1, 5), st.sampled_from(["cpsat", "highs"]))
def test_packing_bound_never_exceeds_the_brute_force_optimum(problem, n_units, backend) -> None:
    ref = solve(problem, "brute-force")
    if ref.plan is None:
        return
    run = solve_cpsat if backend == "cpsat" else solve_highs
    out = run(build_packing_relaxation(problem, n_units).model, BackendSettings(gap=0.0, threads=1))
    assert out.bound <= ref.objective * (1 + 1e-9) + 1e-9


def test_packing_bound_certifies_three_equal_units_on_two_accelerators() -> None:
    # no transfers: three units of 10 on two accelerators need 20; the work bound says 15
    problem = chain_problem([10.0, 10.0, 10.0], n_accelerators=2)
    out = solve_cpsat(build_packing_relaxation(problem, 3).model, BackendSettings(gap=0.0, threads=1))
    assert out.bound == pytest.approx(20.0)
    assert packed_units(problem, 20.0) == 3
    r = solve(problem, "ip-noncontig", time_limit=5.0, deterministic=True, threads=1, gap=0.0)
    assert r.objective == pytest.approx(20.0)
    assert r.bound == pytest.approx(20.0)


@FAST
@given(problems(max_nodes=6, max_accelerators=3, max_cpus=1, random_objective=True, training=None))
def test_cut_bound_never_exceeds_the_brute_force_optimum(problem) -> None:
    ref = solve(problem, "brute-force")
    if ref.plan is None:
        return
    assert cut_bound(problem) <= ref.objective * (1 + 1e-9) + 1e-9


@FAST
@given(problems(max_nodes=6, max_accelerators=3, max_cpus=1, training=None))
def test_cut_bound_is_at_least_every_units_least_compute(problem) -> None:
    # the arc of a unit to the sink lies in every cut: a capacity lost in the integer
    # scaling (an overflow to 0, say) would show here
    if problem.objective.overlap != "none":
        return
    times = device_times(problem)
    unit_ptr, unit_nodes = colocation_units(problem.graph)
    least = [times[unit_nodes[a:b]].sum(axis=0).min() for a, b in pairwise(unit_ptr.tolist())]
    if not np.isfinite(least).all() or solve(problem, "brute-force").plan is None:
        return  # no plan (a unit no device can run or hold): the bound says 0
    assert cut_bound(problem) >= max(least) * (1 - 1e-6) - 1e-9


def test_cut_bound_sees_transfers_the_work_bound_misses() -> None:
    # two nodes joined by a transfer of 5: apart, each device pays 1 + 5; together 2
    problem = chain_problem([1.0, 1.0], n_accelerators=2, cost=5.0)
    assert cut_bound(problem) == pytest.approx(2.0, rel=1e-6)
    r = solve(problem, "ip-noncontig", time_limit=5.0, deterministic=True, threads=1, gap=0.0)
    assert r.objective == pytest.approx(2.0)
    assert r.stats["cut_bound"] == pytest.approx(2.0, rel=1e-6)
