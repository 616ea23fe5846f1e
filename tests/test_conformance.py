"""Every method against the evaluator and exhaustive oracles, on the cases it declares.

The cases are generated from the methods' declarations (:class:`~dnnpart.solvers.method.MethodInfo`):
one seeded problem set per objective kind (throughput with training graphs, its variants,
latency, pipeline, makespan, iteration) and, for every problem, every method that
:meth:`~dnnpart.solvers.method.MethodInfo.supports` it. A pair the declarations do not cover
is not generated (it is checked to be refused instead); a generated case never skips. Per case:

* a returned plan is scored by the evaluator (``result.objective == evaluate(...).objective``),
  OPTIMAL/FEASIBLE plans are feasible, and every plan lies in the declared search space;
* ``bound <= objective``, and the bound is at most the optimum over the declared space;
* no feasible plan beats the optimum of an enumerated space that contains it (all splits,
  contiguous splits, splits in pipeline order, pipelines with replicas, layer-wise strategies);
* INFEASIBLE (a proof) only where nothing in the declared space is feasible;
* where the declaration claims exactness (:meth:`~dnnpart.solvers.method.MethodInfo.proves`)
  the run proves (OPTIMAL, INFEASIBLE, or within its ``gap`` option of a certified bound) and
  an OPTIMAL objective equals the optimum over its declared space.

The optima come from enumerations in this file, scored by ``evaluate`` (the registered
``brute-force`` methods are checked against them like every other method); each enumeration
is checked on a case computed by hand. Known bugs are ``xfail(strict=True)`` on exactly the
cases that meet them -- a crash where :func:`known_crash` says so from the problem, a false
INFEASIBLE where :func:`known_false_infeasible` says so from the missing plan -- so the suite
turns red when a fix lands without the mark being removed.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from tests.latency_orders import latency_optimum

from dnnpart import Objective, Plan, Problem, Status, evaluate
from dnnpart.devices import reference_cluster
from dnnpart.graph import GraphBuilder, colocation_units
from dnnpart.plan import SolveResult
from dnnpart.problem import ITERATION, LATENCY, MAKESPAN, OBJECTIVE_KINDS, PIPELINE, STAGES, THROUGHPUT
from dnnpart.solvers import available_methods, solve
from dnnpart.solvers.method import ANY, BLOCK_CHAIN, CONTIGUOUS, GIVEN, LAYERWISE, PIPELINE_ORDER, MethodInfo
from dnnpart.testing.layer_problems import random_layer_problem
from dnnpart.testing.strategies import (
    RngChooser,
    random_assignment,
    seeded_makespan_problems,
    seeded_pipeline_problems,
    seeded_problems,
)

METHODS = {m.name: m for m in available_methods()}
TOL = 1e-9

# ---------------------------------------------------------------------------------------------
# problem sets: one per objective kind (and the throughput objective's variants)
# ---------------------------------------------------------------------------------------------

PROBLEM_SETS: dict[str, list[Problem]] = {
    # paper 1's default objective, training graphs included (30%)
    "throughput": seeded_problems(36, seed=2024, max_nodes=6, max_accelerators=3, max_cpus=1),
    # overlap modes (appendix C.1) and the GPipe training form
    "variants": seeded_problems(14, seed=77, max_nodes=5, max_accelerators=2, max_cpus=1,
                                random_objective=True, training=None)
    # the training forms differ on training graphs only
    + seeded_problems(10, seed=78, max_nodes=5, max_accelerators=2, max_cpus=1,
                      random_objective=True, training=True),
    "latency": seeded_problems(14, seed=99, max_nodes=5, max_accelerators=2, max_cpus=1,
                               training=None, objective=Objective(kind=LATENCY)),
    # paper 4: simulated pipeline time per sample, schedules and recomputation drawn
    "pipeline": seeded_pipeline_problems(16, seed=404),
    # paper 2: op-level emulation on 2-3 accelerators with memory
    "makespan": seeded_makespan_problems(24, seed=2021),
}
# `make test-all` (-m slow): larger graphs, up to 8 nodes and 4 devices (latency: 6 nodes, as
# its oracle also enumerates every subgraph division and order)
SLOW_SETS: dict[str, list[Problem]] = {
    "slow-throughput": seeded_problems(6, seed=8080, min_nodes=6, max_nodes=8,
                                       max_accelerators=3, max_cpus=1),
    "slow-latency": seeded_problems(4, seed=8181, min_nodes=5, max_nodes=6, max_accelerators=2,
                                    max_cpus=1, training=None, objective=Objective(kind=LATENCY)),
    "slow-makespan": seeded_makespan_problems(4, seed=8282, min_nodes=6, max_nodes=8,
                                              max_accelerators=4),
    "slow-pipeline": seeded_pipeline_problems(4, seed=8383, min_nodes=6, max_nodes=7,
                                              max_accelerators=4),
}
PROBLEM_SETS.update(SLOW_SETS)
# paper 3's layer-wise objective: small random layer graphs on 2 and 4 GPUs
_LAYER_RNG = np.random.default_rng(1717)
PROBLEM_SETS["iteration"] = [random_layer_problem(_LAYER_RNG, max_layers=5, devices=2 + 2 * (i % 2))
                             for i in range(8)]


def _as_stages(problem: Problem, blocks: bool) -> Problem:
    """A ``pipeline`` problem under the ``stages`` objective (same schedule, micro-batches and
    recomputation); with ``blocks``, its forward nodes get module paths of two-node blocks
    (``h.0.a``, ``h.0.b``, ``h.1.a`` ...) so that the units are blocks, not nodes."""
    import dataclasses

    o = problem.objective
    graph = problem.graph
    if blocks:
        fwd = np.flatnonzero(~graph.is_backward).tolist()
        paths = [""] * graph.n_nodes
        for k, v in enumerate(fwd):
            paths[v] = f"h.{k // 2}.{'ab'[k % 2]}"
        graph = dataclasses.replace(graph, module_paths=tuple(paths))
    return dataclasses.replace(problem, graph=graph, objective=Objective(
        kind=STAGES, schedule=o.schedule, microbatches=o.microbatches, recompute=o.recompute))


# a trainer's pipeline: paper 4's tiny problems, units one node each and two-node blocks
PROBLEM_SETS["stages"] = ([_as_stages(p, False) for p in seeded_pipeline_problems(8, seed=505)]
                          + [_as_stages(p, True) for p in seeded_pipeline_problems(8, seed=506)])


def test_every_objective_kind_has_a_problem_set() -> None:
    assert {p.objective.kind for ps in PROBLEM_SETS.values() for p in ps} == set(OBJECTIVE_KINDS)
    for kind in (THROUGHPUT, LATENCY, PIPELINE, MAKESPAN):  # training graphs in every op-level set
        assert any(p.graph.is_training for ps in PROBLEM_SETS.values() for p in ps
                   if p.objective.kind == kind), kind


# ---------------------------------------------------------------------------------------------
# known bugs (issue 27 fixes them; then the strict xfail turns red and the entry goes)
# ---------------------------------------------------------------------------------------------

#: method -> (predicate on the problem, what fails); xfail(strict=True) where the predicate holds
KNOWN_CRASHES: dict[str, tuple[Callable[[Problem], bool], str]] = {}


def known_crash(method: str, problem: Problem) -> str | None:
    """The reason of ``method``'s known crash on ``problem``, ``None`` when it should run."""
    entry = KNOWN_CRASHES.get(method)
    return entry[1] if entry is not None and entry[0](problem) else None


