"""Everything on one device: the single-accelerator reference of paper 1, Table 2."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnnpart.evaluate import evaluate
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.method import CONTIGUOUS, MethodInfo, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan


def solve_one_accelerator(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    **_: Any,
) -> SolveResult:
    """Best single-device plan: try each accelerator, then each CPU; keep the best feasible.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> solve_one_accelerator(chain_problem([1, 2], n_accelerators=2)).objective
    3.0
    """
    clock = Stopwatch(time_limit)
    n = problem.graph.n_nodes
    best, best_value = None, math.inf
    for dev in (*problem.cluster.accelerators, *problem.cluster.cpus):
        plan = Plan(assignment=np.full(n, dev, dtype=np.int32))
        ev = evaluate(problem, plan)
        if ev.feasible and ev.objective < best_value:
            best, best_value = plan, ev.objective
        if best is not None and problem.cluster.devices[dev].is_accelerator:
            break  # identical accelerators: the first feasible one is as good as any
    return result_from_plan(problem, best, method="one-accelerator", clock=clock, proven=False,
                            search_space="single-device plans")


ONE_ACCELERATOR = MethodInfo(
    name="one-accelerator", func=solve_one_accelerator,
    summary="place the whole graph on one accelerator (memory permitting), else one CPU",
    guarantee="baseline; no optimality claim",
    objectives=("throughput", "latency"),
    source="paper 1, Table 2 (single-accelerator throughput)",
    space=CONTIGUOUS,
)


METHODS = (ONE_ACCELERATOR,)
