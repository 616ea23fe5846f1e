"""Paper 2's baselines as methods for ``--objective makespan``: CP heuristic, LC + GLB, round-robin.

They place onto the accelerators with PARDNN's edge costs (:mod:`dnnpart.solvers.pardnn.method`);
pinned ops go to their device and reference ops follow their variable afterwards. Like
PARDNN they register only where the ``makespan`` objective exists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.baselines.cp_heuristic import cp_heuristic
from dnnpart.baselines.linear_clustering import linear_clustering
from dnnpart.baselines.round_robin import round_robin
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.pardnn.constraints import colocation_leaders, fixed_devices, follow_variables
from dnnpart.solvers.pardnn.inputs import IntArray
from dnnpart.solvers.pardnn.method import makespan_bound, problem_costs, registered
from dnnpart.solvers.registry import Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan


def _finish(problem: Problem, device: IntArray, name: str, clock: Stopwatch, **stats: Any) -> SolveResult:
    _, lay = problem_costs(problem)
    fixed = fixed_devices(problem.graph, lay.kinds)
    device = np.where(fixed >= 0, fixed, device)
    follow_variables(device, np.where(fixed < 0, colocation_leaders(problem.graph), -1))
    plan = Plan(assignment=lay.to_global[device].astype(np.int32))
    return result_from_plan(problem, plan, method=name, clock=clock, proven=False,
                            bound=makespan_bound(problem), search_space="placements", **stats)


@registered("cp-heuristic", summary="critical path on one device, the rest least-loaded in topological order",
          guarantee="baseline; no optimality claim",
          source="paper 2, §5.3.1 (Mayer et al. 2017)")
def solve_cp(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
             **_: Any) -> SolveResult:
    clock = Stopwatch(time_limit)
    costs, lay = problem_costs(problem)
    return _finish(problem, cp_heuristic(costs, lay.k), "cp-heuristic", clock)


@registered("linear-clustering", summary="linear clustering (levels recomputed per path) + GLB, EST-first",
          guarantee="baseline; no optimality claim",
          source="paper 2, §5.3.1 (Kim 1988; Radulescu & van Gemund 1998)")
def solve_lc(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
             **_: Any) -> SolveResult:
    clock = Stopwatch(time_limit)
    costs, lay = problem_costs(problem)
    device, finished = linear_clustering(costs, lay.k, time_limit=time_limit)
    return _finish(problem, device, "linear-clustering", clock, lc_finished=finished)


@registered("round-robin", summary="node v on accelerator v mod K (topological order)",
          guarantee="baseline; no optimality claim", source="paper 2 baseline")
def solve_rr(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
             **_: Any) -> SolveResult:
    clock = Stopwatch(time_limit)
    costs, lay = problem_costs(problem)
    return _finish(problem, round_robin(costs, lay.k), "round-robin", clock)
