"""An enumeration of latency plans for the oracles, written apart from ``brute-force``.

A latency plan (paper 1, section 4) is an assignment plus, on every accelerator, the ordinal of
each node's subgraph; the device runs its subgraphs in increasing ordinal. This enumeration
labels the nodes of each accelerator with every canonical ordinal sequence (the ordinals used
are ``0..m-1``) and leaves everything else to ``evaluate``: a subgraph that is not contiguous
or an order that deadlocks scores ``inf`` there. It prunes nothing, so it is slow, and it
shares no code with :mod:`dnnpart.solvers.brute_force`, which prunes both.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np

from dnnpart import Objective, Plan, Problem, evaluate
from dnnpart.graph import colocation_units


def _labelings(k: int) -> Iterator[tuple[int, ...]]:
    """Ordinal sequences of length ``k`` using exactly the ordinals ``0..m-1`` for some m."""
    for labels in itertools.product(range(k), repeat=k):
        if set(labels) == set(range(max(labels) + 1)):
            yield labels


def _within(problem: Problem, nodes: np.ndarray, labels: tuple[int, ...], q: int) -> bool:
    """At most ``q`` subgraphs (on training graphs: ``q`` forward ones, all before the
    backward ones, and ``q`` backward ones), as the integer program's slots allow."""
    ords = np.asarray(labels)
    if not problem.graph.is_training:
        return len(set(labels)) <= q
    back = problem.graph.is_backward[nodes]
    fw, bw = set(ords[~back].tolist()), set(ords[back].tolist())
    return len(fw) <= q and len(bw) <= q and (not fw or not bw or max(fw) < min(bw))


def latency_order_plans(problem: Problem, q: int | None = None,
                        contiguous_cpus: bool = False) -> Iterator[Plan]:
    """Every (assignment, ordinals) plan; ``q``: at most ``q`` subgraphs per accelerator (see
    :func:`_within`); ``contiguous_cpus``: each CPU's parts contiguous."""
    g, cluster = problem.graph, problem.cluster
    unit_ptr, unit_nodes = colocation_units(g)
    n_units = len(unit_ptr) - 1
    unit_of = np.empty(g.n_nodes, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    acc = cluster.is_accelerator()
    as_throughput = problem.with_objective(Objective())
    for combo in itertools.product(range(cluster.n_devices), repeat=n_units):
        a = np.asarray(combo, np.int32)[unit_of]
        if contiguous_cpus:
            parts = evaluate(as_throughput, Plan(assignment=a)).contiguous
            if not all(parts[c] for c in range(cluster.n_devices) if not acc[c]):
                continue
        groups = [np.flatnonzero(a == dev) for dev in range(cluster.n_devices)
                  if acc[dev] and (a == dev).any()]
        options = [[lab for lab in _labelings(len(nodes))
                    if q is None or _within(problem, nodes, lab, q)] for nodes in groups]
        for choice in itertools.product(*options):
            ordinal = np.zeros(g.n_nodes, np.int32)
            for nodes, labels in zip(groups, choice, strict=True):
                ordinal[nodes] = labels
            yield Plan(assignment=a, subgraph=ordinal)


def latency_optimum(problem: Problem, q: int | None = None, contiguous_cpus: bool = False) -> float:
    """The least latency over :func:`latency_order_plans` (``inf`` when none is feasible)."""
    best = math.inf
    for plan in latency_order_plans(problem, q, contiguous_cpus):
        ev = evaluate(problem, plan)
        if ev.feasible:
            best = min(best, ev.objective)
    return best
