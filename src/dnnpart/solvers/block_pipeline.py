"""``block-pipeline``: the exact split of a model's blocks into a trainer's pipeline stages.

Over the block units of the graph (:func:`dnnpart.graph.blocks.node_units`: a model's
repeated blocks, with its embeddings and head as a prologue and an epilogue), a plan is a
split of the unit order into ``S <= D`` contiguous non-empty stages, stage ``i`` on the
``i``-th accelerator (and ``S <= m`` under a 1F1B training schedule, which runtimes need).
The ``stages`` objective (:mod:`dnnpart.pricing.chain`) scores it: the largest stage time
(forward + backward compute plus the messages at its boundaries, paper 1's throughput form
and paper 4's Eq. 5), every stage within its device's memory (weights, gradients, optimizer
state and the activations of the micro-batches in flight under the schedule: GPipe all
``m``, 1F1B ``min(m, S - i)`` on stage ``i``).

The search is a DP over ``(stages so far, units so far)`` for each ``S``: the memory of a
stage depends on ``S`` (through 1F1B's in-flight count), so each ``S`` is its own DP; it is
exact over its space, ``O(D^2 U^2)`` table lookups. Among splits with the same objective the
one with the fewest stages wins (choice: the same time on fewer devices), then the earliest
cuts. A plan expands to the op graph (every node goes where its unit goes) and is scored by
:func:`dnnpart.evaluate.evaluate`, whose value the DP's equals (tested).

When no split fits memory the result is ``INFEASIBLE`` (proven over the space) and
:func:`binding_stage` names the stage that cannot fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.plan import Plan, SolveResult
from dnnpart.pricing.chain_tables import ChainTables, chain_tables
from dnnpart.problem import STAGES, Problem
from dnnpart.solvers.method import BLOCK_CHAIN, MethodInfo, Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan

SEARCH_SPACE = ("contiguous splits of the block units into at most one stage per accelerator, "
                "stage i on the i-th accelerator")


def best_split(problem: Problem, tables: ChainTables,
               stop: Any = None) -> tuple[float, list[int]] | None:
    """``(objective, ends)`` of the best split (``ends``: each stage's last unit + 1), or
    ``None`` when no split fits memory. ``stop()`` is polled at every row of the DP.

    Examples
    --------
    >>> from dnnpart.problem import Objective
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4.0, 1.0, 1.0, 4.0], n_accelerators=2).with_objective(Objective(kind="stages"))
    >>> best_split(p, chain_tables(p))
    (5.0, [2, 4])
    """
    best: tuple[float, list[int]] | None = None
    for n_stages in range(1, max_stages(problem, tables) + 1):
        if stop is not None and stop():
            break
        found = _split_with(problem, tables, n_stages, stop)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    return best


def max_stages(problem: Problem, tables: ChainTables) -> int:
    """At most one stage per accelerator and per unit; a 1F1B training schedule also needs at
    least as many micro-batches as stages (``torch.distributed.pipelining``'s
    ``Schedule1F1B`` refuses fewer), so it allows at most ``m`` stages."""
    limit = min(len(tables.devices), tables.n_units)
    obj = problem.objective
    if obj.schedule == "1f1b" and tables.training:
        limit = min(limit, obj.microbatches)
    return limit


def _split_with(problem: Problem, tables: ChainTables, n_stages: int,
                stop: Any = None) -> tuple[float, list[int]] | None:
    n_units = tables.n_units
    inf = float("inf")
    # f[i][b]: best max stage time of stages 0..i covering units [0, b)
    f = np.full((n_stages, n_units + 1), inf)
    arg = np.zeros((n_stages, n_units + 1), np.int64)
    for i in range(n_stages):
        cap = float(tables.capacity[i]) * (1 + 1e-12)
        ends = [n_units] if i == n_stages - 1 else range(i + 1, n_units - (n_stages - 1 - i) + 1)
        for b in ends:
            if stop is not None and stop():  # a stop is heard within one row of the DP
                return None
            starts = np.arange(0, 1) if i == 0 else np.arange(i, b)
            prev = np.zeros(1) if i == 0 else f[i - 1, starts]
            value = np.maximum(prev, tables.stage_time(i, starts, b))
            value[tables.memory(problem, i, n_stages, starts, b) > cap] = inf
            k = int(np.argmin(value))
            f[i, b], arg[i, b] = value[k], starts[k]
    if f[n_stages - 1, n_units] == inf:
        return None
    ends = [n_units]
    b = n_units
    for i in range(n_stages - 1, 0, -1):
        b = int(arg[i, b])
        ends.append(b)
    return float(f[n_stages - 1, n_units]), sorted(ends)


def expand(tables: ChainTables, ends: list[int]) -> Plan:
    """The op-level plan of a split: every node on its unit's stage device."""
    stage_of_unit = np.zeros(tables.n_units, np.int64)
    start = 0
    for i, end in enumerate(ends):
        stage_of_unit[start:end] = i
        start = end
    devices = np.asarray(tables.devices, np.int64)
    return Plan(assignment=devices[stage_of_unit[tables.units.unit]].astype(np.int32))