class FalseInfeasibleClaim(AssertionError):
    """A method reported INFEASIBLE (proven: no plan) where the enumeration finds a feasible
    plan in its declared space."""


#: Methods known to report INFEASIBLE when their heuristic search finds no plan though the
#: enumeration finds one: method -> reason (none now; paper 4's methods report UNKNOWN then).
FALSE_INFEASIBLE: dict[str, str] = {}


def known_false_infeasible(method: str, problem: Problem, result: SolveResult, optimum: float) -> str | None:
    """The reason when ``method`` finds no plan on ``problem`` although a feasible one exists in
    its space and is known to claim infeasibility then. Decided by the missing plan, not by the
    claimed status, so the strict xfail turns red once the status says UNKNOWN."""
    if problem.objective.kind != PIPELINE or result.plan is not None or optimum == math.inf:
        return None
    return FALSE_INFEASIBLE.get(method)


# ---------------------------------------------------------------------------------------------
# the cases: (method, set, index) for every pair the method's declaration covers
# ---------------------------------------------------------------------------------------------

def _cases(select: Callable[[MethodInfo, Problem], bool]) -> Iterator[object]:
    for set_name, problems in PROBLEM_SETS.items():
        for index, problem in enumerate(problems):
            for info in METHODS.values():
                if not select(info, problem):
                    continue
                reason = known_crash(info.name, problem)
                marks = [pytest.mark.xfail(strict=True, raises=ValueError, reason=reason)] if reason else []
                if set_name in SLOW_SETS:
                    marks.append(pytest.mark.slow)
                yield pytest.param(info.name, set_name, index, marks=marks,
                                   id=f"{info.name}-{set_name}-{index}")


