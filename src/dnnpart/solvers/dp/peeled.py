"""The DP's peeled relaxation, run for :func:`~dnnpart.solvers.dp.solve.solve_dp`: the graph
without its light side nodes gives a lower bound and a plan to extend, or the cell mask of
the full DP (the relaxation itself and its proofs: :mod:`dnnpart.solvers.dp.relax`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.errors import ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph.stage_graph import StageGraph
from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.solvers.dp import relax
from dnnpart.solvers.dp.bounds import load_lower_bound
from dnnpart.solvers.dp.devices import device_model
from dnnpart.solvers.dp.driver import DpOutcome, run_dp
from dnnpart.solvers.dp.ideals import IdealLattice, dfs_lattice, enumerate_stage_ideals
from dnnpart.solvers.dp.rows import THREADED_IDEALS
from dnnpart.solvers.method import Stopwatch

#: Lattices from this many ideals first try the peeled relaxation (:mod:`.relax`).
PEEL_IDEALS = 20_000
#: ... when it has at most this fraction of the ideals.
PEEL_RATIO = 0.25


@dataclass(frozen=True, slots=True)
class Peeled:
    """What the peeled relaxation found: its best plan of ``G`` and objective, whether that
    is proven optimal, and the cell mask for the DP over ``G`` (``None`` when proven, or when
    a stop came before the mask was built)."""

    plan: Plan
    objective: float
    proven: bool
    cell_mask: tuple[npt.NDArray[np.int32], npt.NDArray[np.int8]] | None


def solve_peeled(
    problem: Problem, stage: StageGraph, lattice: IdealLattice, clock: Stopwatch, threads: int,
    upper: float, incumbent: Plan | None, stats: dict[str, Any],
) -> Peeled | None:
    """The peeled relaxation of the DP over ``lattice``, or ``None`` when nothing is worth
    peeling or a DP did not finish.

    ``upper``/``incumbent``: DPL's value and plan. Adds ``peel_*`` entries to ``stats``.

    Examples
    --------
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> sg = build_stage_graph(p.graph)
    >>> lat = enumerate_stage_ideals(sg)
    >>> solve_peeled(p, sg, lat, Stopwatch(None), 1, 5.0, None, {}) is None  # nothing light
    True
    """
    model = device_model(problem)
    acc = np.bincount(stage.stage_of, weights=model.acc_time, minlength=stage.n_stage_nodes)
    cpu = np.bincount(stage.stage_of, weights=model.cpu_time, minlength=stage.n_stage_nodes)
    # light on every kind of device it can run on: wherever the extension puts it
    heaviest = np.maximum(np.where(np.isfinite(acc), acc, 0.0), np.where(np.isfinite(cpu), cpu, 0.0))
    light = heaviest <= relax.LIGHT_FRACTION * load_lower_bound(problem, stage)
    # the side components alone (the closer bound) when that leaves a small lattice, else
    # the one-neighbour leaves too if that leaves fewer ideals
    found: tuple[relax.Peeling, IdealLattice] | None = None
    limit = max(2, int(lattice.n_ideals * PEEL_RATIO))
    for leaves in (False, True):
        groups = relax.peel_set(stage, light, leaves=leaves)
        if not groups:
            continue
        peeling = relax.peel(stage, groups)
        try:
            found = peeling, enumerate_stage_ideals(peeling.stage, max_ideals=limit)
        except ProblemTooLargeError:
            continue
        if found[1].n_ideals < PEEL_IDEALS:
            break
        limit = found[1].n_ideals - 1
    if found is None:
        return None
    peeling, sub_lattice = found
    groups = peeling.groups
    sub_stage = peeling.stage
    costs = relax.peeled_costs(problem.graph, peeling.removed_nodes)

    def sub_dp(sg: StageGraph, lat: IdealLattice, bound: float, label: str,
               keep: bool = True) -> DpOutcome:
        n_threads = threads if lat.n_ideals >= THREADED_IDEALS else 1
        return run_dp(problem, sg, lat, upper=bound, clock=clock, label=label, work_bound=True,
                      threads=n_threads, costs=costs, keep_table=keep)

    dpl = run_dp(problem, sub_stage, dfs_lattice(sub_stage), clock=clock,
                 label="peeled DPL", costs=costs)
    sub = sub_dp(sub_stage, sub_lattice, dpl.value, "peeled DP", keep=False)
    stats.update(peel_stage_nodes=int(sum(g.size for g in groups)),
                 peel_ideals=sub_lattice.n_ideals, peel_slices_priced=sub.slices_priced)
    if not sub.finished:
        return None
    best = sub if sub.assignment is not None and sub.value < dpl.value else dpl
    if best.assignment is None:  # G' has no split: neither has G (memory only drops)
        return None
    lower = best.value
    plan: Plan | None = relax.extend_plan(problem, stage, peeling, best.assignment)
    assert plan is not None
    ev = evaluate(problem, plan)
    objective = ev.objective if ev.feasible else math.inf
    stats.update(peel_lower_bound=lower, peel_objective=objective)
    if upper <= objective:
        plan, objective = incumbent, upper
    if plan is None or not math.isfinite(objective):
        return None
    if objective <= lower * (1 + relax.MATCH_SLACK):
        return Peeled(plan, objective, True, None)
    # the cells of G whose restriction to G' cannot be split below the incumbent, on the
    # ideal's devices or on the rest's, are on no better split of G
    prefix = sub_dp(sub_stage, sub_lattice, objective, "peeled prefix")
    rev_stage = relax.reverse_stage(sub_stage)
    rev_lattice = enumerate_stage_ideals(rev_stage)
    suffix = sub_dp(rev_stage, rev_lattice, objective, "peeled suffix")
    if not (prefix.finished and suffix.finished):
        return Peeled(plan, objective, False, None)  # stopped: the plan is still the best so far
    if prefix.table is None or suffix.table is None:
        return None
    complement = relax.complement_map(sub_lattice, rev_lattice, sub_stage.n_stage_nodes)
    mask = relax.cell_mask(prefix.table, suffix.table, complement, objective)
    new_id = np.full(stage.n_stage_nodes, -1, np.int64)
    new_id[peeling.kept] = np.arange(peeling.kept.size)
    mask_of = relax.restriction_map(lattice, sub_lattice, new_id, sub_stage.n_stage_nodes)
    stats["peel_live_cells"] = float(mask[mask_of].mean())
    return Peeled(plan, objective, False, (mask_of, mask))
