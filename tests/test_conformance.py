"""Every registered method against the evaluator and brute-force oracles.

For each method of ``available_methods()`` (collected at import, so new methods join by
registering) on small seeded random problems:

* a returned plan is scored by the evaluator: ``result.objective == evaluate(...).objective``,
  and OPTIMAL/FEASIBLE plans are feasible;
* ``bound <= objective`` when a bound is given;
* an exact method's OPTIMAL objective equals the brute-force optimum over its search space
  (``brute-force-contiguous`` when the space is contiguous splits, else ``brute-force``);
* no method beats the proven optimum of all splits, nor, with a contiguous plan, of
  contiguous splits; a method whose space is contiguous splits returns contiguous plans.

Methods that do not optimise a problem's objective kind, refuse the instance as too large
or do not support a feature (training graphs, an objective variant) are skipped with the
reason.
"""

from __future__ import annotations

import functools
import itertools
import math

import networkx as nx
import numpy as np
import pytest

from dnnpart import Objective, Plan, Problem, Status, evaluate
from dnnpart.devices import reference_cluster
from dnnpart.errors import ProblemTooLargeError
from dnnpart.graph import GraphBuilder, colocation_units
from dnnpart.plan import SolveResult
from dnnpart.solvers import available_methods, get_method, solve
from dnnpart.testing.layer_problems import random_layer_problem
from dnnpart.testing.strategies import seeded_problems

METHODS = [m.name for m in available_methods()]
ORACLES = {"brute-force", "brute-force-contiguous"}

PROBLEM_SETS: dict[str, list[Problem]] = {
    # the paper's default objective, training graphs included
    "throughput": seeded_problems(36, seed=2024, max_nodes=6, max_accelerators=3, max_cpus=1),
    # overlap modes (appendix C.1) and the GPipe training form
    "variants": seeded_problems(14, seed=77, max_nodes=5, max_accelerators=2, max_cpus=1,
                                random_objective=True, training=None),
    "latency": seeded_problems(14, seed=99, max_nodes=5, max_accelerators=2, max_cpus=1,
                               training=False, objective=Objective(kind="latency")),
    # paper 4: simulated pipeline time per sample (no brute-force oracle: the methods mix
    # partition and replication, which brute-force does not enumerate)
    "pipeline": seeded_problems(10, seed=404, max_nodes=6, max_accelerators=4, max_cpus=0,
                                objective=Objective(kind="pipeline", microbatches=2)),
}
# paper 3's layer-wise objective: small random layer graphs on 2 and 4 GPUs
_LAYER_RNG = np.random.default_rng(1717)
PROBLEM_SETS["iteration"] = [random_layer_problem(_LAYER_RNG, max_layers=5, devices=2 + 2 * (i % 2))
                             for i in range(8)]
CASES = [(name, i) for name, problems in PROBLEM_SETS.items() for i in range(len(problems))]
TOL = 1e-9


@functools.cache
def oracle(set_name: str, index: int, method: str) -> SolveResult:
    return solve(PROBLEM_SETS[set_name][index], method)


def _run(problem: Problem, method: str) -> SolveResult:
    if method == "expert":
        pytest.skip("expert scores a given split file (option split=PATH), it does not search")
    info = get_method(method)
    if problem.objective.kind not in info.objectives:
        pytest.skip(f"{method} does not optimise {problem.objective.kind}")
    try:
        return solve(problem, method)
    except ProblemTooLargeError as exc:
        pytest.skip(f"{method} refuses the instance as too large: {exc}")
    except NotImplementedError as exc:
        pytest.skip(f"{method} does not support this instance: {exc}")
    except ValueError as exc:
        text = str(exc).lower()
        unsupported_feature = (problem.graph.is_training and "training" in text) or (
            problem.objective != Objective(kind=problem.objective.kind)
            and any(w in text for w in ("objective", "overlap", "form", "gpipe"))
        )
        if unsupported_feature:
            pytest.skip(f"{method} does not support this objective/graph: {exc}")
        raise