def _searches(info: MethodInfo, problem: Problem) -> bool:
    return info.space != GIVEN and info.supports(problem)


CASES = list(_cases(_searches))


def test_cases_cover_every_searching_method() -> None:
    """Each method that searches meets a problem of each objective kind it declares."""
    covered = {(c.values[0], PROBLEM_SETS[c.values[1]][c.values[2]].objective.kind) for c in CASES}
    declared = {(m.name, k) for m in METHODS.values() if m.space != GIVEN for k in m.objectives}
    assert declared == covered


# ---------------------------------------------------------------------------------------------
# oracles: enumerations scored by evaluate
# ---------------------------------------------------------------------------------------------

def _unit_of(problem: Problem) -> tuple[np.ndarray, int]:
    """Node -> colocation unit, and the number of units (colocated nodes share a device in
    every feasible plan)."""
    unit_ptr, unit_nodes = colocation_units(problem.graph)
    n_units = len(unit_ptr) - 1
    unit_of = np.empty(problem.graph.n_nodes, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    return unit_of, n_units


def _assignments(problem: Problem) -> Iterator[np.ndarray]:
    unit_of, n_units = _unit_of(problem)
    d = problem.cluster.n_devices
    assert d**n_units <= 70_000, f"{d}^{n_units} assignments: too many for a conformance oracle"
    for combo in itertools.product(range(d), repeat=n_units):
        yield np.asarray(combo, np.int32)[unit_of]


def _quotient_cyclic(problem: Problem, assignment: np.ndarray, *, forward_only: bool) -> bool:
    """Whether the device parts (forward and backward separately) wait on each other in a cycle;
    ``forward_only``: over forward edges only (what the pipeline simulator orders by)."""
    g = problem.graph
    back = g.is_backward
    q = nx.DiGraph()
    for u, v in zip(g.edge_sources().tolist(), g.succ_idx.tolist(), strict=True):
        if forward_only and (back[u] or back[v]):
            continue
        pu, pv = (int(assignment[u]), bool(back[u])), (int(assignment[v]), bool(back[v]))
        if pu != pv:
            q.add_edge(pu, pv)
    return not nx.is_directed_acyclic_graph(q)


def in_pipeline_order(problem: Problem, plan: Plan) -> bool:
    """Contiguous parts that can run in one pipeline order (acyclic quotient of the parts)."""
    as_throughput = problem.with_objective(Objective())
    return bool(evaluate(as_throughput, plan).contiguous.all()) and not _quotient_cyclic(
        problem, plan.assignment, forward_only=False)


@dataclass(frozen=True)
class Optima:
    """Optimum over feasible plans per enumerated space (``inf``: none feasible)."""

    values: dict[str, float]

    def __getitem__(self, space: str) -> float:
        return self.values[space]


def enumerate_splits(problem: Problem) -> Optima:
    """Every assignment of colocation units to devices, scored by ``evaluate``: the optimum
    over all splits, over contiguous ones and over those in pipeline order."""
    best = dict.fromkeys((ANY, CONTIGUOUS, PIPELINE_ORDER), math.inf)
    for a in _assignments(problem):
        ev = evaluate(problem, Plan(assignment=a))
        if not ev.feasible:
            continue
        best[ANY] = min(best[ANY], ev.objective)
        if ev.contiguous.all():
            best[CONTIGUOUS] = min(best[CONTIGUOUS], ev.objective)
            if ev.objective < best[PIPELINE_ORDER] and not _quotient_cyclic(problem, a, forward_only=False):
                best[PIPELINE_ORDER] = ev.objective
    return Optima(best)


def pipeline_plans(problem: Problem) -> Iterator[Plan]:
    """Every plan a pipeline can run: contiguous parts in a chain of forward data flow, each
    idle device either idle or a replica of a used one, every ring order of a replica group."""
    as_throughput = problem.with_objective(Objective())
    d = problem.cluster.n_devices
    for a in _assignments(problem):
        if not evaluate(as_throughput, Plan(assignment=a)).contiguous.all():
            continue
        if _quotient_cyclic(problem, a, forward_only=True):
            continue
        used = sorted(set(a.tolist()))
        idle = [x for x in range(d) if x not in used]
        for choice in itertools.product([None, *used], repeat=len(idle)):
            replica_of = np.arange(d)
            for x, p in zip(idle, choice, strict=True):
                if p is not None:
                    replica_of[x] = p
            if np.array_equal(replica_of, np.arange(d)):
                yield Plan(assignment=a)
                continue
            groups = [np.flatnonzero(replica_of == p) for p in sorted(set(replica_of.tolist()))]
            for orders in itertools.product(*(itertools.permutations(range(len(g))) for g in groups)):
                copy = np.zeros(d, np.int32)
                for g, order in zip(groups, orders, strict=True):
                    copy[g] = order
                yield Plan(assignment=a, replica_of=replica_of, pipeline_copy=copy)


def enumerate_pipelines(problem: Problem) -> Optima:
    """The optimum over :func:`pipeline_plans` (the evaluator must accept every one)."""
    best = math.inf
    for plan in pipeline_plans(problem):
        ev = evaluate(problem, plan)
        if ev.feasible:
            best = min(best, ev.objective)
    return Optima({ANY: best, CONTIGUOUS: best, PIPELINE_ORDER: best})


def block_chain_plans(problem: Problem) -> Iterator[Plan]:
    """Every split of the block units (in order) into ``S`` non-empty runs, ``S`` up to the
    accelerators (and the micro-batches under 1F1B training), run ``i`` on the ``i``-th
    accelerator (written from the space's definition,
    not from the DP)."""
    from dnnpart.graph.blocks import node_units

    units = node_units(problem.graph)
    devices = list(problem.cluster.accelerators) or list(range(problem.cluster.n_devices))
    n_units = units.n_units
    most = min(len(devices), n_units)
    if problem.objective.schedule == "1f1b" and problem.graph.is_training:
        most = min(most, problem.objective.microbatches)  # torch's Schedule1F1B needs m >= S
    for n_stages in range(1, most + 1):
        for cuts in itertools.combinations(range(1, n_units), n_stages - 1):
            bounds = [0, *cuts, n_units]
            stage_of_unit = np.zeros(n_units, dtype=np.int64)
            for i in range(n_stages):
                stage_of_unit[bounds[i]:bounds[i + 1]] = i
            yield Plan(assignment=np.asarray(devices)[stage_of_unit[units.unit]])


def enumerate_block_chains(problem: Problem) -> Optima:
    """The ``stages`` objective over :func:`block_chain_plans`, scored by ``evaluate``."""
    best = math.inf
    for plan in block_chain_plans(problem):
        ev = evaluate(problem, plan)
        if ev.feasible:
            best = min(best, ev.objective)
    return Optima({BLOCK_CHAIN: best})


def enumerate_layerwise(problem: Problem) -> Optima:
    """Eq. 1 over every strategy of the layer-wise configuration space (paper 3)."""
    from dnnpart.evaluate.iteration import iteration_setting
    from dnnpart.layerwise.tables import build_tables, iteration_time

    layers, device, bw = iteration_setting(problem)
    tables = build_tables(layers, bw.shape[0], device, bw)
    best = min(iteration_time(tables, s) for s in itertools.product(*(range(len(x)) for x in tables.spaces)))
    return Optima({LAYERWISE: best / problem.cluster.time_unit_s})


def enumerate_latency(problem: Problem) -> Optima:
    """Latency: the optimum over every subgraph division and order of each accelerator's
    nodes (:mod:`tests.latency_orders`) for all splits; contiguous splits and those in
    pipeline order run one subgraph per accelerator."""
    split = enumerate_splits(problem)
    return Optima({**split.values, ANY: latency_optimum(problem)})


def one_subgraph_each(plan: Plan) -> bool:
    """Whether the plan runs at most one subgraph per device (or lets the evaluator derive them)."""
    if plan.subgraph is None:
        return True
    pairs = set(zip(plan.assignment.tolist(), plan.subgraph.tolist(), strict=True))
    return len(pairs) == len({dev for dev, _ in pairs})


_ENUMERATION = {THROUGHPUT: enumerate_splits, LATENCY: enumerate_latency, MAKESPAN: enumerate_splits,
                PIPELINE: enumerate_pipelines, ITERATION: enumerate_layerwise,
                STAGES: enumerate_block_chains}


@functools.cache
def optima(set_name: str, index: int) -> Optima:
    problem = PROBLEM_SETS[set_name][index]
    return _ENUMERATION[problem.objective.kind](problem)


def in_space(problem: Problem, plan: Plan, space: str) -> bool:
    if space == ANY:
        return True
    if space == LAYERWISE:
        return plan.layer_configs is not None
    if space == CONTIGUOUS:
        return bool(evaluate(problem.with_objective(Objective()), plan).contiguous.all())
    if space == PIPELINE_ORDER:
        return in_pipeline_order(problem, plan)
    if space == BLOCK_CHAIN:
        return any(plan.assignment.tolist() == p.assignment.tolist()
                   for p in block_chain_plans(problem))
    raise AssertionError(f"no membership test for space {space!r}")


def _spaces_containing(problem: Problem, plan: Plan) -> list[str]:
    """The enumerated spaces of ``problem``'s oracle that contain ``plan``."""
    kind = problem.objective.kind
    if kind == ITERATION:
        return [LAYERWISE] if plan.layer_configs is not None else []
    if kind == PIPELINE:
        return [ANY]  # the evaluator runs pipeline plans only, and every one is enumerated
    if kind == STAGES:
        return [BLOCK_CHAIN] if in_space(problem, plan, BLOCK_CHAIN) else []
    if plan.is_replicated:
        return []  # the enumerations place nodes, they do not replicate stages
    if kind == LATENCY and not one_subgraph_each(plan):
        return [ANY]  # the contiguous enumerations run one subgraph per accelerator
    return [s for s in (ANY, CONTIGUOUS, PIPELINE_ORDER) if in_space(problem, plan, s)]


def _close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=TOL, abs_tol=1e-12)


