"""The best plan a running solve has found so far, for a stop that cuts the solve short.

:func:`~dnnpart.solvers.registry.solve` opens a *frame* for each solve (:func:`frame`). A
method whose run has phases (a warm start, a root node, branch and bound, a descent, a
search that improves step by step) hands each phase's plan to :func:`offer`; the frame keeps
the best feasible one. When a stop (Ctrl-C or a passed time limit) ends the solve, the
registry returns the frame's plan where the method returned none or a worse one: the
backstop (:class:`dnnpart.interrupt.Stopped`) cut a call that did not hear the stop flag, or
a phase stopped midway dropped what the phases before it had found.

Choices (the papers describe runs that finish; they are silent on stops):

* Only plans of the frame's own problem (the same object) count: a method that solves a
  derived problem inside (the latency program's throughput warm starts) offers nothing to
  it. A nested :func:`~dnnpart.solvers.registry.solve` (a warm start named by an option) has
  a frame of its own.
* Offers are evaluated when made (unless the caller passes the evaluator's objective), so
  the kept plan's objective is the evaluator's; an infeasible plan is not kept. Methods offer
  at phase ends and on improvements, a few times a run, so this costs a few evaluations.
* Frames are per thread: the thread that runs the solve offers.
* A result of a solve that was not stopped is never replaced: a method that finishes with a
  worse plan than it offered has a bug the tests should see.

Examples
--------
>>> import numpy as np
>>> from dnnpart.testing import chain_problem
>>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
>>> with frame(p) as kept:
...     offer(p, Plan(assignment=np.array([0, 0, 0, 1], np.int32)), "first phase")
...     offer(p, Plan(assignment=np.array([0, 0, 1, 1], np.int32)), "second phase")
...     offer(p, Plan(assignment=np.array([1, 1, 1, 1], np.int32)), "worse")
>>> kept.best.objective, kept.best.source
(5.0, 'second phase')
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from dnnpart.evaluate import evaluate
from dnnpart.plan import Plan
from dnnpart.problem import Problem

__all__ = ["Frame", "Incumbent", "frame", "offer"]


@dataclass(frozen=True, slots=True)
class Incumbent:
    """A feasible plan, its evaluated objective and the phase that found it."""

    plan: Plan
    objective: float
    source: str


class Frame:
    """The incumbent of one running solve of ``problem``."""

    __slots__ = ("best", "problem")

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.best: Incumbent | None = None

    def keep(self, plan: Plan, source: str, objective: float | None = None) -> bool:
        """Keep ``plan`` when it is feasible and better than the kept one; returns whether
        it was kept."""
        if objective is None:
            ev = evaluate(self.problem, plan)
            if not ev.feasible:
                return False
            objective = ev.objective
        if self.best is not None and not objective < self.best.objective:
            return False
        self.best = Incumbent(plan, float(objective), source)
        return True


_local = threading.local()


def _stack() -> list[Frame]:
    stack: list[Frame] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextlib.contextmanager
def frame(problem: Problem) -> Iterator[Frame]:
    """Open the frame of one solve of ``problem``; offers made inside go to it."""
    opened = Frame(problem)
    stack = _stack()
    stack.append(opened)
    try:
        yield opened
    finally:
        # by identity: a frame left behind by an interrupted nested solve must not stay on top
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is opened:
                del stack[i:]
                break


def offer(problem: Problem, plan: Plan | None, source: str, objective: float | None = None) -> None:
    """Offer ``plan`` of ``problem`` as the running solve's incumbent (see the module
    docstring); ``source`` names the phase that found it (shown as the plan's provenance
    when a stop keeps it). ``objective``, when given, must be ``evaluate(problem,
    plan).objective`` of a feasible plan. Nothing happens outside a solve or for another
    problem."""
    stack = _stack()
    if plan is None or not stack or stack[-1].problem is not problem:
        return
    stack[-1].keep(plan, source, objective)

