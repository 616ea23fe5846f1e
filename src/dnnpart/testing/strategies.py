"""Hypothesis strategies (and seeded twins) for small random placement problems and plans.

Everything is built through one recipe, :func:`build_problem`, which asks a *chooser* for
each random decision. A chooser wraps either a hypothesis ``draw`` (:class:`DrawChooser`,
used by the strategies below, shrinking towards small and simple problems) or a numpy
generator (:class:`RngChooser`, for seeded lists of problems that tests can cache).

The problems follow paper 1's setting: a DAG with CPU and accelerator times (some nodes
unsupported on accelerators), memory sizes, per-node transfer costs (sometimes non-uniform
out-edge costs, appendix B), optional colocation classes and forward/backward pairs, on
``k`` identical accelerators with a memory limit and ``l`` CPUs.

Examples
--------
>>> import numpy as np
>>> p = build_problem(RngChooser(np.random.default_rng(0)), max_nodes=5)
>>> 1 <= p.graph.n_nodes <= 5
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dnnpart.devices.cluster import ACCELERATOR, CPU, Cluster, Device
from dnnpart.devices.presets import reference_cluster
from dnnpart.graph.core import NO_CLASS, Graph, build_graph
from dnnpart.plan import Plan
from dnnpart.problem import (
    MAKESPAN,
    OVERLAP_MODES,
    PIPELINE,
    SCHEDULES,
    THROUGHPUT,
    TRAINING_FORMS,
    Objective,
    Problem,
)

try:  # hypothesis is a test dependency; the seeded helpers work without it
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    st = None  # type: ignore[assignment]


class Chooser(Protocol):
    """Source of random decisions for :func:`build_problem`."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]`` (shrinks towards ``lo``)."""

    def flag(self, p: float) -> bool:
        """``True`` with probability about ``p`` (shrinks towards ``False``)."""

    def pick(self, options: Sequence[Any]) -> Any:
        """One of ``options`` (shrinks towards the first)."""

    def permutation(self, n: int) -> list[int]:
        """A permutation of ``range(n)``."""