def _at_least(value: float, optimum: float) -> bool:
    return value >= optimum - TOL * max(1.0, abs(optimum)) if math.isfinite(optimum) else value == math.inf


# ---------------------------------------------------------------------------------------------
# the generated conformance test
# ---------------------------------------------------------------------------------------------

def _proof_gap(info: MethodInfo) -> float:
    """The relative gap within which an exact method's finished run is a proof: its ``gap``
    option's default where it has one, else 0."""
    return next((float(o.default) for o in info.options if o.name == "gap"), 0.0)


@functools.cache
def _solved(method: str, set_name: str, index: int) -> SolveResult:
    return solve(PROBLEM_SETS[set_name][index], method)


@pytest.mark.parametrize(("method", "set_name", "index"), CASES)
def test_method_conforms(method: str, set_name: str, index: int, request: pytest.FixtureRequest) -> None:
    problem = PROBLEM_SETS[set_name][index]
    info = METHODS[method]
    result = _solved(method, set_name, index)
    assert result.method == method
    assert result.wall_time_s >= 0

    # the reported objective is the evaluator's; the plan lies in the declared space
    if result.plan is None:
        assert result.status in (Status.INFEASIBLE, Status.UNKNOWN)
        assert result.objective == math.inf
    else:
        ev = evaluate(problem, result.plan)
        assert _close(result.objective, ev.objective), (result.objective, ev.objective)
        if result.status in (Status.OPTIMAL, Status.FEASIBLE):
            assert ev.feasible, ev.violations
        assert in_space(problem, result.plan, info.space), (
            f"{method} declares space {info.space!r}, returned {result.plan.assignment.tolist()}")
    if result.bound is not None and result.plan is not None:
        assert result.bound <= result.objective + TOL * max(1.0, abs(result.objective))
    if result.status is Status.OPTIMAL and result.bound is not None:
        assert _close(result.bound, result.objective)

    # oracles
    best = optima(set_name, index)
    reason = known_false_infeasible(method, problem, result, best[info.space])
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, raises=FalseInfeasibleClaim, reason=reason))
    if result.status is Status.INFEASIBLE and best[info.space] < math.inf:
        raise FalseInfeasibleClaim(f"{method} reports INFEASIBLE; the enumeration finds "
                                   f"{best[info.space]} over {info.space} plans")
    if result.status in (Status.OPTIMAL, Status.FEASIBLE):
        assert result.plan is not None
        for space in _spaces_containing(problem, result.plan):
            assert _at_least(result.objective, best[space]), (
                f"{method} beats the optimum {best[space]} over {space} plans with {result.objective}")
    if result.bound is not None:
        assert result.bound <= best[info.space] + TOL * max(1.0, abs(best[info.space])), (
            f"{method}'s bound {result.bound} exceeds the optimum {best[info.space]} over {info.space}")
    if info.proves(problem):
        # a finished run proves: optimal, infeasible, or (a method with a relative ``gap``
        # option, the integer programs) a plan within that gap of its certified bound
        gap = result.gap
        assert result.status in (Status.OPTIMAL, Status.INFEASIBLE) or (
            result.status is Status.FEASIBLE and gap is not None and gap <= _proof_gap(info) + 1e-9), (
            f"{method} claims exactness but did not prove: {result.status}, gap {gap}")
        assert (result.status is Status.INFEASIBLE) == (best[info.space] == math.inf), (
            f"{method}: {result.status.value}, optimum over {info.space}: {best[info.space]}")
        if result.status is Status.OPTIMAL:
            assert math.isclose(result.objective, best[info.space], rel_tol=TOL, abs_tol=1e-12), (
                f"{method} optimal {result.objective}, enumeration over {info.space}: {best[info.space]}")


