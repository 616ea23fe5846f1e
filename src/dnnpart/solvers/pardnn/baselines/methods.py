"""Paper 2's baselines as methods for ``--objective makespan``: CP heuristic, LC + GLB, round-robin.

They place onto the accelerators with PARDNN's edge costs (:mod:`dnnpart.solvers.pardnn.method`);
pinned ops go to their device and reference ops follow their variable afterwards.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import MAKESPAN, Problem
from dnnpart.solvers.method import ANY, MethodInfo, Progress, Stopwatch
from dnnpart.solvers.pardnn.baselines.cp_heuristic import cp_heuristic
from dnnpart.solvers.pardnn.baselines.linear_clustering import linear_clustering
from dnnpart.solvers.pardnn.baselines.round_robin import round_robin
from dnnpart.solvers.pardnn.constraints import colocation_leaders, fixed_devices, follow_variables
from dnnpart.solvers.pardnn.inputs import IntArray
from dnnpart.solvers.pardnn.method import makespan_bound, problem_costs
from dnnpart.solvers.result import result_from_plan


def _finish(problem: Problem, device: IntArray, name: str, clock: Stopwatch, **stats: Any) -> SolveResult:
    _, lay = problem_costs(problem)
    fixed = fixed_devices(problem.graph, lay.kinds)
    device = np.where(fixed >= 0, fixed, device)
    follow_variables(device, np.where(fixed < 0, colocation_leaders(problem.graph), -1))
    plan = Plan(assignment=lay.to_global[device].astype(np.int32))
    return result_from_plan(problem, plan, method=name, clock=clock, proven=False,
                            bound=makespan_bound(problem), search_space="placements", **stats)


def solve_cp(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
             **_: Any) -> SolveResult:
    clock = Stopwatch(time_limit)
    costs, lay = problem_costs(problem)
    return _finish(problem, cp_heuristic(costs, lay.k), "cp-heuristic", clock)


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
    clock = Stopwatch(time_limit)
    costs, lay = problem_costs(problem)
    device, finished = linear_clustering(costs, lay.k, time_limit=time_limit)
    return _finish(problem, device, "linear-clustering", clock, lc_finished=finished)


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
    clock = Stopwatch(time_limit)
    costs, lay = problem_costs(problem)
    return _finish(problem, round_robin(costs, lay.k), "round-robin", clock)


ROUND_ROBIN = MethodInfo(
    name="round-robin", func=solve_rr,
    objectives=(MAKESPAN,),
    summary="node v on accelerator v mod K (topological order)",
    guarantee="baseline; no optimality claim",
    source="paper 2 baseline",
    space=ANY,
)


METHODS = (CP_HEURISTIC, LINEAR_CLUSTERING, ROUND_ROBIN)