class DrawChooser:
    """Chooser over a hypothesis ``draw``."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return int(self.draw(st.integers(lo, hi)))

    def flag(self, p: float) -> bool:
        if p <= 0:
            return False
        if p >= 1:
            return True
        return int(self.draw(st.integers(0, 99))) >= 100 - round(100 * p)

    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(options)))

    def permutation(self, n: int) -> list[int]:
        return list(self.draw(st.permutations(list(range(n)))))


class RngChooser:
    """Chooser over a numpy generator (seeded, reproducible lists of problems)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def flag(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, options: Sequence[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def permutation(self, n: int) -> list[int]:
        return [int(x) for x in self.rng.permutation(n)]


@dataclass(frozen=True)
class DagSpec:
    """A DAG over nodes ``0..n-1`` given in the order ``u < v`` for every edge."""

    n: int
    edges: tuple[tuple[int, int], ...]


def build_dag(c: Chooser, *, min_nodes: int = 1, max_nodes: int = 7, density: float = 0.4) -> DagSpec:
    """A random DAG: each pair ``u < v`` is an edge with probability ``density``."""
    n = c.integer(min_nodes, max_nodes)
    edges = tuple((u, v) for u in range(n) for v in range(u + 1, n) if c.flag(density))
    return DagSpec(n=n, edges=edges)


def graph_from_dag(
    c: Chooser,
    dag: DagSpec,
    *,
    unsupported_prob: float = 0.15,
    nonuniform_prob: float = 0.3,
    color_prob: float = 0.3,
    backward: Sequence[bool] | None = None,
    color_class: Sequence[int] | None = None,
    edge_cost: Sequence[float] | None = None,
) -> Graph:
    """Costs for a DAG, then :func:`build_graph` with shuffled ids and a shuffled edge list.

    Node ``i`` of ``dag`` gets original id ``ids[i]`` (random, distinct, not in topological
    order) so that the graph's renumbering is exercised.
    """
    n = dag.n
    acc = [math.inf if c.flag(unsupported_prob) else float(c.integer(0, 9)) for _ in range(n)]
    cpu = [float(c.integer(1, 30)) for _ in range(n)]
    mem = [float(c.integer(0, 9)) for _ in range(n)]
    if edge_cost is None:
        node_cost = [0.5 * c.integer(0, 6) for _ in range(n)]
        nonuniform = c.flag(nonuniform_prob)
        edge_cost = [
            0.5 * c.integer(0, 6) if nonuniform and c.flag(0.5) else node_cost[u] for u, _ in dag.edges
        ]
    if color_class is None:
        color_class = [NO_CLASS] * n
        if n >= 2 and c.flag(color_prob):
            for _ in range(c.integer(1, 2)):
                cls = c.integer(0, 2)
                for v in range(n):
                    if c.flag(0.35):
                        color_class[v] = cls
    perm = c.permutation(n)
    offset = c.integer(0, 50)
    ids = [offset + 3 * perm[i] for i in range(n)]  # distinct, gaps, not topological
    node_order = c.permutation(n)  # order in which nodes are listed
    edge_order = c.permutation(len(dag.edges))
    es = [dag.edges[e] for e in edge_order]
    return build_graph(
        [ids[i] for i in node_order],
        [ids[u] for u, _ in es],
        [ids[v] for _, v in es],
        compute_time=[[cpu[i], acc[i]] for i in node_order],
        edge_cost=[edge_cost[e] for e in edge_order],
        memory_bytes=[mem[i] for i in node_order],
        is_backward=None if backward is None else [bool(backward[i]) for i in node_order],
        color_class=[int(color_class[i]) for i in node_order],
        names=[f"n{ids[i]}" for i in node_order],
    )


def training_dag(
    c: Chooser, *, max_forward: int = 3, orphan_prob: float = 0.3
) -> tuple[DagSpec, list[bool], list[int]]:
    """Forward DAG, its mirrored backward pass (partners share a colocation class), and
    sometimes an orphaned backward node (no forward partner, paper 1 appendix B)."""
    fwd = build_dag(c, min_nodes=1, max_nodes=max_forward, density=0.5)
    f = fwd.n
    edges = list(fwd.edges)
    edges += [(f + v, f + u) for u, v in fwd.edges]  # backward edges mirror forward ones
    sources = {u for u, _ in fwd.edges}
    edges += [(s, f + s) for s in range(f) if s not in sources]  # loss turnaround at sinks
    n = 2 * f
    backward = [False] * f + [True] * f
    classes = list(range(f)) + list(range(f))
    if c.flag(orphan_prob):
        # orphan: a backward node fed by a backward node, feeding nothing
        src = f + c.integer(0, f - 1)
        edges.append((src, n))
        backward.append(True)
        classes.append(NO_CLASS)
        n += 1
    # Edges must go from lower to higher index: backward nodes are mirrored, so renumber.
    order = list(range(f)) + [f + v for v in reversed(range(f))] + list(range(2 * f, n))
    pos = {v: i for i, v in enumerate(order)}
    edges = sorted((pos[u], pos[v]) for u, v in edges)
    return (
        DagSpec(n=n, edges=tuple(edges)),
        [backward[v] for v in order],
        [classes[v] for v in order],
    )


def build_cluster(
    c: Chooser, total_memory: float, *, max_accelerators: int = 3, max_cpus: int = 2,
    heterogeneous_prob: float = 0.0, memory_prob: float = 0.6, min_accelerators: int = 1,
    host_bandwidth: float | None = None,
) -> Cluster:
    """``min_accelerators..max_accelerators`` accelerators and ``0..max_cpus`` CPUs; memory
    limit sometimes.

    With ``heterogeneous_prob`` the devices get random speeds and host-link scales.
    ``host_bandwidth`` (bytes/s) replaces the reference cluster's PCIe link: the simulated
    objectives (makespan, pipeline) price a transfer by its bytes over it.
    """
    k = c.integer(min_accelerators, max_accelerators)
    cpus = c.integer(0, max_cpus)
    memory = math.inf
    if c.flag(memory_prob):
        memory = max(1.0, total_memory) * c.pick([0.25, 0.4, 0.6, 0.8, 1.0, 1.5])
    if not c.flag(heterogeneous_prob):
        if host_bandwidth is not None:
            return reference_cluster(n_accelerators=k, n_cpus=cpus, memory_bytes=memory,
                                     host_bandwidth=host_bandwidth)
        return reference_cluster(n_accelerators=k, n_cpus=cpus, memory_bytes=memory)
    speeds = [0.5, 1.0, 2.0]
    devices = [Device(name=f"acc{i}", kind=ACCELERATOR, memory_bytes=memory, speed=c.pick(speeds))
               for i in range(k)]
    devices += [Device(name=f"cpu{i}", kind=CPU, speed=c.pick(speeds)) for i in range(cpus)]
    scale = np.array([c.pick([0.5, 1.0, 2.0]) for _ in devices])
    return Cluster(devices=tuple(devices), host_link_scale=scale)


def build_problem(
    c: Chooser,
    *,
    max_nodes: int = 7,
    min_nodes: int = 1,
    training: bool | None = None,
    max_accelerators: int = 3,
    max_cpus: int = 2,
    heterogeneous_prob: float = 0.0,
    memory_prob: float = 0.6,
    unsupported_prob: float = 0.15,
    nonuniform_prob: float = 0.3,
    color_prob: float = 0.3,
    objective: Objective | None = None,
    random_objective: bool = False,
    min_accelerators: int = 1,
    host_bandwidth: float | None = None,
) -> Problem:
    """One random problem (see the module docstring).

    ``random_objective`` draws the variant of ``objective``'s kind (default throughput): the
    training form and overlap mode (throughput), or the schedule, 2 or 3 micro-batches and
    recomputation (pipeline).
    """
    is_training = c.flag(0.3) if training is None else training
    if is_training and max_nodes >= 2:
        dag, backward, classes = training_dag(c, max_forward=max(1, min(3, (max_nodes - 1) // 2)))
        graph = graph_from_dag(c, dag, unsupported_prob=unsupported_prob,
                               nonuniform_prob=nonuniform_prob, backward=backward,
                               color_class=classes)
    else:
        dag = build_dag(c, min_nodes=min_nodes, max_nodes=max_nodes)
        graph = graph_from_dag(c, dag, unsupported_prob=unsupported_prob,
                               nonuniform_prob=nonuniform_prob, color_prob=color_prob)
    cluster = build_cluster(c, float(graph.memory_bytes.sum()), max_accelerators=max_accelerators,
                            max_cpus=max_cpus, heterogeneous_prob=heterogeneous_prob,
                            memory_prob=memory_prob, min_accelerators=min_accelerators,
                            host_bandwidth=host_bandwidth)
    if objective is None:
        objective = Objective()
    if random_objective and objective.kind == PIPELINE:
        objective = Objective(kind=PIPELINE, schedule=c.pick(SCHEDULES), microbatches=c.integer(2, 3),
                              recompute=c.flag(0.5))
    elif random_objective and objective.kind == THROUGHPUT:
        objective = Objective(training=c.pick(TRAINING_FORMS), overlap=c.pick(OVERLAP_MODES))
    return Problem(graph=graph, cluster=cluster, objective=objective, name="random")


def seeded_problems(count: int, *, seed: int = 0, **kwargs: Any) -> list[Problem]:
    """``count`` reproducible random problems (``kwargs`` as for :func:`build_problem`)."""
    rng = np.random.default_rng(seed)
    return [build_problem(RngChooser(rng), **kwargs) for _ in range(count)]


#: Host link (bytes/s) of the simulated problems: accelerators talk through host DRAM at half
#: of it, so a tensor byte takes one time unit (1 ms) to move -- transfers cost as much as the
#: compute of the random graphs (0 to 9 units per node, 0 to 9 bytes per tensor).
SLOW_HOST_LINK = 2e3


def build_simulated_problem(
    c: Chooser, kind: str, *, max_nodes: int = 5, min_nodes: int = 3, training: bool | None = None,
    min_accelerators: int = 2, max_accelerators: int = 3, memory_prob: float = 0.7,
) -> Problem:
    """A tiny problem for a simulated objective (``makespan``: paper 2's op-level emulation;
    ``pipeline``: paper 4's pipeline, schedule, 2 or 3 micro-batches and recomputation drawn).

    ``min_accelerators`` to ``max_accelerators`` identical accelerators and no CPU (every
    operator runs on an accelerator), the :data:`SLOW_HOST_LINK`, a random inference graph or
    (``training``; default: 30% of the time) a forward graph with its mirrored backward pass.
    With probability ``memory_prob`` each accelerator gets 0.5 to 1.2 times the simulated peak
    memory of the whole graph on one accelerator, so that memory binds without ruling every
    plan out.

    Examples
    --------
    >>> p = build_simulated_problem(RngChooser(np.random.default_rng(3)), "makespan")
    >>> p.objective.kind, 2 <= p.cluster.n_devices <= 3, p.cluster.cpus
    ('makespan', True, ())
    """
    from dnnpart.evaluate import evaluate

    base = build_problem(c, max_nodes=max_nodes, min_nodes=min_nodes, training=training,
                         min_accelerators=min_accelerators, max_accelerators=max_accelerators,
                         max_cpus=0, unsupported_prob=0.0, memory_prob=0.0,
                         host_bandwidth=SLOW_HOST_LINK, objective=Objective(kind=kind),
                         random_objective=True)
    if not c.flag(memory_prob):
        return base
    one = evaluate(base, Plan(assignment=np.zeros(base.graph.n_nodes, np.int32)))
    memory = max(1.0, float(one.memory_bytes[0])) * c.pick([0.5, 0.7, 0.9, 1.2])
    cluster = reference_cluster(n_accelerators=base.cluster.n_devices, n_cpus=0, memory_bytes=memory,
                                host_bandwidth=SLOW_HOST_LINK)
    return Problem(graph=base.graph, cluster=cluster, objective=base.objective, name=base.name)


def seeded_makespan_problems(count: int, *, seed: int = 0, **kwargs: Any) -> list[Problem]:
    """``count`` reproducible tiny ``makespan`` problems on 2 or 3 accelerators (paper 2's
    setting; ``kwargs`` as for :func:`build_simulated_problem`).

    Examples
    --------
    >>> ps = seeded_makespan_problems(4, seed=1)
    >>> {p.objective.kind for p in ps}, all(2 <= p.cluster.n_devices <= 3 for p in ps)
    ({'makespan'}, True)
    """
    rng = np.random.default_rng(seed)
    return [build_simulated_problem(RngChooser(rng), MAKESPAN, **kwargs) for _ in range(count)]


def seeded_pipeline_problems(count: int, *, seed: int = 0, **kwargs: Any) -> list[Problem]:
    """``count`` reproducible tiny ``pipeline`` problems on 2 or 3 accelerators (paper 4's
    setting; ``kwargs`` as for :func:`build_simulated_problem`).

    Examples
    --------
    >>> p = seeded_pipeline_problems(1, seed=2)[0]
    >>> p.objective.kind, p.objective.microbatches in (2, 3), p.cluster.cpus
    ('pipeline', True, ())
    """
    rng = np.random.default_rng(seed)
    return [build_simulated_problem(RngChooser(rng), PIPELINE, **kwargs) for _ in range(count)]


def random_assignment(c: Chooser, problem: Problem) -> list[int]:
    """Any device for every node, colocation classes kept together half of the time."""
    n, d = problem.graph.n_nodes, problem.cluster.n_devices
    a = [c.integer(0, d - 1) for _ in range(n)]
    if c.flag(0.5):
        cls = problem.graph.color_class
        first: dict[int, int] = {}
        for v in range(n):
            if cls[v] != NO_CLASS:
                a[v] = first.setdefault(int(cls[v]), a[v])
    return a


def contiguous_assignment(c: Chooser, problem: Problem) -> list[int]:
    """Cut a random topological order into consecutive blocks, one device each.

    Every block is an interval of a topological order, hence contiguous, and the blocks form
    a chain (no two devices wait on each other); a device may get no block.
    """
    g = problem.graph
    n, d = g.n_nodes, problem.cluster.n_devices
    order = random_topological_order(c, g)
    n_blocks = c.integer(1, min(n, d))
    cuts = sorted(c.permutation(n - 1)[: n_blocks - 1]) if n > 1 else []
    devices = c.permutation(d)[:n_blocks]
    a = [0] * n
    block = 0
    for i, v in enumerate(order):
        while block < len(cuts) and i > cuts[block]:
            block += 1
        a[v] = devices[block]
    return a


def random_topological_order(c: Chooser, graph: Graph) -> list[int]:
    """A random topological order of ``graph`` (Kahn with random choices)."""
    indeg = graph.in_degree().tolist()
    ready = [v for v in range(graph.n_nodes) if indeg[v] == 0]
    order: list[int] = []
    while ready:
        v = ready.pop(c.integer(0, len(ready) - 1))
        order.append(v)
        for w in graph.successors(v).tolist():
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return order


if st is not None:

    @st.composite
    def dags(draw: Any, min_nodes: int = 1, max_nodes: int = 7, density: float = 0.4) -> DagSpec:
        """A random :class:`DagSpec` (edges ``u < v``)."""
        return build_dag(DrawChooser(draw), min_nodes=min_nodes, max_nodes=max_nodes, density=density)

    @st.composite
    def graphs(draw: Any, min_nodes: int = 1, max_nodes: int = 7, density: float = 0.4) -> Graph:
        """A random graph with costs (shuffled original ids)."""
        c = DrawChooser(draw)
        dag = build_dag(c, min_nodes=min_nodes, max_nodes=max_nodes, density=density)
        return graph_from_dag(c, dag)

    @st.composite
    def problems(draw: Any, /, **kwargs: Any) -> Problem:
        """A random :class:`Problem`; keyword arguments as for :func:`build_problem`."""
        return build_problem(DrawChooser(draw), **kwargs)

    @st.composite
    def plans(draw: Any, /, problem: Problem) -> Plan:
        """Any assignment of ``problem``'s nodes to its devices."""
        return Plan(assignment=np.asarray(random_assignment(DrawChooser(draw), problem), np.int32))

    @st.composite
    def problems_and_plans(draw: Any, /, **kwargs: Any) -> tuple[Problem, Plan]:
        """A problem with a random plan for it."""
        c = DrawChooser(draw)
        problem = build_problem(c, **kwargs)
        return problem, Plan(assignment=np.asarray(random_assignment(c, problem), np.int32))

    @st.composite
    def problems_and_contiguous_plans(draw: Any, /, **kwargs: Any) -> tuple[Problem, Plan]:
        """A problem with a plan cutting a random topological order into device blocks."""
        c = DrawChooser(draw)
        problem = build_problem(c, **kwargs)
        return problem, Plan(assignment=np.asarray(contiguous_assignment(c, problem), np.int32))


__all__ = [
    "SLOW_HOST_LINK",
    "Chooser",
    "DagSpec",
    "DrawChooser",
    "RngChooser",
    "build_cluster",
    "build_dag",
    "build_problem",
    "build_simulated_problem",
    "contiguous_assignment",
    "dags",
    "graph_from_dag",
    "graphs",
    "plans",
    "problems",
    "problems_and_contiguous_plans",
    "problems_and_plans",
    "random_assignment",
    "random_topological_order",
    "seeded_makespan_problems",
    "seeded_pipeline_problems",
    "seeded_problems",
    "training_dag",
]