# ---------------------------------------------------------------------------------------------
# the other side of the declarations: undeclared pairs are refused, given plans are scored
# ---------------------------------------------------------------------------------------------

REFUSED = list(_cases(lambda info, p: p.objective.kind in info.objectives and not info.supports(p)))


@pytest.mark.parametrize(("method", "set_name", "index"), REFUSED)
def test_undeclared_variants_are_refused(method: str, set_name: str, index: int) -> None:
    """A problem whose objective variant or graph the method does not declare is refused with
    a message, not solved under another objective."""
    with pytest.raises(ValueError, match=r"\w"):
        solve(PROBLEM_SETS[set_name][index], method)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_undeclared_objective_kinds_are_refused(method: str) -> None:
    info = METHODS[method]
    others = [k for k in OBJECTIVE_KINDS if k not in info.objectives]
    for kind in others:
        problem = next(p for ps in PROBLEM_SETS.values() for p in ps if p.objective.kind == kind)
        with pytest.raises(ValueError, match=f"optimises .*not '{kind}'"):
            solve(problem, method)


GIVEN_CASES = list(_cases(lambda info, p: info.space == GIVEN and info.supports(p)))


@pytest.mark.parametrize(("method", "set_name", "index"), GIVEN_CASES)
def test_given_plan_is_scored_unchanged(method: str, set_name: str, index: int, tmp_path: Path) -> None:
    """A method of the ``given`` space (the expert baseline) returns the plan of its split file,
    scored by the evaluator."""
    from dnnpart.io import write_plan

    problem = PROBLEM_SETS[set_name][index]
    rng = np.random.default_rng(index)
    plan = Plan(assignment=random_assignment(RngChooser(rng), problem))
    path = tmp_path / "split.json"
    write_plan(problem, plan, path)
    result = solve(problem, method, split=str(path))
    assert result.plan is not None
    assert result.plan.assignment.tolist() == plan.assignment.tolist()
    ev = evaluate(problem, plan)
    assert _close(result.objective, ev.objective)
    assert result.status is (Status.FEASIBLE if ev.feasible else Status.UNKNOWN)


