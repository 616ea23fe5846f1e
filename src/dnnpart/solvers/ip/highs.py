"""HiGHS backend (highspy): the model as a MIP with continuous times.

Enforced rows become the big-M rows of paper 1, Lemma 4.1, with each row's ``big_m``.
``RELAXED`` variables stay continuous (their integrality follows from the binaries), memory
rows are divided by their capacity so their coefficients are of order one. The bound is
HiGHS's dual bound, valid up to its tolerances (``mip_feasibility_tolerance`` 1e-6).
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from typing import IO, Any

import numpy as np

from dnnpart.interrupt import request_stop, run_blocking, stop_requested
from dnnpart.solvers.ip.backend import BackendOutcome, BackendSettings
from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind

#: Seconds the child may take to answer a stop (Ctrl-C, a passed limit) before it is killed;
#: below the backstop's grace (:data:`dnnpart.interrupt.GRACE_S`), so the caller still
#: returns its best plan itself.
KILL_AFTER_S = 1.0


def solve_highs(model: MipModel, settings: BackendSettings) -> BackendOutcome:
    """Solve ``model`` with HiGHS, in a child process.

    highspy and OR-Tools each ship a HiGHS shared library with the same soname, and
    whichever loads second fails to resolve its symbols, so HiGHS runs in its own
    interpreter; progress comes back line by line on the child's stderr.

    Examples
    --------
    >>> from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind
    >>> m = MipModel()
    >>> t, x = m.add_var(VarKind.TIME, ub=10.0), m.add_var(VarKind.BINARY)
    >>> m.add_row([t, x], [1.0, -2.5], lb=0.0, kind=RowKind.TIME)
    >>> m.add_row([x], [1.0], lb=1.0, ub=1.0)
    >>> m.objective = [t]
    >>> out = solve_highs(m, BackendSettings())
    >>> round(float(out.values[0]), 6), round(out.bound, 6)
    (2.5, 2.5)
    """
    payload = pickle.dumps((model, replace(settings, on_progress=None)))
    child = subprocess.Popen(
        [sys.executable, "-m", "dnnpart.solvers.ip.highs"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    errors: list[str] = []

    def relay(stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            parts = line.split()
            if len(parts) == 4 and parts[0] == _PROGRESS and settings.on_progress is not None:
                settings.on_progress(float(parts[1]), float(parts[2]), float(parts[3]))
            elif line:
                errors.append(line)

    reader = threading.Thread(target=relay, args=(child.stderr,), daemon=True)
    reader.start()
    try:
        child.stdin.write(payload)
        child.stdin.close()
        # the parent waits in slices: on Ctrl-C or a passed time limit it asks the child to
        # stop (SIGINT: the child cancels HiGHS and sends back its incumbent), and kills it
        # when HiGHS does not hear that in time (it checks for cancels in its simplex, IPM
        # and branch and bound, not in the MIP's root LP): the caller keeps its earlier plans
        stdout = child.stdout
        result = run_blocking(stdout.read, lambda: child.send_signal(signal.SIGINT),
                              kill=child.kill, kill_after_s=KILL_AFTER_S)
    except BaseException:  # never leave the child running
        child.kill()
        raise
    finally:
        child.wait()
    reader.join()
    if (child.returncode != 0 or not result) and stop_requested():
        # stopped before the child could start HiGHS (e.g. a tiny time limit) or killed
        # after not answering a stop: no answer
        return BackendOutcome(values=None, status="interrupted",
                              stats={"backend_status": "Interrupted before an answer"})
    if child.returncode != 0 or not result:
        raise RuntimeError("HiGHS child process failed: " + " / ".join(errors[-5:]))
    outcome: BackendOutcome = pickle.loads(result)
    return outcome


def _solve_in_process(model: MipModel, settings: BackendSettings) -> BackendOutcome:
    import highspy

    started = time.perf_counter()
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    n = model.n_vars
    kinds = model.kinds_array()
    inf = highspy.kHighsInf
    h.addVars(n, np.zeros(n), np.asarray(model.ub, dtype=np.float64))
    integer = np.flatnonzero(kinds == VarKind.BINARY).astype(np.int32)
    if integer.size:
        h.changeColsIntegrality(integer.size, integer,
                                np.full(integer.size, highspy.HighsVarType.kInteger.value, np.uint8))
    lower, upper, starts, index, value = [], [], [], [], []
    nnz = 0
    for row in model.rows:
        idx, coef, lb, ub = row.idx, row.coef, row.lb, row.ub
        if row.kind == RowKind.CAPACITY and math.isfinite(ub) and ub > 0:
            coef, ub = coef / ub, 1.0 + 1e-12
        if row.enforce >= 0:
            # active when the binary is 1; relaxed by big_m when it is 0
            idx = np.append(idx, row.enforce)
            if math.isfinite(lb):
                coef, lb = np.append(coef, -row.big_m), lb - row.big_m
            else:
                coef, ub = np.append(coef, row.big_m), ub + row.big_m
        lower.append(lb if math.isfinite(lb) else -inf)
        upper.append(ub if math.isfinite(ub) else inf)
        starts.append(nnz)
        index.append(idx)
        value.append(coef)
        nnz += idx.size
    if lower:
        h.addRows(len(lower), np.asarray(lower), np.asarray(upper), nnz,
                  np.asarray(starts, np.int32), np.concatenate(index).astype(np.int32),
                  np.concatenate(value).astype(np.float64))
    cost = np.zeros(n)
    np.add.at(cost, np.asarray(model.objective, np.int64), 1.0)
    h.changeColsCost(n, np.arange(n, dtype=np.int32), cost)
    h.setOptionValue("mip_rel_gap", float(settings.gap))
    if settings.time_limit is not None:
        h.setOptionValue("time_limit", max(0.01, settings.time_limit - (time.perf_counter() - started)))
    if settings.threads:
        h.setOptionValue("threads", int(settings.threads))
    h.setOptionValue("random_seed", int(settings.seed))
    if settings.node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(settings.node_limit))
    if model.hint:
        keys = np.fromiter(model.hint.keys(), np.int32)
        vals = np.fromiter(model.hint.values(), np.float64)
        h.setSolution(keys.size, keys, vals)
    def improving(event: Any) -> None:
        out = event.data_out
        print(_PROGRESS, float(out.mip_primal_bound), float(out.mip_dual_bound),
              time.perf_counter() - started, file=sys.stderr, flush=True)

    h.cbMipImprovingSolution.subscribe(improving)
    # a live status between incumbents: the dual bound moves without new solutions (the
    # interrupt callback runs often; one line a second is enough for the CLI's reporter)
    last = [started]

    def polled(event: Any) -> None:
        now = time.perf_counter()
        if now - last[0] >= 1.0:
            last[0] = now
            out = event.data_out
            print(_PROGRESS, float(out.mip_primal_bound), float(out.mip_dual_bound),
                  now - started, file=sys.stderr, flush=True)

    h.cbMipInterrupt.subscribe(polled)
    # cancelSolve is heard only with this on (it adds highspy's interrupt callbacks to the
    # simplex, IPM and branch and bound); without it HiGHS ran on to its time limit
    h.HandleUserInterrupt = True
    run_blocking(h.run, h.cancelSolve)
    status = h.getModelStatus()
    name = h.modelStatusToString(status)
    info = h.getInfo()
    stats: dict[str, Any] = {"backend_status": name, "n_vars": n, "n_rows": model.n_rows}
    if status == highspy.HighsModelStatus.kInfeasible:
        return BackendOutcome(values=None, infeasible=True, status="infeasible", stats=stats)
    values = None
    if info.primal_solution_status == 2:  # kSolutionStatusFeasible
        values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    bound = float(info.mip_dual_bound)
    if not math.isfinite(bound):
        bound = -math.inf
    return BackendOutcome(values=values, bound=bound, status=name.lower(), stats=stats)


_PROGRESS = "@@progress"


def _main() -> None:
    # Ctrl-C in the terminal reaches the child too, and the parent forwards its stop
    # requests as SIGINT: either way HiGHS is cancelled and its incumbent returned.
    signal.signal(signal.SIGINT, lambda signum, frame: request_stop())
    model, settings = pickle.loads(sys.stdin.buffer.read())
    # the result goes to the original stdout; anything HiGHS prints natively (highspy 1.16
    # prints a banner on creating a solver) is sent to stderr, where the parent logs it
    result = os.fdopen(os.dup(1), "wb")
    sys.stdout.flush()
    os.dup2(2, 1)
    outcome = _solve_in_process(model, settings)
    result.write(pickle.dumps(outcome))
    result.flush()


if __name__ == "__main__":
    _main()