def _parts_wait_on_each_other(problem: Problem, plan: Plan) -> bool:
    """Whether the device parts (forward and backward separately) form a cyclic quotient,
    i.e. the split cannot be run as a pipeline in any order of its parts."""
    g = problem.graph
    part = [(int(plan.assignment[v]), bool(g.is_backward[v])) for v in range(g.n_nodes)]
    q = nx.DiGraph()
    for u, v in zip(g.edge_sources().tolist(), g.succ_idx.tolist(), strict=True):
        if part[u] != part[v]:
            q.add_edge(part[u], part[v])
    return not nx.is_directed_acyclic_graph(q)


def _pipeline_order_optimum(problem: Problem) -> float:
    """Brute-force optimum over contiguous splits whose parts form an acyclic quotient."""
    unit_ptr, unit_nodes = colocation_units(problem.graph)
    n_units, d = len(unit_ptr) - 1, problem.cluster.n_devices
    unit_of = np.empty(problem.graph.n_nodes, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    best = math.inf
    for combo in itertools.product(range(d), repeat=n_units):
        plan = Plan(assignment=np.asarray(combo)[unit_of])
        ev = evaluate(problem, plan)
        if ev.feasible and ev.contiguous.all() and not _parts_wait_on_each_other(problem, plan):
            best = min(best, ev.objective)
    return best


@pytest.mark.parametrize(("set_name", "index"), CASES, ids=[f"{s}-{i}" for s, i in CASES])
@pytest.mark.parametrize("method", METHODS)
def test_method_conforms(method: str, set_name: str, index: int) -> None:
    problem = PROBLEM_SETS[set_name][index]
    result = _run(problem, method)
    assert result.method == method
    assert result.wall_time_s >= 0
    space = result.search_space.lower()
    contiguous_space = "contiguous" in space and "non-contiguous" not in space

    # the reported objective is the evaluator's
    if result.plan is not None:
        ev = evaluate(problem, result.plan)
        assert result.objective == pytest.approx(ev.objective, rel=1e-9, abs=1e-12)
        if result.status in (Status.OPTIMAL, Status.FEASIBLE):
            assert ev.feasible, ev.violations
            if contiguous_space:
                assert ev.contiguous.all(), f"{method} claims contiguous splits, got {result.plan.assignment}"
    else:
        assert result.status in (Status.INFEASIBLE, Status.UNKNOWN)
        assert result.objective == math.inf
    if result.bound is not None and result.plan is not None:
        assert result.bound <= result.objective + TOL * max(1.0, abs(result.objective))
    if result.status is Status.OPTIMAL and result.bound is not None:
        assert result.bound == pytest.approx(result.objective)

    # oracles
    if method in ORACLES or problem.objective.kind not in get_method("brute-force").objectives:
        return
    if problem.objective.kind == "iteration":
        _check_iteration_oracle(index, result, get_method(method).exact)
        return
    best_all = oracle(set_name, index, "brute-force")
    best_contiguous = oracle(set_name, index, "brute-force-contiguous")
    info = get_method(method)
    if result.status in (Status.OPTIMAL, Status.FEASIBLE):
        assert result.objective >= best_all.objective - TOL * max(1.0, best_all.objective), (
            f"{method} beats the proven optimum over all splits")
        if evaluate(problem, result.plan).contiguous.all():
            assert result.objective >= best_contiguous.objective - TOL * max(1.0, best_contiguous.objective)
    if result.bound is not None and best_all.plan is not None and not contiguous_space:
        assert result.bound <= best_all.objective + TOL * max(1.0, best_all.objective)
    if not info.exact:
        return
    if "pipeline" in space:  # contiguous splits whose parts can run as a pipeline
        value = _pipeline_order_optimum(problem)
        if result.status is Status.INFEASIBLE:
            assert value == math.inf
        if result.status is Status.OPTIMAL:
            assert result.objective == pytest.approx(value, rel=1e-9, abs=1e-12)
        return
    reference = best_contiguous if contiguous_space else best_all
    if result.status is Status.INFEASIBLE:
        assert reference.status is Status.INFEASIBLE or (
            contiguous_space and _pipeline_order_optimum(problem) == math.inf), (
            f"{method} says infeasible, brute force found {reference.objective}")
    if result.status is not Status.OPTIMAL:
        return
    assert result.objective == pytest.approx(reference.objective, rel=1e-9, abs=1e-12), (
        f"{method} optimal {result.objective}, {reference.method} {reference.objective}")


@functools.cache
def _iteration_optimum(index: int) -> float:
    """Eq. 1 brute force over every strategy of the layer-wise configuration space."""
    from dnnpart.evaluate.iteration import iteration_setting
    from dnnpart.layerwise.tables import build_tables, iteration_time

    problem = PROBLEM_SETS["iteration"][index]
    layers, device, bw = iteration_setting(problem)
    tables = build_tables(layers, bw.shape[0], device, bw)
    best = min(iteration_time(tables, s) for s in itertools.product(*(range(len(x)) for x in tables.spaces)))
    return best / problem.cluster.time_unit_s


def _check_iteration_oracle(index: int, result: SolveResult, exact: bool) -> None:
    best = _iteration_optimum(index)
    assert result.objective >= best - TOL * max(1.0, best)
    if exact and result.status is Status.OPTIMAL:
        assert result.objective == pytest.approx(best, rel=1e-9)


def _cyclic_instance() -> Problem:
    """0 (CPU only) -> 2 and 0 -> 3, 1 -> 3; node 3 does not fit on the accelerator.

    The best contiguous split puts {1, 2} on the accelerator and {0, 3} on the CPU (CPU load
    4 + 14 = 18, accelerator 3 + 0.5 in + 0.5 out = 4). Both parts are contiguous
    (Definition 3.1), but each needs an output of the other: no pipeline order exists.
    In pipeline order the best is {1} | {0, 2, 3}: 22.
    """
    b = GraphBuilder()
    b.add_node(0, cpu_time=4.0, memory_bytes=9.0)  # unsupported on accelerators
    b.add_node(1, cpu_time=22.0, acc_time=0.0)
    b.add_node(2, cpu_time=4.0, acc_time=3.0, memory_bytes=1.0)
    b.add_node(3, cpu_time=14.0, acc_time=0.0, memory_bytes=9.0)
    for u, v in ((0, 2), (0, 3), (1, 3)):
        b.add_edge(u, v, cost=0.5)
    return Problem(graph=b.build(),
                   cluster=reference_cluster(n_accelerators=1, n_cpus=1, memory_bytes=4.75))


def test_cyclic_instance_by_hand() -> None:
    p = _cyclic_instance()
    best = solve(p, "brute-force-contiguous")
    assert best.objective == 18.0
    assert evaluate(p, best.plan).contiguous.all()
    assert _parts_wait_on_each_other(p, best.plan)
    assert _pipeline_order_optimum(p) == 22.0


EXACT_CONTIGUOUS = [m.name for m in available_methods()
                    if m.exact and m.name not in ORACLES and "throughput" in m.objectives]


@pytest.mark.parametrize("method", EXACT_CONTIGUOUS)
def test_exact_contiguous_methods_agree_on_cyclic_splits(method: str) -> None:
    p = _cyclic_instance()
    result = _run(p, method)
    space = result.search_space
    if "contiguous" not in space:
        pytest.skip(f"{method} does not search contiguous splits")
    assert result.status is Status.OPTIMAL
    expected = 22.0 if "pipeline" in space else 18.0
    assert result.objective == expected, f"{method}: {result.objective} over {space!r}"