def test_given_methods_are_generated() -> None:
    assert {c.values[0] for c in GIVEN_CASES} == {m.name for m in METHODS.values() if m.space == GIVEN}


# ---------------------------------------------------------------------------------------------
# the oracles, checked by hand
# ---------------------------------------------------------------------------------------------

def _cyclic_instance() -> Problem:
    """0 (CPU only) -> 2 and 0 -> 3, 1 -> 3; node 3 does not fit on the accelerator.

    The best contiguous split puts {1, 2} on the accelerator and {0, 3} on the CPU (CPU load
    4 + 14 = 18, accelerator 3 + 0.5 in + 0.5 out = 4); it is also the best of all splits
    (0 and 3 must go to the CPU; 1 or 2 there as well costs 22 or more). Both parts are
    contiguous (Definition 3.1), but each needs an output of the other: no pipeline order
    exists. In pipeline order the best is {1} | {0, 2, 3}: 22.
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


CYCLIC_OPTIMUM = {ANY: 18.0, CONTIGUOUS: 18.0, PIPELINE_ORDER: 22.0}


def test_split_enumeration_by_hand() -> None:
    p = _cyclic_instance()
    assert enumerate_splits(p).values == CYCLIC_OPTIMUM
    best = Plan(assignment=[1, 0, 0, 1])
    assert evaluate(p, best).objective == 18.0 and evaluate(p, best).contiguous.all()
    assert not in_pipeline_order(p, best)
    assert in_pipeline_order(p, Plan(assignment=[1, 0, 1, 1]))


EXACT_THROUGHPUT = [m.name for m in METHODS.values() if m.proves(_cyclic_instance())]


@pytest.mark.parametrize("method", EXACT_THROUGHPUT)
def test_exact_methods_agree_on_cyclic_splits(method: str) -> None:
    """Each exact method finds the optimum of its declared space on the cyclic instance."""
    result = solve(_cyclic_instance(), method)
    assert result.status is Status.OPTIMAL
    assert result.objective == CYCLIC_OPTIMUM[METHODS[method].space]


def _fork(*, objective: Objective, n_accelerators: int = 2) -> Problem:
    """0 -> 1 and 0 -> 2 on identical accelerators whose link moves a byte per time unit
    (host link 2 kB/s, 1 ms units): times 1, 3, 3; node 0's output is 2 bytes."""
    b = GraphBuilder()
    b.add_node(0, cpu_time=10.0, acc_time=1.0, memory_bytes=2.0)
    b.add_node(1, cpu_time=10.0, acc_time=3.0, memory_bytes=0.0)
    b.add_node(2, cpu_time=10.0, acc_time=3.0, memory_bytes=0.0)
    b.add_edge(0, 1, cost=0.0)
    b.add_edge(0, 2, cost=0.0)
    cluster = reference_cluster(n_accelerators=n_accelerators, n_cpus=0, memory_bytes=math.inf,
                                host_bandwidth=2e3)
    return Problem(graph=b.build(), cluster=cluster, objective=objective)


