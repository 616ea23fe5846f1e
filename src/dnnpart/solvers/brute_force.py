"""Exhaustive search over all assignments: the oracle for tiny instances.

For the latency objective (paper 1, section 4) a plan is more than an assignment: each
accelerator runs its nodes as contiguous subgraphs, one after another, in an order the plan
gives (:attr:`~dnnpart.plan.Plan.subgraph`). ``brute-force`` then enumerates, for every
assignment, every division of each accelerator's nodes into contiguous subgraphs and every
order of them (:func:`latency_plans`), so its optimum is over all the plans the evaluator
scores; ``subgraphs_per_device=q`` restricts it to the integer program's space of at most
``q`` subgraphs per accelerator (on training graphs, ``q`` forward ones followed by ``q``
backward ones). Orders in which a device's subgraph feeds an earlier one of the same device
are skipped (they deadlock, which the evaluator would score ``inf``); the others are scored.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dnnpart.errors import ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph.algorithms import colocation_units
from dnnpart.graph.core import Graph
from dnnpart.graph.kernels import contiguity_violation
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import LATENCY, Problem
from dnnpart.solvers.method import ANY, CONTIGUOUS, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan

MAX_ASSIGNMENTS = 200_000


def _units(problem: Problem) -> tuple[np.ndarray, int]:
    """Node -> colocation unit and the number of units: colocated nodes share a device in
    every feasible plan, so the search enumerates units, not nodes."""
    unit_ptr, unit_nodes = colocation_units(problem.graph)
    n_units = unit_ptr.shape[0] - 1
    unit_of = np.empty(problem.graph.n_nodes, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    return unit_of, n_units


def _search(problem: Problem, *, contiguous: bool, max_assignments: int,
            clock: Stopwatch, subgraphs: int | None = None) -> tuple[Plan | None, bool]:
    """Best plan over every assignment (and, for latency without ``contiguous``, every
    subgraph division and order) and whether the search finished (time limit, Ctrl-C)."""
    unit_of, n_units = _units(problem)
    d = problem.cluster.n_devices
    if d**n_units > max_assignments:
        raise ProblemTooLargeError(
            f"brute force would try {d}^{n_units} = {d**n_units:,} assignments "
            f"(limit {max_assignments:,})"
        )
    orders = problem.objective.kind == LATENCY and not contiguous
    if orders:
        total = count_latency_plans(problem, subgraphs)
        if total > max_assignments:
            raise ProblemTooLargeError(
                f"brute force would score {total:,} plans (assignments times subgraph divisions "
                f"and orders; limit {max_assignments:,})")
    best_value, best = math.inf, None
    plans = (latency_plans(problem, subgraphs) if orders else
             (Plan(assignment=np.asarray(c, dtype=np.int32)[unit_of])
              for c in itertools.product(range(d), repeat=n_units)))
    for count, plan in enumerate(plans):
        if count % 256 == 255 and clock.expired():
            return best, False
        ev = evaluate(problem, plan)
        if not ev.feasible or (contiguous and not ev.contiguous.all()):
            continue
        if ev.objective < best_value:
            best_value, best = ev.objective, plan
    return best, True


def latency_plans(problem: Problem, subgraphs: int | None = None) -> Iterator[Plan]:
    """Every latency plan: each assignment of colocation units to devices with each division
    of every accelerator's nodes into contiguous subgraphs, in each order that does not feed
    an earlier subgraph of the same device.

    ``subgraphs``: at most this many subgraphs per accelerator (on training graphs this many
    forward subgraphs, then this many backward ones, as in the integer program); ``None``: no
    limit.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.problem import Objective
    >>> p = chain_problem([1, 1], n_accelerators=1).with_objective(Objective(kind="latency"))
    >>> [pl.subgraph.tolist() for pl in latency_plans(p)]  # a chain 0 -> 1 on one accelerator
    [[0, 1], [0, 0]]
    """
    graph, cluster = problem.graph, problem.cluster
    unit_of, n_units = _units(problem)
    is_acc = cluster.is_accelerator()
    for combo in itertools.product(range(cluster.n_devices), repeat=n_units):
        a = np.asarray(combo, dtype=np.int32)[unit_of]
        per_device = [_orderings(graph, np.flatnonzero(a == dev), subgraphs)
                      for dev in range(cluster.n_devices) if is_acc[dev] and (a == dev).any()]
        for choice in itertools.product(*per_device):
            ordinal = np.zeros(graph.n_nodes, np.int32)
            for blocks in choice:
                for k, block in enumerate(blocks):
                    ordinal[list(block)] = k
            yield Plan(assignment=a, subgraph=ordinal)


def count_latency_plans(problem: Problem, subgraphs: int | None = None) -> int:
    """How many plans :func:`latency_plans` yields, counted without scoring them.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.problem import Objective
    >>> p = chain_problem([1, 1], n_accelerators=1).with_objective(Objective(kind="latency"))
    >>> count_latency_plans(p) == len(list(latency_plans(p)))
    True
    """
    graph, cluster = problem.graph, problem.cluster
    unit_of, n_units = _units(problem)
    is_acc = cluster.is_accelerator()
    total = 0
    for combo in itertools.product(range(cluster.n_devices), repeat=n_units):
        a = np.asarray(combo, dtype=np.int32)[unit_of]
        count = 1
        for dev in range(cluster.n_devices):
            if is_acc[dev] and (a == dev).any():
                count *= len(_orderings(graph, np.flatnonzero(a == dev), subgraphs))
        total += count
    return total


def _orderings(graph: Graph, nodes: np.ndarray, limit: int | None) -> list[tuple[tuple[int, ...], ...]]:
    """The ordered divisions of one accelerator's ``nodes`` into contiguous subgraphs (see
    :func:`latency_plans`); on training graphs with a ``limit``, forward subgraphs first."""
    if limit is None or not graph.is_training:
        return _ordered_blocks(graph, tuple(nodes.tolist()), limit)
    back = graph.is_backward[nodes]
    forward = _ordered_blocks(graph, tuple(nodes[~back].tolist()), limit)
    backward = _ordered_blocks(graph, tuple(nodes[back].tolist()), limit)
    return [f + b for f in forward for b in backward]


def _ordered_blocks(graph: Graph, nodes: tuple[int, ...], limit: int | None
                    ) -> list[tuple[tuple[int, ...], ...]]:
    """Sequences of disjoint contiguous blocks covering ``nodes`` (at most ``limit`` of them)
    in which no block has a predecessor in a later block."""
    if not nodes:
        return [()]
    if limit is not None and limit < 1:
        return []
    rest = set(nodes)
    out: list[tuple[tuple[int, ...], ...]] = []
    for r in range(1, len(nodes) + 1):
        for first in itertools.combinations(nodes, r):
            later = rest.difference(first)
            if not _contiguous(graph, first) or _fed_by(graph, first, later):
                continue
            tail = tuple(v for v in nodes if v in later)
            for seq in _ordered_blocks(graph, tail, None if limit is None else limit - 1):
                out.append((first, *seq))
    return out


def _contiguous(graph: Graph, block: Sequence[int]) -> bool:
    member = np.zeros(graph.n_nodes, np.bool_)
    member[list(block)] = True
    return bool(contiguity_violation(graph.n_nodes, graph.succ_ptr, graph.succ_idx, member)[0] < 0)


def _fed_by(graph: Graph, block: Sequence[int], later: set[int]) -> bool:
    """Whether a node of ``later`` has an edge into ``block`` (that order would deadlock)."""
    return any(int(u) in later for v in block for u in graph.predecessors(v))


def solve_brute_force(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    max_assignments: int = MAX_ASSIGNMENTS, subgraphs_per_device: int | None = None, **_: Any,
) -> SolveResult:
    """Optimal plan by exhaustion of all ``d**n`` assignments (for latency, of every
    subgraph division and order too: see the module docstring).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> solve_brute_force(chain_problem([3, 1, 2], n_accelerators=2)).objective
    3.0
    """
    clock = Stopwatch(time_limit)
    plan, finished = _search(problem, contiguous=False, max_assignments=max_assignments,
                             clock=clock, subgraphs=subgraphs_per_device)
    space = "all splits"
    if problem.objective.kind == LATENCY:
        q = ("any number of" if subgraphs_per_device is None
             else f"up to {subgraphs_per_device}" + (" forward and backward"
                                                     if problem.graph.is_training else ""))
        space = f"all splits with {q} contiguous subgraphs per accelerator in every order"
    return result_from_plan(problem, plan, method="brute-force", clock=clock, proven=finished,
                            search_space=space)


BRUTE_FORCE = MethodInfo(
    name="brute-force", func=solve_brute_force,
    summary="try every assignment of nodes to devices (tiny graphs only)",
    guarantee="optimal over all splits (non-contiguous included; for latency, every division "
              "of each accelerator's nodes into contiguous subgraphs and every order of them)",
    objectives=("throughput", "latency", "makespan"),
    exact=True,
    source="test oracle",
    options=(
        Option("max_assignments", int, MAX_ASSIGNMENTS, "refuse more than this many assignments "
               "(for latency: scored plans)", minimum=1),
        Option("subgraphs_per_device", int, None, "latency: at most this many contiguous "
               "subgraphs per accelerator (training: this many forward, then backward); default "
               "any number", minimum=1, maximum=64),
    ),
    space=ANY,
)


def solve_brute_force_contiguous(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    max_assignments: int = MAX_ASSIGNMENTS, **_: Any,
) -> SolveResult:
    """Optimal contiguous plan by exhaustion (each device's forward and backward parts
    contiguous, as paper 1 requires).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> solve_brute_force_contiguous(chain_problem([4, 1, 1, 4], n_accelerators=2)).objective
    5.0
    """
    clock = Stopwatch(time_limit)
    plan, finished = _search(problem, contiguous=True, max_assignments=max_assignments,
                             clock=clock)
    return result_from_plan(problem, plan, method="brute-force-contiguous", clock=clock,
                            proven=finished, search_space="contiguous splits")


BRUTE_FORCE_CONTIGUOUS = MethodInfo(
    name="brute-force-contiguous", func=solve_brute_force_contiguous,
    summary="try every assignment, keep those whose device parts are contiguous (tiny graphs)",
    guarantee="optimal over contiguous splits (forward and backward parts separately)",
    objectives=("throughput", "latency"),
    exact=True,
    source="test oracle",
    options=(
        Option("max_assignments", int, MAX_ASSIGNMENTS, "refuse more than this many assignments",
               minimum=1),
    ),
    space=CONTIGUOUS,
)


METHODS = (BRUTE_FORCE, BRUTE_FORCE_CONTIGUOUS)