def binding_stage(problem: Problem, tables: ChainTables) -> str:
    """Why no split fits: the unit whose smallest stage (itself alone, on the device and
    stage index where it needs least) still exceeds capacity, or the count of devices."""
    n_units, n_dev = tables.n_units, len(tables.devices)
    n_stages = max_stages(problem, tables)
    worst = None
    for u in range(n_units):
        need = min((float(tables.memory(problem, i, n_stages, [u], u + 1)[0]), i)
                   for i in range(n_stages))
        if need[0] > float(tables.capacity[need[1]]) * (1 + 1e-12):
            if worst is None or need[0] > worst[0]:
                worst = (need[0], need[1], u)
    names = problem.cluster.devices
    if worst is not None:
        mem, i, u = worst
        return (f"block {tables.units.names[u]!r} alone needs {mem / 1e9:.3g} GB on "
                f"{names[tables.devices[i]].name} (capacity {float(tables.capacity[i]) / 1e9:.3g} GB)"
                f" under {problem.objective.schedule} with {problem.objective.microbatches} micro-batches"
                "; try recomputation, fewer micro-batches, or more devices")
    return (f"no split of the {n_units} blocks into at most {n_dev} stages fits memory "
            f"under {problem.objective.schedule} with {problem.objective.microbatches} micro-batches")


def solve_block_pipeline(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    **options: Any,
) -> SolveResult:
    """The best block split (see the module docstring), scored by ``evaluate``.

    Examples
    --------
    >>> from dnnpart.problem import Objective
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4.0, 1.0, 1.0, 4.0], n_accelerators=2).with_objective(Objective(kind="stages"))
    >>> r = solve_block_pipeline(p)
    >>> r.status.value, r.objective, r.plan.assignment.tolist()
    ('optimal', 5.0, [0, 0, 1, 1])
    """
    if options:
        raise UsageError(f"block-pipeline: unknown option(s) {sorted(options)}")
    if problem.objective.kind != STAGES:
        raise UsageError(f"block-pipeline optimises the stages objective, not {problem.objective.kind!r}")
    clock = Stopwatch(time_limit)
    if progress is not None:
        progress.update("block-pipeline: pricing block intervals", 0.0)
    tables = chain_tables(problem)
    if progress is not None:
        progress.update(f"block-pipeline: DP over {tables.n_units} blocks", 0.5)
    found = best_split(problem, tables, stop=clock.expired)
    proven = not clock.expired()
    stats: dict[str, Any] = {"blocks": tables.n_units, "block_names": list(tables.units.names)}
    if found is None:
        if proven:
            stats["why"] = binding_stage(problem, tables)
        return result_from_plan(problem, None, method="block-pipeline", clock=clock, proven=proven,
                                search_space=SEARCH_SPACE, **stats)
    _, ends = found
    stats["stage_blocks"] = [[tables.units.names[u] for u in range(a, b)]
                             for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    return result_from_plan(problem, expand(tables, ends), method="block-pipeline", clock=clock,
                            proven=proven, search_space=SEARCH_SPACE, **stats)


BLOCK_PIPELINE = MethodInfo(
    name="block-pipeline", func=solve_block_pipeline,
    summary="split the model's blocks into contiguous pipeline stages, one per accelerator in "
    "order, minimising the largest stage time under a trainer's memory (activations in flight)",
    guarantee="optimal among contiguous block splits (stage i on the i-th accelerator)",
    objectives=(STAGES,),
    exact=True,
    source="ours: paper 1's throughput DP on a chain of blocks, with paper 4's Eq. 5 stage time",
    space=BLOCK_CHAIN,
)

METHODS = (BLOCK_PIPELINE,)


def uniform_split(problem: Problem) -> Plan:
    """The baseline runtimes default to: the block units in ``min(D, U)`` runs (at most ``m``
    under 1F1B training, as :func:`max_stages`) of equal count
    (the first runs one longer when they do not divide; DeepSpeed's
    ``partition_method='uniform'``), run ``i`` on the ``i``-th accelerator.

    Examples
    --------
    >>> from dnnpart.problem import Objective
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4.0, 1.0, 1.0, 4.0, 1.0], n_accelerators=2)
    >>> p = p.with_objective(Objective(kind="stages"))
    >>> uniform_split(p).assignment.tolist()
    [0, 0, 0, 1, 1]
    """
    from dnnpart.graph.blocks import node_units
    from dnnpart.pricing.chain_tables import stage_devices

    units = node_units(problem.graph)
    devices = np.asarray(stage_devices(problem), np.int64)
    n_stages = min(len(devices), units.n_units)
    if problem.objective.schedule == "1f1b" and problem.graph.is_training:
        n_stages = min(n_stages, problem.objective.microbatches)
    sizes = [units.n_units // n_stages + (1 if i < units.n_units % n_stages else 0) for i in range(n_stages)]
    stage_of_unit = np.repeat(np.arange(n_stages), sizes)
    return Plan(assignment=devices[stage_of_unit[units.unit]].astype(np.int32))
