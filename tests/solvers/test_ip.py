"""Integer programs (paper 1, Figs. 3, 4, 6) against brute force and the evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from tests.workloads import ABSENT_REASON, WORKLOADS_DIR, workloads_present

from dnnpart import Objective, Plan, Problem, Status, evaluate
from dnnpart.solvers import solve
from dnnpart.solvers.ip.cpsat import resolution
from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind
from dnnpart.testing import chain_problem
from dnnpart.testing.strategies import problems

FAST = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BACKENDS = ("cpsat", "highs")


def _exact(problem, method, **kw):
    return solve(problem, method, gap=0.0, **kw)


def _matches_reference(problem, r, ref) -> bool:
    """Assert ``r`` reaches the reference optimum; False when there is no plan to compare."""
    if ref.plan is None:
        assert r.plan is None
        return False
    assert r.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-9)
    assert r.objective == evaluate(problem, r.plan).objective
    return True


@FAST
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1))
def test_contiguous_ip_equals_brute_force(problem) -> None:
    ref = solve(problem, "brute-force-contiguous")
    for backend in BACKENDS:
        r = _exact(problem, "ip", backend=backend)
        if ref.plan is None:
            assert r.plan is None
            continue
        assert r.status is Status.OPTIMAL
        assert r.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-9)
        assert r.objective == evaluate(problem, r.plan).objective
        assert evaluate(problem, r.plan).contiguous.all()


@FAST
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1, random_objective=True, training=None))
def test_noncontiguous_ip_equals_brute_force(problem) -> None:
    ref = solve(problem, "brute-force")
    r = _exact(problem, "ip-noncontig")
    if ref.plan is None:
        assert r.plan is None
        return
    assert r.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-9)
    assert r.bound is not None and r.bound <= r.objective + 1e-9


@FAST
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1, training=False,
                objective=Objective(kind="latency")))
def test_latency_ip_equals_brute_force_over_contiguous_splits(problem) -> None:
    _matches_reference(problem, _exact(problem, "ip"), solve(problem, "brute-force-contiguous"))


@settings(max_examples=8, deadline=None)
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1, training=False,
                objective=Objective(kind="latency")))
def test_latency_with_subgraphs_never_worse_than_contiguous(problem) -> None:
    one = _exact(problem, "ip")
    two = _exact(problem, "ip", subgraphs_per_device=2)
    if one.plan is not None:
        assert two.plan is not None and two.objective <= one.objective + 1e-9
        assert two.objective == evaluate(problem, two.plan).objective


def test_gpipe_objective_on_training_chain() -> None:
    from dnnpart.testing import random_problem

    p = random_problem(np.random.default_rng(3), n_nodes=4, training=True,
                       objective=Objective(training="gpipe"))
    ref = solve(p, "brute-force-contiguous")
    r = _exact(p, "ip")
    assert r.objective == pytest.approx(ref.objective)


def test_warm_start_plan_is_kept_and_bound_valid() -> None:
    p = chain_problem([4, 1, 1, 4], n_accelerators=2, cost=0.3)
    warm = Plan(assignment=[0, 0, 1, 1])
    r = solve(p, "ip", warm_start=warm, time_limit=5)
    assert r.objective <= evaluate(p, warm).objective
    assert r.bound is not None and r.bound <= r.objective


def test_gap_setting_reports_feasible_with_bound() -> None:
    p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    r = solve(p, "ip", gap=0.5, warm_start="none")
    assert r.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert r.bound is not None and r.bound <= r.objective


def test_infeasible_is_a_status() -> None:
    p = chain_problem([1, 1], n_accelerators=1, memory_bytes=0.0)
    from dnnpart.devices import reference_cluster
    from dnnpart.graph import GraphBuilder
    from dnnpart.problem import Problem

    b = GraphBuilder()
    b.add_node(0, acc_time=1.0, cpu_time=1.0, memory_bytes=5.0)
    p = Problem(graph=b.build(), cluster=reference_cluster(n_accelerators=1, n_cpus=0, memory_bytes=1.0))
    for method in ("ip", "ip-noncontig"):
        r = solve(p, method)
        assert r.status is Status.INFEASIBLE and r.plan is None


@pytest.mark.parametrize("bad", [{"backend": "gurobi"}, {"gap": 2.0}, {"threads": 0},
                                 {"subgraphs_per_device": 0}, {"colour": 1}])
def test_bad_options_raise(bad) -> None:
    with pytest.raises(ValueError):
        solve(chain_problem([1, 1], n_accelerators=1), "ip", **bad)


def test_latency_options_rejected_for_throughput() -> None:
    with pytest.raises(ValueError, match="latency"):
        solve(chain_problem([1, 1], n_accelerators=1), "ip", subgraphs_per_device=2)


def test_cpsat_scaling_is_exact_on_binary_fractions_and_conservative_otherwise() -> None:
    m = MipModel()
    t, x = m.add_var(VarKind.TIME, ub=100.0), m.add_var(VarKind.BINARY)
    m.add_row([t, x], [1.0, -0.75], lb=0.0, kind=RowKind.TIME)
    assert resolution(m) == (4.0, True)
    m.add_row([t, x], [1.0, -0.1], lb=0.0, kind=RowKind.TIME)
    scale, exact = resolution(m)
    assert not exact and 100.0 * scale <= 2.0**36


def test_progress_reports_incumbent_and_bound() -> None:
    seen: list[str] = []

    class Recorder:
        def update(self, message: str, fraction: float | None = None) -> None:
            seen.append(message)

    solve(chain_problem([4, 1, 1, 4], n_accelerators=2), "ip", progress=Recorder(), warm_start="none")
    assert seen and "bound" in seen[0]


@pytest.mark.skipif(not workloads_present(), reason=ABSENT_REASON)
def test_contiguous_ip_matches_dp_on_a_layer_workload() -> None:
    from dnnpart.io import read_problem

    p = read_problem(WORKLOADS_DIR / "throughput" / "LayerGraphs" / "bert24_inference.json")
    dp = solve(p, "dp")
    r = solve(p, "ip", threads=1, time_limit=120)
    assert r.objective <= dp.objective * 1.01 + 1e-9
    assert r.bound is not None and r.bound <= dp.objective + 1e-6 * dp.objective
    assert math.isfinite(r.objective)


# -- portfolio: CP-SAT, then HiGHS from CP-SAT's best plan --------------------------------------


def _stalled_cpsat(model, settings):
    """A CP-SAT stand-in that stops at once with nothing: HiGHS must then find the optimum."""
    from dnnpart.solvers.ip.backend import BackendOutcome

    return BackendOutcome(values=None, status="unknown", stats={"backend_status": "UNKNOWN"})


def _solve_with_stalled_cpsat(problem, **options):
    """``ip-noncontig`` with :func:`_stalled_cpsat` in CP-SAT's place (HiGHS left as it is)."""
    from dnnpart.solvers.ip import driver

    real = driver._backend
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "_backend", lambda name: _stalled_cpsat if name == "cpsat" else real(name))
        return solve(problem, "ip-noncontig", **options)


