"""Paper 2's baselines as methods for ``--objective makespan``: CP heuristic, LC + GLB, round-robin.

They place onto the accelerators with PARDNN's edge costs (:mod:`dnnpart.solvers.pardnn.method`);
pinned ops (and ops the accelerators cannot run) go to their device and reference ops and
colocation groups follow their leader afterwards; an op no device runs makes the instance
infeasible (no plan).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dnnpart.evaluate.diagnose import unrunnable_node
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import MAKESPAN, Problem
from dnnpart.solvers.method import ANY, MethodInfo, Progress, Stopwatch
from dnnpart.solvers.pardnn.baselines.cp_heuristic import cp_heuristic
from dnnpart.solvers.pardnn.baselines.linear_clustering import linear_clustering
from dnnpart.solvers.pardnn.baselines.round_robin import round_robin
from dnnpart.solvers.pardnn.constraints import colocation_leaders, fixed_devices, follow_variables
from dnnpart.solvers.pardnn.inputs import Costs, IntArray
from dnnpart.solvers.pardnn.method import makespan_bound, problem_costs
from dnnpart.solvers.result import result_from_plan


def _solve(problem: Problem, name: str, clock: Stopwatch,
           place: Callable[[Costs, int], tuple[IntArray, dict[str, Any]]]) -> SolveResult:
    """``place(costs, k)`` -> (node -> accelerator, stats), then pins and groups applied.

    An op no device runs: no plan, proven infeasible (as ``--method pardnn``)."""
    common: dict[str, Any] = {"method": name, "clock": clock, "search_space": "placements"}
    nowhere = unrunnable_node(problem)
    if nowhere is not None:
        return result_from_plan(problem, None, proven=True, infeasible=nowhere, **common)
    costs, lay = problem_costs(problem)
    device, stats = place(costs, lay.k)
    fixed = fixed_devices(problem.graph, lay.kinds)
    device = np.where(fixed >= 0, fixed, device)
    follow_variables(device, np.where(fixed < 0, colocation_leaders(problem.graph), -1))
    plan = Plan(assignment=lay.to_global[device].astype(np.int32))
    return result_from_plan(problem, plan, proven=False, bound=makespan_bound(problem), **common,
                            **stats)


def solve_cp(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
             **_: Any) -> SolveResult:
    return _solve(problem, "cp-heuristic", Stopwatch(time_limit), lambda c, k: (cp_heuristic(c, k), {}))


CP_HEURISTIC = MethodInfo(
    name="cp-heuristic", func=solve_cp,
    objectives=(MAKESPAN,),
    summary="critical path on one device, the rest least-loaded in topological order",
    guarantee="baseline; no optimality claim",
    source="paper 2, §5.3.1 (Mayer et al. 2017)",
    space=ANY,
)


def solve_lc(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
             **_: Any) -> SolveResult:
    def place(costs: Costs, k: int) -> tuple[IntArray, dict[str, Any]]:
        device, finished = linear_clustering(costs, k, time_limit=time_limit)
        return device, {"lc_finished": finished}

    return _solve(problem, "linear-clustering", Stopwatch(time_limit), place)


LINEAR_CLUSTERING = MethodInfo(
    name="linear-clustering", func=solve_lc,
    objectives=(MAKESPAN,),
    summary="linear clustering (levels recomputed per path) + GLB, EST-first",
    guarantee="baseline; no optimality claim",
    source="paper 2, §5.3.1 (Kim 1988; Radulescu & van Gemund 1998)",
    space=ANY,
)


def solve_rr(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
             **_: Any) -> SolveResult:
    return _solve(problem, "round-robin", Stopwatch(time_limit), lambda c, k: (round_robin(c, k), {}))


ROUND_ROBIN = MethodInfo(
    name="round-robin", func=solve_rr,
    objectives=(MAKESPAN,),
    summary="node v on accelerator v mod K (topological order)",
    guarantee="baseline; no optimality claim",
    source="paper 2 baseline",
    space=ANY,
)


METHODS = (CP_HEURISTIC, LINEAR_CLUSTERING, ROUND_ROBIN)
