"""Small graphs and problems built in code, for tests, doctests and examples."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dnnpart.devices.presets import reference_cluster
from dnnpart.graph.builder import GraphBuilder
from dnnpart.graph.core import Graph
from dnnpart.problem import Objective, Problem


def chain_graph(
    n: int, *, acc_time: float | Sequence[float] = 1.0, cpu_time: float | None = None,
    cost: float = 0.0, memory_bytes: float = 0.0,
) -> Graph:
    """A path ``0 -> 1 -> ... -> n-1``; CPU time defaults to 10x the accelerator time.

    Examples
    --------
    >>> chain_graph(3).n_edges
    2
    """
    acc = np.broadcast_to(np.asarray(acc_time, dtype=float), (n,))
    b = GraphBuilder()
    for v in range(n):
        b.add_node(v, acc_time=float(acc[v]),
                   cpu_time=10 * float(acc[v]) if cpu_time is None else cpu_time,
                   memory_bytes=memory_bytes)
    for v in range(n - 1):
        b.add_edge(v, v + 1, cost=cost)
    return b.build()


def chain_problem(
    acc_time: Sequence[float], *, n_accelerators: int, n_cpus: int = 0, cost: float = 0.0,
    memory_bytes: float = math.inf,
) -> Problem:
    """A chain on ``n_accelerators`` accelerators and ``n_cpus`` CPUs."""
    return Problem(
        graph=chain_graph(len(acc_time), acc_time=acc_time, cost=cost),
        cluster=reference_cluster(n_accelerators=n_accelerators, n_cpus=n_cpus,
                                  memory_bytes=memory_bytes),
    )


def random_problem(
    rng: np.random.Generator, *, n_nodes: int, edge_prob: float = 0.3, n_accelerators: int = 2,
    n_cpus: int = 1, memory_fraction: float | None = None, unsupported_prob: float = 0.0,
    training: bool = False, objective: Objective | None = None,
) -> Problem:
    """A random DAG problem with paper-1 style costs.

    ``training`` mirrors the forward DAG into backward nodes colocated with their partners.
    ``memory_fraction`` sets accelerator memory to that fraction of the total node memory.
    """
    b = GraphBuilder()
    sizes = rng.integers(1, 10, size=n_nodes).astype(float)
    acc = rng.integers(0, 10, size=n_nodes).astype(float)
    out_cost = rng.integers(0, 4, size=n_nodes).astype(float)
    for v in range(n_nodes):
        unsupported = rng.random() < unsupported_prob
        b.add_node(v, acc_time=math.inf if unsupported else acc[v],
                   cpu_time=float(rng.integers(1, 30)), memory_bytes=sizes[v],
                   color_class=v if training else -1)
    edges = [(u, v) for u in range(n_nodes) for v in range(u + 1, n_nodes) if rng.random() < edge_prob]
    for u, v in edges:
        b.add_edge(u, v, cost=out_cost[u])
    if training:
        for v in range(n_nodes):
            b.add_node(n_nodes + v, acc_time=2 * acc[v], cpu_time=float(rng.integers(1, 30)),
                       memory_bytes=0.0, is_backward=True, color_class=v)
        for u, v in edges:
            b.add_edge(n_nodes + v, n_nodes + u, cost=out_cost[v])
        sinks = {u for u in range(n_nodes)} - {u for u, _ in edges}
        for s in sinks:
            b.add_edge(s, n_nodes + s, cost=out_cost[s])
    total = float(sizes.sum())
    memory = math.inf if memory_fraction is None else memory_fraction * total
    return Problem(
        graph=b.build(),
        cluster=reference_cluster(n_accelerators=n_accelerators, n_cpus=n_cpus, memory_bytes=memory),
        objective=objective or Objective(),
    )
