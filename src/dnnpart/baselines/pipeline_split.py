"""``pipeline``: a split a linear pipeline schedule can run (GPipe, 1F1B).

The DP methods split the *training* graph, where a backward operator may sit on another device
than its forward partner and the forward pieces need only be contiguous in the graph's partial
order; ``torch.distributed.pipelining`` needs more: each device runs one range of the
model's operators, in device order, and the backward of that range. This method gives exactly
that, optimally among such splits:

* order: the graph's node ids (a topological order, the model's operator order for imports);
* a stage is a range of consecutive *forward* nodes; every backward node goes with its
  forward partner (``Graph.forward_of``), every other node (loss, optimizer updates, inputs)
  with the stage of its latest placed producer (its first consumer's when it has none);
* the split minimises the largest stage compute time (forward + backward, on the first
  accelerator) by an exact DP over range ends; transfers and memory are left out of the search
  (choice: they are what ``evaluate`` then reports, and the plan's objective is that value).

The bound-free result is "optimal among consecutive-range splits by compute time" only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.method import CONTIGUOUS, MethodInfo, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan


def range_split(weights: np.ndarray, k: int) -> list[int]:
    """Ends of ``<= k`` consecutive ranges of ``weights`` minimising the largest range sum.

    Examples
    --------
    >>> range_split(np.array([4.0, 1.0, 1.0, 4.0]), 2)
    [2, 4]
    """
    n = len(weights)
    prefix = np.concatenate([[0.0], np.cumsum(weights)])
    best = prefix.copy()  # best[j]: one range over the first j
    choice = np.zeros((k, n + 1), dtype=np.int64)
    for s in range(1, k):
        new = best.copy()
        for j in range(1, n + 1):
            cand = np.maximum(best[:j], prefix[j] - prefix[:j])
            i = int(np.argmin(cand))
            if cand[i] < new[j]:
                new[j], choice[s, j] = cand[i], i
            else:
                choice[s, j] = j  # no extra cut
        best = new
    ends = [n]
    j = n
    for s in range(k - 1, 0, -1):
        i = int(choice[s, j])
        if 0 < i < j:
            ends.append(i)
            j = i
    return sorted(ends)


def pipeline_assignment(problem: Problem) -> np.ndarray:
    """Assignment of every node for the best consecutive-range split (see module docstring)."""
    g = problem.graph
    n = g.n_nodes
    accs = list(problem.cluster.accelerators) or list(range(problem.cluster.n_devices))
    col = 0 if problem.cluster.devices[accs[0]].is_accelerator else 1
    t = np.asarray(g.compute_time[:, col], dtype=np.float64).copy()
    t[~np.isfinite(t)] = 0.0
    fo = np.asarray(g.forward_of) if g.forward_of is not None else np.full(n, -1)
    back = np.asarray(g.is_backward, dtype=bool)
    # operators only: parameters and graph inputs (no producers) follow their first consumer
    n_pred = np.diff(np.asarray(g.pred_ptr))
    fwd = np.flatnonzero(~back & (fo < 0) & (n_pred > 0))
    weight = t.copy()
    has_fw = fo >= 0
    np.add.at(weight, fo[has_fw], t[has_fw])
    ends = range_split(weight[fwd], len(accs))
    stage = np.full(n, -1, dtype=np.int64)
    start = 0
    for s, end in enumerate(ends):
        stage[fwd[start:end]] = s
        start = end
    has = fo >= 0
    stage[has] = stage[fo[has]]
    order = list(range(n))
    for v in order:  # producers first (ids are topological)
        if stage[v] < 0:
            preds = [int(stage[u]) for u in g.predecessors(int(v)) if stage[u] >= 0]
            if preds:
                stage[v] = max(preds)
    for v in order[::-1]:
        if stage[v] < 0:
            succ = [int(stage[w]) for w in g.successors(int(v)) if stage[w] >= 0]
            stage[v] = min(succ) if succ else 0
    return np.asarray([accs[s] for s in stage], dtype=np.int32)


def solve_pipeline(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    **options: Any,
) -> SolveResult:
    """Best consecutive-range split by stage compute time, scored by ``evaluate``.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> r = solve_pipeline(chain_problem([4, 1, 1, 4], n_accelerators=2))
    >>> r.objective >= 5.0
    True
    """
    if options:
        raise UsageError(f"pipeline: unknown option(s) {sorted(options)}")
    clock = Stopwatch(time_limit)
    plan = Plan(assignment=pipeline_assignment(problem))
    return result_from_plan(
        problem, plan, method="pipeline", clock=clock, proven=False,
        search_space="consecutive ranges of the operator order, one per accelerator, backward colocated",
    )


PIPELINE = MethodInfo(
    name="pipeline", func=solve_pipeline,
    summary="split the operator order into one range per accelerator, backward with its forward "
    "(what torch.distributed.pipelining schedules run)",
    guarantee="heuristic; optimal among consecutive-range splits by compute time only",
    objectives=("throughput",),
    source="ours: the runnable linear pipeline",
    space=CONTIGUOUS,
)


METHODS = (PIPELINE,)