def test_makespan_enumeration_by_hand() -> None:
    """All on one accelerator: 1 + 3 + 3 = 7. {0, 1} | {2}: 1 runs 1..4 while 0's output
    travels 1..3 and 2 runs 3..6: 6. {0} | {1, 2}: 1 + 2 + 6 = 9. The optimum is 6."""
    p = _fork(objective=Objective(kind=MAKESPAN))
    assert evaluate(p, Plan(assignment=[0, 0, 0])).objective == pytest.approx(7.0)
    assert evaluate(p, Plan(assignment=[0, 0, 1])).objective == pytest.approx(6.0)
    assert evaluate(p, Plan(assignment=[0, 1, 1])).objective == pytest.approx(9.0)
    assert enumerate_splits(p)[ANY] == pytest.approx(6.0)


def test_pipeline_enumeration_by_hand() -> None:
    """Chain 0 -> 1 (forward times 3 and 1, nothing to transfer), 2 micro-batches, inference.
    One stage on one device: 2 x 4 = 8 per step, 4 per sample. Stages {0} | {1}: 0 runs its
    micro-batches at 0..3 and 3..6, 1 at 3..4 and 6..7: 3.5 per sample. One stage replicated
    on both devices (micro-batch j on copy j mod 2, no all-reduce without training): 4 per
    step, 2 per sample -- the optimum, which only replication reaches."""
    b = GraphBuilder()
    b.add_node(0, cpu_time=30.0, acc_time=3.0)
    b.add_node(1, cpu_time=10.0, acc_time=1.0)
    b.add_edge(0, 1, cost=0.0)
    p = Problem(graph=b.build(), objective=Objective(kind=PIPELINE, microbatches=2),
                cluster=reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=math.inf))
    plans = list(pipeline_plans(p))
    # 4 placements; both nodes on one device, the other its replica, in 2 ring orders each
    assert len(plans) == 4 + 2 * 2
    assert evaluate(p, Plan(assignment=[0, 0])).objective == pytest.approx(4.0)
    assert evaluate(p, Plan(assignment=[0, 1])).objective == pytest.approx(3.5)
    assert evaluate(p, Plan(assignment=[0, 0], replica_of=[0, 0])).objective == pytest.approx(2.0)
    assert enumerate_pipelines(p)[ANY] == pytest.approx(2.0)


