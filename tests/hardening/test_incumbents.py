"""A stop keeps the best plan of every phase before it, driven by the method registry.

Every registered method runs on a small problem of its objective with a hook on the incumbent
frame (:mod:`dnnpart.solvers.incumbent`): at the first plan a method offers, the hook asks
for a stop (a Ctrl-C or a passed time limit arriving right then), and in a second run it also
cuts the method there (the backstop landing in a phase that did not hear the stop). Either way
the result must be that plan or a better one, marked ``stopped``, and ``solve -o`` must write
it. No timing: the stop comes at a deterministic point of each run.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from big import write_reference
from clirun import run_cli

from dnnpart import interrupt
from dnnpart.errors import DnnpartError
from dnnpart.evaluate import evaluate
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.problem import ITERATION, Objective, Problem
from dnnpart.solvers import available_methods, get_method, incumbent, registry, solve
from dnnpart.testing import chain_problem, random_problem

METHODS = [m.name for m in available_methods()]


def _problem_for(method: str) -> Problem:
    """A problem every method solves in well under a second (warm numba cache)."""
    kind = get_method(method).objectives[0]
    if kind == ITERATION:
        from dnnpart.cost import resolve_cluster
        from dnnpart.layerwise.graphs import layer_graph

        return Problem(graph=layer_graph("lenet5"), cluster=resolve_cluster("2xP100").cluster,
                       objective=Objective(kind=ITERATION))
    return random_problem(np.random.default_rng(0), n_nodes=5, objective=Objective(kind=kind))


def _stop_at_first_offer(monkeypatch: pytest.MonkeyPatch, *, cut: bool,
                         reason: str = interrupt.INTERRUPTED) -> list[float]:
    """Ask for a stop at the first plan a solve keeps (and with ``cut``, raise the backstop's
    :class:`~dnnpart.interrupt.Stopped` there); returns the list its objective goes into."""
    first: list[float] = []
    keep = incumbent.Frame.keep

    def hooked(self: incumbent.Frame, plan: Plan, source: str, objective: float | None = None) -> bool:
        kept = keep(self, plan, source, objective)
        if kept and not first:
            assert self.best is not None
            first.append(self.best.objective)
            interrupt.request_stop(reason)
            if cut:
                raise interrupt.Stopped()
        return kept

    monkeypatch.setattr(incumbent.Frame, "keep", hooked)
    return first


def _assert_kept(problem: Problem, result: SolveResult, first: float, reason: str) -> None:
    assert result.stats.get("stopped") == reason, result.stats
    assert result.plan is not None, result.stats
    assert result.objective <= first * (1 + 1e-9)  # the first incumbent, or a better plan
    ev = evaluate(problem, result.plan)
    assert ev.feasible and result.objective == pytest.approx(ev.objective)
    assert result.status in (Status.FEASIBLE, Status.OPTIMAL)
    if result.status is Status.OPTIMAL:  # only when its bound proves it
        assert result.bound == pytest.approx(result.objective)


@pytest.mark.parametrize("method", METHODS)
def test_a_stop_after_the_first_incumbent_returns_it(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = _problem_for(method)
    first = _stop_at_first_offer(monkeypatch, cut=False)
    try:
        result = solve(problem, method, time_limit=30)
    except (DnnpartError, ValueError):  # refused (expert without its split): no phases ran
        assert not first
        return
    if not first:  # no plan before it finishes (one phase, or none offered): nothing stopped it
        assert "stopped" not in result.stats
        return
    _assert_kept(problem, result, first[0], interrupt.INTERRUPTED)
    # the same run, cut right there: the plan comes from the registry's frame
    first = _stop_at_first_offer(monkeypatch, cut=True)
    result = solve(problem, method, time_limit=30)
    _assert_kept(problem, result, first[0], interrupt.INTERRUPTED)
    assert "kept when the run was stopped" in result.provenance


def test_the_methods_with_phases_offer_their_incumbents(monkeypatch: pytest.MonkeyPatch) -> None:
    # the survey behind the test above: the methods whose runs have several phases, and which
    # hand over each phase's plan (a method missing here runs the test above to its end)
    offering = []
    for method in ("dp", "ip", "ip-noncontig"):
        first = _stop_at_first_offer(monkeypatch, cut=False)
        solve(_problem_for(method), method, time_limit=30)
        offering += [method] if first else []
    assert offering == ["dp", "ip", "ip-noncontig"]


@pytest.mark.parametrize("method,cut,reason,code", [
    ("ip-noncontig", True, interrupt.INTERRUPTED, 130),  # Ctrl-C in a phase after the warm start
    ("dp", False, interrupt.TIME_LIMIT, 0),  # the limit passing after DPL's bound
])
def test_the_cli_writes_the_kept_incumbent(method: str, cut: bool, reason: str, code: int,
                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    graph = write_reference(random_problem(np.random.default_rng(3), n_nodes=6), tmp_path / "g.json")
    out_path = tmp_path / "plan.json"
    first = _stop_at_first_offer(monkeypatch, cut=cut, reason=reason)
    exit_code, _, err = run_cli(["solve", str(graph), "-m", method, "-o", str(out_path)])
    assert exit_code == code, err
    assert first and out_path.exists(), err
    written = json.loads(out_path.read_text())
    assert written["stopped"] == reason
    assert written["objective"] <= first[0] * (1 + 1e-9)
    if reason == interrupt.INTERRUPTED:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("interrupted; best plan"), err
        assert str(out_path) in lines[0]


def _stub(monkeypatch: pytest.MonkeyPatch, func: Any) -> None:
    info = registry.get_method("greedy")
    monkeypatch.setitem(registry._METHODS, "greedy",
                        registry.MethodInfo(**{**{f: getattr(info, f) for f in info.__slots__},
                                               "func": func}))


@pytest.mark.parametrize("stopped", [True, False])
def test_a_phase_that_drops_its_incumbent_is_overruled_only_when_stopped(
        stopped: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = chain_problem([4, 1, 1, 4], n_accelerators=2)
    good = Plan(assignment=np.array([0, 0, 1, 1], np.int32))  # 5
    worse = Plan(assignment=np.array([0, 0, 0, 0], np.int32))  # 10

    def dropping(p: Problem, /, **kwargs: Any) -> SolveResult:
        incumbent.offer(p, good, "a first phase")
        if stopped:
            interrupt.request_stop(interrupt.INTERRUPTED)
        return SolveResult(status=Status.FEASIBLE, plan=worse, objective=10.0, method="greedy",
                           wall_time_s=0.0)

    _stub(monkeypatch, dropping)
    result = solve(problem, "greedy")
    if stopped:
        assert result.objective == 5.0 and result.stats["stopped"] == interrupt.INTERRUPTED
        assert result.provenance.startswith("a first phase")
    else:  # a finished run's result is the method's own, even a bad one: tests must see it
        assert result.objective == 10.0 and "stopped" not in result.stats


def test_only_feasible_plans_of_the_solved_problem_are_kept() -> None:
    problem = random_problem(np.random.default_rng(0), n_nodes=5, memory_fraction=0.3)
    other = dataclasses.replace(problem)  # equal, not the same: a derived problem
    over = Plan(assignment=np.zeros(5, np.int32))  # everything on one accelerator: over its memory
    fits = Plan(assignment=np.full(5, 2, np.int32))  # everything on the CPU
    assert not evaluate(problem, over).feasible and evaluate(problem, fits).feasible
    with incumbent.frame(problem) as kept:
        incumbent.offer(other, fits, "another problem's")
        incumbent.offer(problem, over, "over memory")
        with incumbent.frame(other) as nested:  # a nested solve has its own
            incumbent.offer(other, fits, "nested")
    assert kept.best is None and nested.best is not None
    incumbent.offer(problem, fits, "outside any solve")  # no frame: nothing happens


def test_a_backstop_while_a_solver_answers_its_stop_keeps_the_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    main, asked = threading.get_ident(), threading.Event()

    def stop() -> None:  # the backstop lands in the waiting thread right after the stop hook
        asked.set()
        interrupt._raise_in(main, interrupt.Stopped)

    interrupt.request_stop(interrupt.INTERRUPTED)
    try:  # the solver answers once asked
        assert interrupt.run_blocking(lambda: asked.wait(10) and "incumbent", stop) == "incumbent"
        monkeypatch.setattr(interrupt, "GRACE_S", 0.0)  # a solver that did not answer in time
        release = threading.Event()
        with pytest.raises(interrupt.Stopped):
            interrupt.run_blocking(lambda: release.wait(10), stop)
        release.set()
    finally:
        interrupt.reset()


def test_a_solver_that_does_not_hear_its_stop_is_killed() -> None:
    gone = threading.Event()
    interrupt.request_stop(interrupt.INTERRUPTED)
    try:
        answer = interrupt.run_blocking(lambda: gone.wait(30) and "no answer", lambda: None,
                                        kill=gone.set, kill_after_s=0.05)
    finally:
        interrupt.reset()
    assert answer == "no answer" and gone.is_set()
