"""Greedy memory filling: paper 1's latency baseline (section 7, "Baselines").

1. contract colocated nodes and the strongly connected components this creates (the DP's
   preprocessing, :func:`~dnnpart.solvers.dp.build_stage_graph`);
2. fix a topological order of the contracted nodes;
3. fill each accelerator in that order with as many nodes as its memory allows;
4. place the rest on the CPUs (each CPU filled in turn while its memory allows).

It ignores compute and transfer times. Contracted nodes that cannot run on accelerators, or
that alone exceed an accelerator's memory, go to the CPUs; the rest of the order continues
on the current accelerator, so the split stays feasible (it may then not be contiguous).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.method import ANY, MethodInfo, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan

#: Relative slack of the evaluator's memory check, so that a filled device is never refused.
_MEMORY_TOLERANCE = 1e-12


def greedy_assignment(problem: Problem) -> np.ndarray | None:
    """Node -> device of the greedy split, or ``None`` when some node fits nowhere.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.devices import reference_cluster
    >>> g = chain_graph(4, memory_bytes=1.0)
    >>> p = Problem(graph=g, cluster=reference_cluster(n_accelerators=2, n_cpus=1,
    ...                                                memory_bytes=2.0))
    >>> greedy_assignment(p).tolist()
    [0, 0, 1, 1]
    """
    graph, cluster = problem.graph, problem.cluster
    stage = build_stage_graph(graph, merge_trivial=False)
    m = stage.n_stage_nodes
    memory = np.bincount(stage.stage_of, weights=graph.memory_bytes, minlength=m)
    acc_kind = [graph.device_kinds.index(cluster.devices[x].kind) for x in cluster.accelerators]
    cpu_kind = [graph.device_kinds.index(cluster.devices[x].kind) for x in cluster.cpus]
    capacity = cluster.memory_capacity() * (1 + _MEMORY_TOLERANCE)
    used = np.zeros(cluster.n_devices)
    stage_device = np.full(m, -1, np.int64)

    def runs_on(s: int, kind: int) -> bool:
        return bool(np.all(np.isfinite(graph.compute_time[stage.members(s), kind])))

    leftovers: list[int] = []
    current = 0  # index into the accelerators
    for s in range(m):
        placed = False
        if current < len(acc_kind) and runs_on(s, acc_kind[current]):
            while current < len(acc_kind):
                dev = cluster.accelerators[current]
                if used[dev] + memory[s] <= capacity[dev]:
                    stage_device[s], placed = dev, True
                    used[dev] += memory[s]
                    break
                if memory[s] > capacity[dev]:
                    break  # too big for any (identical) accelerator: not a reason to move on
                current += 1
        if not placed:
            leftovers.append(s)
    cpu_index = 0
    for s in leftovers:
        while cpu_index < len(cpu_kind):
            dev = cluster.cpus[cpu_index]
            if runs_on(s, cpu_kind[cpu_index]) and used[dev] + memory[s] <= capacity[dev]:
                stage_device[s] = dev
                used[dev] += memory[s]
                break
            cpu_index += 1
        if stage_device[s] < 0:
            return None
    return stage_device[stage.stage_of]


def solve_greedy(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    **options: Any,
) -> SolveResult:
    """Greedy memory filling of the accelerators (paper 1's latency baseline).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> solve_greedy(chain_problem([4, 1, 1, 4], n_accelerators=2)).plan.assignment.tolist()
    [0, 0, 0, 0]
    """
    if options:
        raise UsageError(f"greedy: unknown option(s) {sorted(options)}")
    clock = Stopwatch(time_limit)
    assignment = greedy_assignment(problem)
    plan = None if assignment is None else Plan(assignment=assignment.astype(np.int32))
    return result_from_plan(problem, plan, method="greedy", clock=clock, proven=False,
                            search_space="greedy memory filling in topological order")


GREEDY = MethodInfo(
    name="greedy", func=solve_greedy,
    summary="fill each accelerator in topological order while memory allows; rest on CPUs",
    guarantee="baseline; never exceeds memory; ignores compute and transfer times",
    objectives=("throughput", "latency"),
    source="paper 1, section 7 (latency baseline)",
    space=ANY,
)


METHODS = (GREEDY,)
