"""One measured table cell: run a registered method by name, never let it stop the run."""

from __future__ import annotations

import logging
import math
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from dnnpart.evaluate import evaluate
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.problem import Problem
from dnnpart.solvers.registry import get_method, solve

logger = logging.getLogger(__name__)

#: Note of a cell whose method is not registered (another extra, or not written yet).
NOT_AVAILABLE = "not available"


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """A method's figure on one workload.

    Attributes
    ----------
    value : the evaluator's objective, ``None`` when there is no plan.
    runtime_s : wall time of the method (``None`` when it did not run).
    status : the result status (``"optimal"``, ...), ``"failed"`` or ``"skipped"``.
    note : why there is no value, or what is special about it (memory exceeded, timed out).
    plan : the plan, kept for re-scoring (not written out).
    """

    value: float | None
    runtime_s: float | None = None
    status: str = "skipped"
    note: str = ""
    plan: Plan | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


def cell_from_result(result: SolveResult, problem: Problem | None = None) -> Cell:
    """A cell from a solve result; with ``problem``, the plan is re-scored on it.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> cell_from_result(solve(p, "dp")).value
    5.0
    """
    notes = []
    value: float | None = None
    if result.plan is not None:
        if problem is None:
            value = result.objective
            violations = str(result.stats.get("violations", ""))
        else:
            ev = evaluate(problem, result.plan)
            value = ev.objective
            violations = "; ".join(ev.violations)
        if violations:
            notes.append(f"infeasible: {violations}")
    elif result.status is Status.INFEASIBLE:
        notes.append("no feasible split")
    else:
        notes.append("no plan found")
    if result.stats.get("timed_out"):
        notes.append("time limit reached")
    if value is not None and not math.isfinite(value):
        value = None
    return Cell(value=value, runtime_s=result.wall_time_s, status=result.status.value,
                note="; ".join(notes), plan=result.plan)


#: Whether :func:`run_cell` solves with ``deterministic=True`` (set per reproduction run).
DETERMINISTIC: ContextVar[bool] = ContextVar("DETERMINISTIC", default=True)


def run_cell(
    problem: Problem, method: str, *, time_limit: float | None = None, score_on: Problem | None = None,
    **options: Any,
) -> Cell:
    """Run ``method`` on ``problem``; any failure becomes a cell whose note says why.

    ``score_on`` re-scores the plan on another problem over the same graph (a throughput
    split scored for latency, a contracted graph's split on the original graph).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> run_cell(chain_problem([1, 2], n_accelerators=1), "no-such-method").note
    'not available'
    """
    try:
        info = get_method(method)
    except ValueError:
        return Cell(value=None, note=NOT_AVAILABLE)
    if problem.objective.kind not in info.objectives:
        return Cell(value=None, note=f"{NOT_AVAILABLE} for {problem.objective.kind}")
    started = time.perf_counter()
    try:
        # deterministic: a rerun of the same table gives the same plans
        result = solve(problem, method, time_limit=time_limit, deterministic=DETERMINISTIC.get(),
                       **options)
    except Exception as exc:  # a table records why a method failed and goes on
        logger.info("%s failed on %s: %s", method, problem.name, exc, exc_info=True)
        text = " ".join(str(exc).split())[:200]
        return Cell(value=None, runtime_s=time.perf_counter() - started, status="failed",
                    note=f"failed: {type(exc).__name__}: {text}")
    return cell_from_result(result, score_on)