@FAST
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1, random_objective=True, training=None))
def test_portfolio_hands_over_to_highs_and_equals_brute_force(problem) -> None:
    r = _solve_with_stalled_cpsat(problem, backend="portfolio", gap=0.0, time_limit=60.0, root=False)
    if not _matches_reference(problem, r, solve(problem, "brute-force")):
        return
    ran = [phase["backend"] for phase in r.stats.get("portfolio", [])]
    if ran != ["cpsat", "highs"]:  # the cut bound proved the plan optimal before HiGHS
        assert r.stats["cut_bound"] >= r.objective * (1 - 1e-6) - 1e-9
        return
    # HiGHS runs unless the warm start was already proven optimal (the stalled CP-SAT gives none)
    assert ran == ["cpsat", "highs"]
    assert r.bound is not None and r.bound <= r.objective + 1e-9


def test_portfolio_stops_after_cpsat_when_the_gap_is_closed() -> None:
    p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    r = solve(p, "ip-noncontig", backend="portfolio", time_limit=30.0, root=False)
    assert r.status is Status.OPTIMAL and r.objective == 5.0
    assert [phase["backend"] for phase in r.stats["portfolio"]] == ["cpsat"]


def test_portfolio_keeps_the_better_bound_and_plan_of_both_phases() -> None:
    from dnnpart.solvers.ip import driver
    from dnnpart.solvers.ip.backend import BackendOutcome

    p = chain_problem([4, 1, 1, 4], n_accelerators=2)

    def weak_cpsat(model, settings):  # a valid but weak bound, no plan
        return BackendOutcome(values=None, bound=1.0, status="feasible")

    real = driver._backend
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "_backend", lambda name: weak_cpsat if name == "cpsat" else real(name))
        r = solve(p, "ip-noncontig", backend="portfolio", time_limit=30.0, warm_start="none",
                  root=False)
    assert r.objective == 5.0 and r.bound == 5.0
    cpsat, highs = r.stats["portfolio"]
    assert (cpsat["backend"], cpsat["bound"], highs["backend"]) == ("cpsat", 1.0, "highs")


