"""Threshold descent: better throughput plans where minimising the max load stalls.

On big operator graphs whose optimum is set by communication (op BERT-12: 783 nodes, six
accelerators and a CPU, every device within a few percent of the max load) CP-SAT's search
on ``min max load`` stalls: a step that relieves one overloaded device changes nothing while
another stays at the max, so its local searches see no progress. Descent replaces the max by
a *threshold objective*: with ``tau`` a little below the best max load, minimise the summed
excess ``sum_d max(0, load_d - tau)`` of all devices. Each overloaded device then counts on
its own. A phase ends when the excess reaches 0 (every load under ``tau``: a new best plan,
and ``tau`` moves down) or when the time is up. A phase that *proves* the excess positive
proves ``OPT > tau`` (one load group) and the threshold moves halfway back up.

The program is the full throughput program (same constraints, symmetry breaking included)
with per-device load variables; only the objective changes. It gives plans, not bounds
(except the proofs above); the bound of a run comes from the max-load solve.

Examples
--------
>>> from dnnpart.testing import chain_problem
>>> from dnnpart.plan import Plan
>>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
>>> out = descend(p, Plan(assignment=np.zeros(4, np.int32)), contiguous=False, time_limit=10.0,
...               target=5.0)
>>> evaluate(p, out.plan).objective
5.0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.evaluate import evaluate
from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.solvers.incumbent import offer
from dnnpart.solvers.ip.backend import BackendSettings
from dnnpart.solvers.ip.throughput import ThroughputModel, build_throughput, group_loads
from dnnpart.solvers.method import Stopwatch

#: Relative improvement below which a plan does not count as better (float noise).
_TIE = 1e-9


@dataclass
class DescentResult:
    """The best plan found, a proven lower bound (``-inf``: none) and what each phase did."""

    plan: Plan
    objective: float
    bound: float = -math.inf
    phases: list[dict[str, Any]] = field(default_factory=list)


class _Program:
    """The throughput program in CP-SAT with excess variables over fixable thresholds."""

    def __init__(self, problem: Problem, tm: ThroughputModel) -> None:
        from dnnpart.solvers.ip.cpsat import translate

        self.problem, self.tm = problem, tm
        tm.model.hint.clear()
        self.program = translate(tm.model)
        cp, v = self.program.cp, self.program.variables
        top = math.ceil(max(self.program.ub[j] for j in tm.load_vars) * self.program.scale)
        self.tau = [cp.new_int_var(0, top, "") for _ in tm.groups]
        self.excess: list[list[Any]] = []
        for tau, row in zip(self.tau, tm.device_load_vars, strict=True):
            self.excess.append([cp.new_int_var(0, top, "") for _ in row])
            for e, j in zip(self.excess[-1], row, strict=True):
                cp.add(e >= v[j] - tau)
        cp.minimize(sum(e for row in self.excess for e in row))

    def phase(self, start: Plan, taus: list[float],
              settings: BackendSettings) -> tuple[Plan | None, float, bool, bool]:
        """Minimise the excess over ``taus`` from ``start``.

        Returns the feasible plan of lowest max load seen (or None) with its objective,
        whether excess 0 was reached, and whether a positive excess was proven.
        """
        from dnnpart.solvers.ip.cpsat import run_program

        tm, prog = self.tm, self.program
        sub = prog.cp.clone()
        scaled = [math.floor(t * prog.scale) for t in taus]
        for tau, fixed in zip(self.tau, scaled, strict=True):
            domain = sub.proto.variables[tau.index].domain
            domain[0] = domain[1] = fixed
        tm.set_hint(start)
        sub.clear_hints()
        for j, value in tm.model.hint.items():
            sub.add_hint(sub.get_int_var_from_proto_index(j), prog.scaled(j, value))
        for row, loads, tau in zip(self.excess, tm.device_load_vars, scaled, strict=True):
            for e, j in zip(row, loads, strict=True):
                sub.add_hint(sub.get_int_var_from_proto_index(e.index),
                             max(0, prog.scaled(j, tm.model.hint[j]) - tau))
        # the excess objective is a guide: keep the plan of lowest max load seen on the way
        xs = tm.x[tm.x >= 0].tolist()
        values = np.zeros(len(tm.model.kinds))
        seen: list[tuple[float, Plan]] = []

        def consider(x_values: npt.NDArray[np.float64]) -> None:
            values[xs] = x_values
            plan = tm.decode(values)
            ev = evaluate(self.problem, plan)
            if ev.feasible and (not seen or ev.objective < seen[0][0]):
                seen[:] = [(ev.objective, plan)]

        outcome = run_program(prog, sub, settings, watch=(xs, consider))
        if outcome.values is not None:
            consider(outcome.values[xs])
        objective, plan = seen[0] if seen else (math.inf, None)
        reached = outcome.status == "optimal" and outcome.bound <= 0.0
        # no plan keeps every scaled load <= floor(tau * R): then OPT > floor(tau * R) / R
        # (loads of a plan scale to at most ceil(R * load), see cpsat)
        proven = (outcome.infeasible or outcome.bound > 0.0) and prog.certified
        return plan, objective, reached, proven

    def proven_bound(self, tau: float) -> float:
        """What a proof that the excess over ``tau`` is positive proves about the optimum."""
        return math.floor(tau * self.program.scale) / self.program.scale


def descend(
    problem: Problem, start: Plan, *, contiguous: bool, contiguous_cpus: bool = True,
    time_limit: float, lower: float = 0.0, restart: Plan | None = None, target: float = -math.inf,
    threads: int | None = None, seed: int = 0, ambition: float = 0.125,
    on_improve: Callable[[float, float], None] | None = None,
) -> DescentResult:
    """Lower the max load of ``start`` by threshold descent (see the module docstring).

    Each phase aims at ``best - ambition * (best - lower)`` per load group, where ``lower`` is
    a known lower bound on the optimum (e.g. the max-load solve's). A phase that reaches its
    threshold keeps the ambition; one that is refuted (proven out of reach) or runs out of its
    share of the time (half of what remains) halves it. With ``restart`` (e.g. the plan the
    max-load solve was warm-started from) every second phase searches from there instead of
    from the best plan, to leave the best plan's basin. Stops after
    ``time_limit`` seconds or once the objective is at most ``target``.
    ``on_improve(objective, seconds)`` is called on every better plan.
    """
    clock = Stopwatch(time_limit)
    tm = build_throughput(problem, contiguous=contiguous, contiguous_cpus=contiguous_cpus,
                          device_loads=True)
    prog = _Program(problem, tm)
    ev = evaluate(problem, start)
    out = DescentResult(plan=start, objective=ev.objective)
    floor = max(lower, 0.0)
    while not clock.expired() and out.objective > target and ambition > 1e-4:
        ev = evaluate(problem, out.plan)
        tops = [float(load.max(initial=0.0)) for load in group_loads(ev, tm.groups)]
        # one group: aim between the best and the lower bound; several: shrink each alike
        share = ambition * (out.objective - floor) / max(out.objective, 1e-300)
        taus = [t * (1 - share) for t in tops]
        remaining = time_limit - clock.elapsed
        budget = remaining if remaining < 10.0 else remaining / 2
        settings = BackendSettings(time_limit=budget, gap=0.0, threads=threads, seed=seed + len(out.phases))
        origin = restart if restart is not None and len(out.phases) % 2 == 1 else out.plan
        plan, objective, reached, proven = prog.phase(origin, taus, settings)
        out.phases.append({"thresholds": taus, "reached": reached, "proven_above": proven,
                           "seconds": clock.elapsed})
        if plan is not None and objective < out.objective * (1 - _TIE):
            out.plan, out.objective = plan, objective
            offer(problem, plan, "threshold descent", objective)
            if on_improve is not None:
                on_improve(out.objective, clock.elapsed)
        if proven and len(tm.groups) == 1:
            out.bound = max(out.bound, prog.proven_bound(taus[0]))
            floor = max(floor, out.bound)
        if not reached:
            ambition /= 2
    return out
