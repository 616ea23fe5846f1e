"""Local search (paper 1, section 6 baselines, after [MKA07]).

Start from a random split; repeatedly apply the single reassignment that lowers the
maximum load most, until none does (a local optimum); restart and keep the best. Colocated
nodes move together as one unit, and nodes unsupported on accelerators only move among CPUs.
Moves are scored incrementally (see :mod:`dnnpart.baselines.local_search_kernels`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph.algorithms import colocation_units
from dnnpart.plan import Plan, SolveResult
from dnnpart.pricing.loads import node_times
from dnnpart.problem import Problem
from dnnpart.solvers.method import ANY, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan

#: Moves per kernel call between two clock checks (each move scans every unit and device).
_CHUNK_MOVES = 8


def solve_local_search(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    restarts: int = 10, seed: int | None = 0, max_moves: int = 100_000, **_: Any,
) -> SolveResult:
    """Best of ``restarts`` local searches from random splits.

    Supports the default objective (max(FW+BW), transfers added to compute); other
    objective variants raise ``ValueError``.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> r = solve_local_search(chain_problem([4, 1, 1, 4], n_accelerators=2), seed=1)
    >>> r.objective
    5.0
    """
    from dnnpart.baselines import local_search_kernels as k

    if restarts < 1:
        raise UsageError(f"restarts must be >= 1, got {restarts}")
    if problem.cluster.is_hierarchical:
        raise UsageError("local-search does not model accelerator hierarchies (appendix C.3); "
                         "use dp or brute-force")
    objective = problem.objective
    if objective.overlap != "none" or objective.training != "pipedream":
        raise UsageError("local-search scores the default objective only (overlap=none, pipedream form)")
    clock = Stopwatch(time_limit)
    graph, cluster = problem.graph, problem.cluster
    n, d = graph.n_nodes, cluster.n_devices
    rng = np.random.default_rng(seed)
    is_acc = cluster.is_accelerator()
    # node_time[v, x]: time of v on device x (kind and speed of x)
    node_time = np.column_stack([node_times(graph, cluster, np.full(n, x)) for x in range(d)])
    out_cost, uniform = graph.node_out_cost()
    out_cost = out_cost * 1.0
    scale = cluster.host_link_scale
    if not np.allclose(scale, 1.0):
        raise UsageError("local-search assumes every accelerator on the reference host link")
    unit_ptr, unit_nodes = colocation_units(graph)
    n_units = unit_ptr.shape[0] - 1
    unit_of = np.empty(n, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    finite = np.isfinite(node_time)
    allowed = np.ones((n_units, d), dtype=np.bool_)
    np.logical_and.at(allowed, unit_of, finite)
    if not allowed.any(axis=1).all():
        return result_from_plan(problem, None, method="local-search", clock=clock, proven=True,
                                search_space="all splits")
    capacity = cluster.memory_capacity()
    arrays = (graph.succ_ptr, graph.succ_idx.astype(np.int64), graph.pred_ptr,
              graph.pred_idx.astype(np.int64), graph.edge_cost, node_time, out_cost, uniform, is_acc)

    best_plan, best_value, total_moves = None, math.inf, 0
    for attempt in range(restarts):
        if attempt and clock.expired():
            break
        unit_device = np.array([rng.choice(np.flatnonzero(row)) for row in allowed], dtype=np.int64)
        assign = unit_device[unit_of]
        cnt, loads, memory = k.initial_state(  # type: ignore[no-untyped-call]
            assign, d, graph.succ_ptr, graph.succ_idx.astype(np.int64), graph.edge_cost,
            node_time, out_cost, uniform, is_acc, graph.memory_bytes)
        # moves in chunks so that the clock (time limit, Ctrl-C) is checked between them;
        # the kernel continues from the state it is given
        left = max_moves
        while left > 0:
            step = min(left, _CHUNK_MOVES)
            made = int(k.descend(
                assign, cnt, loads, memory, capacity, graph.memory_bytes, unit_ptr, unit_nodes,
                allowed, *arrays, step))
            total_moves += made
            left -= made
            if made < step or clock.expired():
                break
        feasible = bool(np.all(memory <= capacity * (1 + 1e-12)))
        value = float(loads.max()) if feasible else math.inf
        if value < best_value:
            best_value, best_plan = value, Plan(assignment=assign.astype(np.int32))
        if progress is not None:
            progress.update(f"local search: restart {attempt + 1}/{restarts}, best {best_value:.4g}",
                            (attempt + 1) / restarts)
    return result_from_plan(problem, best_plan, method="local-search", clock=clock, proven=False,
                            search_space="all splits", restarts=restarts, moves=total_moves)


LOCAL_SEARCH = MethodInfo(
    name="local-search", func=solve_local_search,
    summary="random start, best single-unit reassignment until a local optimum; restarts",
    guarantee="heuristic; usually non-contiguous; no bound",
    objectives=("throughput",),
    source="paper 1, section 6 (baseline)",
    options=(
        Option("restarts", int, 10, "random restarts", minimum=1, maximum=10**9),
        Option("seed", int, 0, "random seed", minimum=0, maximum=2**63 - 1),
        Option("max_moves", int, 100_000, "moves per restart", minimum=1),
    ),
    anytime=True,
    time_kind="local-search",
    space=ANY,
    training_forms=("pipedream",),  # its incremental scoring knows the default objective only
    overlap_modes=("none",),
)


METHODS = (LOCAL_SEARCH,)