# -- HiGHS's root node before CP-SAT (non-contiguous throughput) ------------------------------


@FAST
@given(problems(max_nodes=5, max_accelerators=2, max_cpus=1, random_objective=True, training=None))
def test_root_plan_reaches_cpsat_and_the_result_equals_brute_force(problem) -> None:
    # CP-SAT stalls with nothing: what the result holds beyond the warm start is the root's
    r = _solve_with_stalled_cpsat(problem, gap=0.0, time_limit=60.0, warm_start="none")
    if not _matches_reference(problem, r, solve(problem, "brute-force")):
        return
    root = r.stats["root"]
    assert r.objective == pytest.approx(root["objective"])
    assert r.stats["root_complete"] and root["bound"] <= r.objective * (1 + 1e-6) + 1e-9


def test_root_is_skipped_on_request_on_contiguous_programs_and_with_highs() -> None:
    p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    assert "root" in solve(p, "ip-noncontig", time_limit=30.0).stats
    assert "root" not in solve(p, "ip-noncontig", time_limit=30.0, root=False).stats
    assert "root" not in solve(p, "ip", time_limit=30.0).stats
    assert "root" not in solve(p, "ip-noncontig", time_limit=30.0, backend="highs").stats


def test_deterministic_budgets_are_shares_of_the_limit_whatever_the_root_took() -> None:
    from dnnpart.solvers.ip import driver
    from dnnpart.solvers.ip.backend import BackendOutcome

    seen: list[tuple[str, object]] = []

    def record(name):
        def backend(model, settings):
            seen.append((name, settings.time_limit if name == "cpsat" else settings.node_limit))
            return BackendOutcome(values=None, status="unknown", stats={"backend_status": "UNKNOWN"})
        return backend

    p = chain_problem([4, 1, 1, 4, 2, 3], n_accelerators=3)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "_backend", record)
        solve(p, "ip-noncontig", time_limit=100.0, deterministic=True, warm_start="none")
    main = 100.0 * (1 - driver.PACKING_SHARE)  # the root's wall seconds are not counted
    assert seen[0] == ("highs", 1)
    assert seen[1][0] == "cpsat" and seen[1][1] == pytest.approx(main)


def test_the_root_plan_becomes_the_hint_only_when_it_beats_the_warm_start_by_the_gap() -> None:
    p = chain_problem([4, 1, 1, 4, 2, 3], n_accelerators=3)
    best = solve(p, "brute-force").plan
    cold = _solve_with_stalled_cpsat(p, time_limit=30.0, warm_start="none", gap=0.0)
    warm = _solve_with_stalled_cpsat(p, time_limit=30.0, warm_start=best, gap=0.0)
    assert cold.stats.get("root_hint") is True
    assert "root_hint" not in warm.stats  # the root cannot beat an optimal warm start
    assert warm.objective == cold.objective == pytest.approx(evaluate(p, best).objective)


