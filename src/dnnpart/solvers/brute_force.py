"""Exhaustive search over all assignments: the oracle for tiny instances."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from dnnpart.errors import ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph.algorithms import colocation_units
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.method import ANY, CONTIGUOUS, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan

MAX_ASSIGNMENTS = 200_000


def _search(problem: Problem, *, contiguous: bool, max_assignments: int,
            clock: Stopwatch) -> tuple[Plan | None, bool]:
    """Best plan over every assignment and whether the search finished (time limit, Ctrl-C)."""
    # Colocated nodes share a device in every feasible plan: enumerate units, not nodes.
    unit_ptr, unit_nodes = colocation_units(problem.graph)
    n_units, d = unit_ptr.shape[0] - 1, problem.cluster.n_devices
    if d**n_units > max_assignments:
        raise ProblemTooLargeError(
            f"brute force would try {d}^{n_units} = {d**n_units:,} assignments "
            f"(limit {max_assignments:,})"
        )
    unit_of = np.empty(problem.graph.n_nodes, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    best_value, best = math.inf, None
    for count, combo in enumerate(itertools.product(range(d), repeat=n_units)):
        if count % 256 == 255 and clock.expired():
            return best, False
        plan = Plan(assignment=np.asarray(combo, dtype=np.int32)[unit_of])
        ev = evaluate(problem, plan)
        if not ev.feasible or (contiguous and not ev.contiguous.all()):
            continue
        if ev.objective < best_value:
            best_value, best = ev.objective, plan
    return best, True


def solve_brute_force(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    max_assignments: int = MAX_ASSIGNMENTS, **_: Any,
) -> SolveResult:
    """Optimal plan by exhaustion of all ``d**n`` assignments.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> solve_brute_force(chain_problem([3, 1, 2], n_accelerators=2)).objective
    3.0
    """
    clock = Stopwatch(time_limit)
    plan, finished = _search(problem, contiguous=False, max_assignments=max_assignments,
                             clock=clock)
    return result_from_plan(problem, plan, method="brute-force", clock=clock, proven=finished,
                            search_space="all splits")


BRUTE_FORCE = MethodInfo(
    name="brute-force", func=solve_brute_force,
    summary="try every assignment of nodes to devices (tiny graphs only)",
    guarantee="optimal over all splits (non-contiguous included)",
    objectives=("throughput", "latency", "makespan"),
    exact=True,
    source="test oracle",
    options=(
        Option("max_assignments", int, MAX_ASSIGNMENTS, "refuse more than this many assignments",
               minimum=1),
    ),
    space=ANY,
)


def solve_brute_force_contiguous(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    max_assignments: int = MAX_ASSIGNMENTS, **_: Any,
) -> SolveResult:
    """Optimal contiguous plan by exhaustion (each device's forward and backward parts
    contiguous, as paper 1 requires).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> solve_brute_force_contiguous(chain_problem([4, 1, 1, 4], n_accelerators=2)).objective
    5.0
    """
    clock = Stopwatch(time_limit)
    plan, finished = _search(problem, contiguous=True, max_assignments=max_assignments,
                             clock=clock)
    return result_from_plan(problem, plan, method="brute-force-contiguous", clock=clock,
                            proven=finished, search_space="contiguous splits")


BRUTE_FORCE_CONTIGUOUS = MethodInfo(
    name="brute-force-contiguous", func=solve_brute_force_contiguous,
    summary="try every assignment, keep those whose device parts are contiguous (tiny graphs)",
    guarantee="optimal over contiguous splits (forward and backward parts separately)",
    objectives=("throughput", "latency"),
    exact=True,
    source="test oracle",
    options=(
        Option("max_assignments", int, MAX_ASSIGNMENTS, "refuse more than this many assignments",
               minimum=1),
    ),
    space=CONTIGUOUS,
)


METHODS = (BRUTE_FORCE, BRUTE_FORCE_CONTIGUOUS)