def test_pipeline_plans_are_what_the_evaluator_runs() -> None:
    """On the fork, the enumeration yields exactly the plans (without replicas) that the
    pipeline evaluator accepts: it refuses the rest with a ValueError."""
    p = _fork(objective=Objective(kind=PIPELINE, microbatches=2), n_accelerators=3)
    enumerated = {tuple(q.assignment.tolist()) for q in pipeline_plans(p) if not q.is_replicated}
    accepted = set()
    for a in itertools.product(range(3), repeat=3):
        try:
            evaluate(p, Plan(assignment=a))
        except ValueError:
            continue
        accepted.add(a)
    assert enumerated == accepted
    assert (0, 1, 0) in accepted and (0, 1, 2) in accepted


def test_pardnn_on_a_four_node_chain() -> None:
    """One linear cluster, two accelerators: the LC-slicing candidate has fewer clusters than
    devices (it crashed LFLAM once)."""
    from dnnpart.testing import chain_problem

    chain = chain_problem([1.0] * 4, n_accelerators=2).with_objective(Objective(kind=MAKESPAN))
    assert solve(chain, "pardnn").status is Status.FEASIBLE


def test_pardnn_with_an_op_only_the_cpu_runs() -> None:
    b = GraphBuilder()
    b.add_node(0, cpu_time=5.0, acc_time=1.0, memory_bytes=1.0)
    b.add_node(1, cpu_time=5.0, memory_bytes=1.0)  # no accelerator time
    b.add_edge(0, 1, cost=0.0)
    p = Problem(graph=b.build(), objective=Objective(kind=MAKESPAN),
                cluster=reference_cluster(n_accelerators=1, n_cpus=1, memory_bytes=math.inf))
    assert enumerate_splits(p)[ANY] < math.inf  # 0 on the accelerator, 1 on the CPU
    result = solve(p, "pardnn")
    assert result.plan is not None and evaluate(p, result.plan).feasible


PIPELINE_METHODS = sorted(m.name for m in METHODS.values() if PIPELINE in m.objectives
                          and m.space != GIVEN)


def _two_op_inference_chain(*, n_accelerators: int) -> Problem:
    """Two ops of 1 byte and 1 time unit, 2 micro-batches, accelerators of 1.5 bytes."""
    b = GraphBuilder()
    b.add_node(0, cpu_time=10.0, acc_time=1.0, memory_bytes=1.0)
    b.add_node(1, cpu_time=10.0, acc_time=1.0, memory_bytes=1.0)
    b.add_edge(0, 1, cost=0.0)
    return Problem(graph=b.build(), objective=Objective(kind=PIPELINE, microbatches=2),
                   cluster=reference_cluster(n_accelerators=n_accelerators, n_cpus=0,
                                             memory_bytes=1.5))


@pytest.mark.parametrize("method", PIPELINE_METHODS)
def test_pipeline_methods_on_an_inference_chain_that_fits(method: str) -> None:
    """Two 1-byte stages on two accelerators of 1.5 bytes: the simulator holds an inference
    stage's weights only, so {0} | {1} is feasible (1.5 per sample) and the only feasible
    pipeline (one stage, or a replica, holds both weights). Pricing training memory (weights,
    gradients, optimizer states) found no partition and claimed INFEASIBLE."""
    p = _two_op_inference_chain(n_accelerators=2)
    assert evaluate(p, Plan(assignment=[0, 1])).feasible
    assert enumerate_pipelines(p)[ANY] == pytest.approx(1.5)
    result = solve(p, method)
    if result.status is Status.INFEASIBLE:
        raise FalseInfeasibleClaim(f"{method}: {result.stats.get('tried')}")
    assert result.status is Status.FEASIBLE, result.stats
    assert result.objective == pytest.approx(1.5)


def test_pipeline_methods_use_fewer_devices_when_the_graph_is_short() -> None:
    """Two ops on three accelerators with room for one op's weights each: no pipeline using
    all three exists (S * R = 3 needs three ops, or one stage holding both weights), so the
    (S, R) search must leave a device idle: {0} | {1} on two of them."""
    p = _two_op_inference_chain(n_accelerators=3)
    best = enumerate_pipelines(p)[ANY]
    assert best < math.inf
    for method in PIPELINE_METHODS:
        result = solve(p, method)
        assert result.status is Status.FEASIBLE, (method, result.stats)
        assert result.objective == pytest.approx(best), method