def test_a_root_stopped_by_the_clock_is_reported() -> None:
    from dnnpart.solvers.ip import driver
    from dnnpart.solvers.ip.backend import BackendOutcome

    def capped_highs(model, settings):
        return BackendOutcome(values=None, status="time limit reached",
                              stats={"backend_status": "Time limit reached"})

    p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    real = driver._backend
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "_backend", lambda name: capped_highs if name == "highs" else real(name))
        r = solve(p, "ip-noncontig", time_limit=30.0)
    assert r.stats["root_complete"] is False and r.objective == 5.0


def test_cpsat_refuses_a_node_limit() -> None:
    from dnnpart.solvers.ip.backend import BackendSettings
    from dnnpart.solvers.ip.cpsat import solve_cpsat

    m = MipModel()
    m.objective = [m.add_var(VarKind.TIME, ub=1.0)]
    with pytest.raises(ValueError, match="node limit"):
        solve_cpsat(m, BackendSettings(node_limit=1))


def test_portfolio_latency_and_contiguous_ip_equal_the_single_backends() -> None:
    p = chain_problem([3, 1, 2, 2, 1], n_accelerators=2)
    for objective in (Objective(), Objective(kind="latency")):
        q = p.with_objective(objective)
        ref = _exact(q, "ip", backend="cpsat")
        r = _exact(q, "ip", backend="portfolio", time_limit=30.0)
        assert r.objective == pytest.approx(ref.objective)


def test_portfolio_without_a_time_limit_is_cpsat_alone() -> None:
    p = chain_problem([3, 1, 2, 2, 1], n_accelerators=2)
    r = _exact(p, "ip-noncontig", backend="portfolio", root=False)
    assert r.status is Status.OPTIMAL
    assert [phase["backend"] for phase in r.stats["portfolio"]] == ["cpsat"]


def test_latency_warm_start_outside_the_contiguous_space_is_not_returned() -> None:
    # Found by hypothesis: a greedy candidate that splits the CPU's part (n0, n2 on the CPU,
    # n1 on the accelerator, latency 2) was handed back as the IP's plan although the program
    # asks for contiguous CPU parts; the best contiguous split keeps everything on the CPU.
    from dnnpart.devices import reference_cluster
    from dnnpart.graph import build_graph

    inf = np.inf
    graph = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1, inf], [1, 0], [1, inf]],
                        edge_cost=[0, 0])
    problem = Problem(graph=graph, cluster=reference_cluster(n_accelerators=1, n_cpus=1,
                                                             memory_bytes=1e18),
                      objective=Objective(kind="latency"))
    r = _exact(problem, "ip")
    ref = solve(problem, "brute-force-contiguous")
    assert r.objective == pytest.approx(ref.objective)
    assert evaluate(problem, r.plan).contiguous.all()


def test_highs_stopped_while_its_process_starts_returns_no_answer_instead_of_failing() -> None:
    # found by the tiny-time-limit hardening test: the stop reached the child mid-import
    from dnnpart import interrupt
    from dnnpart.solvers.ip.backend import BackendSettings
    from dnnpart.solvers.ip.highs import solve_highs

    m = MipModel()
    t, x = m.add_var(VarKind.TIME, ub=10.0), m.add_var(VarKind.BINARY)
    m.add_row([t, x], [1.0, -2.5], lb=0.0, kind=RowKind.TIME)
    m.add_row([x], [1.0], lb=1.0, ub=1.0)
    m.objective = [t]
    interrupt.request_stop(interrupt.TIME_LIMIT)
    try:
        out = solve_highs(m, BackendSettings(time_limit=0.01))
    finally:
        interrupt.reset()
    assert out.values is None or float(out.values[0]) == pytest.approx(2.5)
