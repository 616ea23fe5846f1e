"""OR-Tools CP-SAT backend: integer scaling of times, conservative bound conversion.

CP-SAT works over integers, so time variables and the time coefficients of ``TIME`` rows are
multiplied by a *resolution* ``R`` (integer units per second, chosen by :func:`resolution`):

* If every time coefficient is a multiple of ``2**-k`` for some ``k <= 30`` with the
  horizon below ``2**40`` units, ``R = 2**k`` and the scaled model is exact.
* Otherwise ``R`` is the largest power of two with ``horizon * R <= 2**36`` (a unit is about
  ``1.5e-11`` of the horizon) and coefficients are rounded so that the scaled model is a
  *relaxation*: in a ``>=`` row, 0/1 coefficients are rounded up. A plan's times, rounded
  up to units, then satisfy every row, because ``ceil(a + b) >= ceil(a) + floor(b)`` and
  each ``TIME`` row has at most one time variable with coefficient ``-1``. So the scaled
  optimum is at most ``ceil(R * OPT)`` per objective term, and ``OPT > (B - m) / R`` for the
  solver's bound ``B`` and ``m`` objective terms: that is the bound reported.

The plan's objective is never taken from CP-SAT: the caller re-evaluates the plan exactly.
Memory rows are exact when sizes are integers (bytes); otherwise they are rounded up, which
keeps plans feasible but makes the bound uncertified (reported as such).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.interrupt import note_time_limit, run_blocking
from dnnpart.solvers.ip.backend import BackendOutcome, BackendSettings
from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind

#: Largest scaled horizon for an exact power-of-two resolution, and for a rounded one.
EXACT_HORIZON_UNITS = 2.0**40
ROUNDED_HORIZON_UNITS = 2.0**36
_INT_TOL = 1e-9


def _is_integral(values: np.ndarray) -> bool:
    return bool(np.all(np.abs(values - np.round(values)) <= _INT_TOL * np.maximum(1.0, np.abs(values))))


def resolution(model: MipModel) -> tuple[float, bool]:
    """Units per second for the model's times and whether the scaling is exact.

    Examples
    --------
    >>> from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind
    >>> m = MipModel()
    >>> t, x = m.add_var(VarKind.TIME, ub=10.0), m.add_var(VarKind.BINARY)
    >>> m.add_row([t, x], [1.0, -2.5], lb=0.0, kind=RowKind.TIME)
    >>> resolution(m)
    (2.0, True)
    """
    kinds = model.kinds_array()
    ubs = np.asarray(model.ub)
    horizon = float(ubs[kinds == VarKind.TIME].max(initial=1.0))
    horizon = max(horizon, 1e-300)
    coefs = [r.coef[kinds[r.idx] != VarKind.TIME] for r in model.rows if r.kind == RowKind.TIME]
    values = np.abs(np.concatenate(coefs)) if coefs else np.zeros(0)
    values = values[values > 0]
    for k in range(31):
        scale = 2.0**k
        if horizon * scale > EXACT_HORIZON_UNITS:
            break
        if _is_integral(values * scale):
            return scale, True
    return 2.0 ** math.floor(math.log2(ROUNDED_HORIZON_UNITS / horizon)), False


def _capacity_scale(coef: np.ndarray, cap: float) -> tuple[float, bool]:
    if _is_integral(coef) and float(np.abs(coef).sum()) < 2.0**62:
        return 1.0, True
    total = max(float(np.abs(coef).sum()), cap, 1e-300)
    return 2.0 ** math.floor(math.log2(2.0**50 / total)), False


@dataclass
class CpsatProgram:
    """A :class:`MipModel` written as a CP-SAT model, and how to read its answers back.

    ``variables[j]`` is the CP-SAT variable of the model's variable ``j``; times are in units
    of ``1 / scale`` seconds; ``offset`` is what the bound gives away to rounding (see the
    module docstring); ``certified`` is False when memory rows had to be rounded.
    """

    cp: Any
    variables: list[Any]
    kinds: np.ndarray
    ub: np.ndarray
    scale: float
    exact: bool
    certified: bool
    offset: float

    def scaled(self, j: int, value: float) -> int:
        """``value`` of variable ``j`` as CP-SAT holds it (times rounded up to a unit)."""
        if self.kinds[j] == VarKind.TIME:
            return min(math.ceil(value * self.scale - 1e-9), math.ceil(float(self.ub[j]) * self.scale))
        return round(value)


def translate(model: MipModel) -> CpsatProgram:
    """Write ``model`` (rows, objective and hint) as a CP-SAT model.

    Examples
    --------
    >>> from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind
    >>> m = MipModel()
    >>> t, x = m.add_var(VarKind.TIME, ub=10.0), m.add_var(VarKind.BINARY)
    >>> m.add_row([t, x], [1.0, -2.5], lb=0.0, kind=RowKind.TIME)
    >>> m.objective = [t]
    >>> prog = translate(m)
    >>> prog.scale, len(prog.variables)
    (2.0, 2)
    """
    from ortools.sat.python import cp_model

    scale, exact = resolution(model)
    cp = cp_model.CpModel()
    kinds = model.kinds_array()
    variables: list[Any] = []
    for j, kind in enumerate(model.kinds):
        if kind == VarKind.TIME:
            variables.append(cp.new_int_var(0, math.ceil(model.ub[j] * scale * (1 + 1e-12)), ""))
        else:
            variables.append(cp.new_bool_var(""))
    certified = True
    for row in model.rows:
        coef = row.coef
        lb, ub = row.lb, row.ub
        if row.kind == RowKind.TIME:
            is_time = kinds[row.idx] == VarKind.TIME
            assert np.all(np.abs(coef[is_time]) == 1.0), "TIME rows take +-1 on time variables"
            scaled = coef * scale
            if math.isfinite(lb) and not math.isfinite(ub):
                ints = np.where(is_time, coef, np.ceil(scaled - _INT_TOL * np.maximum(1, np.abs(scaled))))
                lb, ub = math.floor(lb * scale + _INT_TOL), math.inf
            elif math.isfinite(ub) and not math.isfinite(lb):
                ints = np.where(is_time, coef, np.floor(scaled + _INT_TOL * np.maximum(1, np.abs(scaled))))
                lb, ub = -math.inf, math.ceil(ub * scale - _INT_TOL)
            else:
                raise AssertionError("TIME rows are one-sided")
        elif row.kind == RowKind.CAPACITY:
            cap_scale, cap_exact = _capacity_scale(coef, ub)
            certified &= cap_exact
            ints = np.ceil(coef * cap_scale - _INT_TOL)
            # the evaluator allows a relative excess of 1e-12; rounded sizes get none
            ub = math.floor(ub * cap_scale * ((1 + 1e-12) if cap_exact else 1.0))
        else:
            ints = np.round(coef)
            assert _is_integral(coef), "PLAIN rows take integer coefficients"
            lb = math.ceil(lb - _INT_TOL) if math.isfinite(lb) else lb
            ub = math.floor(ub + _INT_TOL) if math.isfinite(ub) else ub
        expr = cp_model.LinearExpr.weighted_sum([variables[i] for i in row.idx.tolist()],
                                                [int(c) for c in ints.tolist()])
        if math.isfinite(lb) and math.isfinite(ub):
            ct = cp.add_linear_constraint(expr, int(lb), int(ub))
        elif math.isfinite(lb):
            ct = cp.add(expr >= int(lb))
        else:
            ct = cp.add(expr <= int(ub))
        if row.enforce >= 0:
            ct.only_enforce_if(variables[row.enforce])
    cp.minimize(cp_model.LinearExpr.sum([variables[i] for i in model.objective]))
    program = CpsatProgram(cp=cp, variables=variables, kinds=kinds, ub=np.asarray(model.ub),
                           scale=scale, exact=exact, certified=certified,
                           offset=0.0 if exact else float(len(model.objective)))
    for j, value in model.hint.items():
        cp.add_hint(variables[j], program.scaled(j, value))
    return program


def solve_cpsat(model: MipModel, settings: BackendSettings) -> BackendOutcome:
    """Solve ``model`` with CP-SAT (see the module docstring for the scaling).

    Examples
    --------
    >>> from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind
    >>> m = MipModel()
    >>> t, x = m.add_var(VarKind.TIME, ub=10.0), m.add_var(VarKind.BINARY)
    >>> m.add_row([t, x], [1.0, -2.5], lb=0.0, kind=RowKind.TIME)
    >>> m.add_row([x], [1.0], lb=1.0, ub=1.0)
    >>> m.objective = [t]
    >>> out = solve_cpsat(m, BackendSettings())
    >>> float(out.values[0]), out.bound
    (2.5, 2.5)
    """
    started = time.perf_counter()
    program = translate(model)
    return run_program(program, program.cp, settings, started=started)


def run_program(program: CpsatProgram, cp: Any, settings: BackendSettings, *,
                started: float | None = None,
                watch: tuple[list[int], Callable[[np.ndarray], None]] | None = None) -> BackendOutcome:
    """Solve ``cp`` (``program.cp`` or a restriction of it, e.g. a clone with fixed domains).

    ``watch = (indices, hook)`` calls ``hook`` with the values of those model variables on
    every solution found (binaries only: times would need unscaling).
    """
    from ortools.sat.python import cp_model

    if settings.node_limit is not None:
        raise UsageError("CP-SAT has no node limit (node_limit is a HiGHS setting)")
    t0 = time.perf_counter() if started is None else started
    scale, offset, kinds = program.scale, program.offset, program.kinds

    solver = cp_model.CpSolver()
    params = solver.parameters
    if settings.time_limit is not None:
        seconds = max(0.01, settings.time_limit - (time.perf_counter() - t0))
        if settings.deterministic:  # the budget as given: translation time varies run to run
            params.max_deterministic_time = settings.time_limit
        else:
            params.max_time_in_seconds = seconds
    params.relative_gap_limit = settings.gap
    params.num_workers = settings.threads or (8 if settings.deterministic else 0)
    params.random_seed = settings.seed
    if settings.deterministic:  # deterministic parallel search: workers take turns in batches
        params.interleave_search = True
    # Ctrl-C goes to dnnpart's stop flag (not CP-SAT's own handler, which would end the search
    # as if it had finished); run_blocking then calls stop_search and keeps the incumbent.
    params.catch_sigint_signal = False

    class _Callback(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            if watch is not None:
                watch[1](np.array([self.value(program.variables[j]) for j in watch[0]], np.float64))
            if settings.on_progress is not None:
                settings.on_progress(self.objective_value / scale,
                                     (self.best_objective_bound - offset) / scale,
                                     time.perf_counter() - t0)

    status = run_blocking(lambda: solver.solve(cp, _Callback()), solver.stop_search)
    if status == cp_model.FEASIBLE or status == cp_model.UNKNOWN:
        note_time_limit()
    response = solver.response_proto
    stats: dict[str, Any] = {"resolution_per_s": scale, "exact_scaling": program.exact,
                             "backend_status": solver.status_name(status)}
    if status == cp_model.INFEASIBLE:
        return BackendOutcome(values=None, infeasible=True, status="infeasible", stats=stats,
                              bound_certified=program.certified)
    values = None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # a restriction may add variables after the model's own: keep the model's
        raw = np.asarray(response.solution, dtype=np.float64)[: kinds.size]
        values = np.where(kinds == VarKind.TIME, raw / scale, raw)
    bound = -math.inf
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) or math.isfinite(response.best_objective_bound):
        bound = (float(response.best_objective_bound) - offset) / scale
    return BackendOutcome(values=values, bound=bound, status=solver.status_name(status).lower(),
                          bound_certified=program.certified, stats=stats)
