"""Building a :class:`SolveResult` whose objective comes from the evaluator."""

from __future__ import annotations

import math
from typing import Any

from dnnpart.evaluate import evaluate
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.problem import Problem
from dnnpart.solvers.method import Stopwatch


def result_from_plan(
    problem: Problem, plan: Plan | None, *, method: str, clock: Stopwatch, proven: bool,
    bound: float | None = None, search_space: str = "", provenance: str = "", **stats: Any,
) -> SolveResult:
    """Evaluate ``plan`` and wrap it; the objective is always ``evaluate(problem, plan)``.

    ``proven`` means the search over ``search_space`` finished: no plan then means the
    instance is infeasible there, and a feasible plan is optimal (its objective the bound
    unless a bound is given). A plan that breaks a constraint (a heuristic ignoring memory,
    say) is kept for inspection with status ``UNKNOWN`` and its violations in ``stats``.
    """
    common: dict[str, Any] = {"method": method, "search_space": search_space,
                              "provenance": provenance}
    if plan is None:
        return SolveResult(status=Status.INFEASIBLE if proven else Status.UNKNOWN, plan=None,
                           objective=math.inf, wall_time_s=clock.elapsed, bound=bound,
                           stats=stats, **common)
    ev = evaluate(problem, plan)
    if not ev.feasible:
        stats = {**stats, "violations": "; ".join(ev.violations)}
        status = Status.UNKNOWN
    elif proven:
        status = Status.OPTIMAL
        bound = ev.objective if bound is None else bound
    else:
        status = Status.FEASIBLE
    return SolveResult(status=status, plan=plan, objective=ev.objective,
                       wall_time_s=clock.elapsed, bound=bound, stats=stats, **common)
