"""The ``dp`` and ``dpl`` methods (paper 1, sections 5.1.1 and 5.1.2): options in, a
:class:`~dnnpart.plan.SolveResult` out (declared in :mod:`dnnpart.solvers.dp.methods`)."""

from __future__ import annotations

import math
from typing import Any

from dnnpart.graph.stage_graph import StageGraph, build_stage_graph
from dnnpart.plan import SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.dp import peeled as peeled_relaxation
from dnnpart.solvers.dp.driver import run_dp
from dnnpart.solvers.dp.hierarchy import DEFAULT_MAX_HIERARCHY_IDEALS
from dnnpart.solvers.dp.hierarchy_solve import solve_hierarchy
from dnnpart.solvers.dp.ideals import (
    DEFAULT_MAX_IDEALS,
    DEFAULT_MAX_MEMORY_BYTES,
    dfs_lattice,
    enumerate_stage_ideals,
)
from dnnpart.solvers.dp.options import check_cap, check_options, flag, search_space, thread_count
from dnnpart.solvers.dp.rows import THREADED_IDEALS
from dnnpart.solvers.incumbent import offer
from dnnpart.solvers.method import Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan


def solve_dp(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    max_ideals: int = DEFAULT_MAX_IDEALS, max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    use_upper_bound: bool = True, merge_trivial: bool = True,
    replication: bool = False, max_hierarchy_ideals: int = DEFAULT_MAX_HIERARCHY_IDEALS,
    work_bound: bool = True, threads: int | None = None, peel: bool = True, **options: Any,
) -> SolveResult:
    """Optimal contiguous split by dynamic programming over the ideals of the forward graph.

    Parameters
    ----------
    max_ideals : refuse (``ProblemTooLargeError``) graphs with more ideals than this after
        preprocessing; ``dpl`` or the integer program handle those.
    max_memory_bytes : refuse, before allocating, lattices whose enumeration and DP tables
        (bytes per ideal times ideals, bytes per cover edge times edges) would need more.
    merge_trivial : merge zero-time nodes into their only neighbour (paper 1's code does;
        exact, see :func:`~dnnpart.graph.stage_graph.build_stage_graph`).
    use_upper_bound : solve DPL first and prune with its value (exactness is unaffected;
        ``False`` gives the plain O(I^2) DP, for checks).
    work_bound : with the upper bound, also skip the DP cells whose ideal's work (or the work
        left) cannot fit on their devices below it (exact either way; ``False`` is paper 1's
        DP pruned by the upper bound alone).
    threads : threads filling the rows of lattices of at least ``THREADED_IDEALS`` ideals
        (default: the machine's cores); the result does not depend on it.
    peel : with the upper bound, on lattices of at least ``PEEL_IDEALS`` ideals (not with
        ``replication`` or the GPipe form), first solve the graph without its light side
        nodes, a lower bound, and extend its plan (exact either way;
        :mod:`dnnpart.solvers.dp.peeled`).
    replication : also let a slice run on several identical devices at once, each taking
        every ``r``-th sample, paying the all-reduce of appendix C.2 (training graphs; the
        link's bandwidth is the cluster's). The plan's ``replica_of`` says which devices
        replicate which; the optimum is over contiguous pipeline splits with replicated
        stages. Costs a factor up to ``max(k, l)`` in time (CLI: ``--set replication=true``).
    max_hierarchy_ideals : on a hierarchical cluster (appendix C.3; without ``replication``,
        which there runs the flat DP, reported FEASIBLE only), refuse
        (``ProblemTooLargeError``) lattices with more ideals than this: the hierarchy DP
        (:mod:`dnnpart.solvers.dp.hierarchy`) costs up to ``O(I^4)`` slice prices.

    With the GPipe training form the plan optimises the PipeDream form and is reported
    FEASIBLE with that optimum as its bound (see :mod:`dnnpart.solvers.dp`).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> r = solve_dp(chain_problem([4, 1, 1, 4], n_accelerators=2))
    >>> r.status.value, r.objective, r.stats["n_ideals"]
    ('optimal', 5.0, 5)
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2, cost=1.0)
    >>> solve_dp(p).objective                     # 4 + 1 compute + 1 transfer each
    6.0
    >>> r = solve_dp(p, replication=True)         # inference: no weight sync to pay
    >>> r.objective, r.plan.replica_of.tolist()   # both run everything, every other sample
    (5.0, [1, 1])
    """
    check_options(options, "dp")
    replication = flag(replication, "replication")
    check_cap(max_ideals, "max_ideals")
    clock = Stopwatch(time_limit)
    stage = _stage_graph(problem, merge_trivial)
    hierarchical = problem.cluster.is_hierarchical
    if hierarchical and not replication:
        return solve_hierarchy(problem, stage, clock, max_hierarchy_ideals, use_upper_bound,
                               progress)
    if progress is not None:
        progress.update(f"DP: contracted to {stage.n_stage_nodes:,} forward nodes", 0.0)
    check_cap(max_memory_bytes, "max_memory_bytes")
    max_threads = thread_count(threads)
    lattice = enumerate_stage_ideals(stage, max_ideals=int(max_ideals),
                                     max_memory_bytes=int(max_memory_bytes),
                                     bytes_per_ideal=_table_bytes(problem, replication,
                                                                  max_threads))
    t_enum = clock.elapsed
    if progress is not None:
        progress.update(f"DP: {lattice.n_ideals:,} ideals enumerated, {t_enum:.1f} s", 0.0)
    stats: dict[str, Any] = {
        "n_ideals": lattice.n_ideals,
        "n_stage_nodes": stage.n_stage_nodes,
        "n_artificial_nodes": stage.n_artificial,
        "n_cover_pairs": lattice.n_cover_pairs,
        "enumerate_s": t_enum,
    }
    upper, incumbent = math.inf, None
    if use_upper_bound:
        dpl = run_dp(problem, stage, dfs_lattice(stage), clock=clock, label="DPL bound",
                     replication=replication)
        upper, incumbent = dpl.value, dpl.plan()
        offer(problem, incumbent, "DPL (the DP's upper bound)")
        stats["upper_bound"] = upper
    n_threads = max_threads if lattice.n_ideals >= THREADED_IDEALS else 1
    gpipe = problem.graph.is_training and problem.objective.training == "gpipe"
    cells = None
    if (flag(peel, "peel") and use_upper_bound and not replication and not gpipe
            and lattice.n_ideals >= peeled_relaxation.PEEL_IDEALS):
        peeled = peeled_relaxation.solve_peeled(problem, stage, lattice, clock, max_threads,
                                                upper, incumbent, stats)
        if peeled is not None and peeled.proven:
            stats.update(threads=n_threads, slices_priced=0, slices_pruned=0, timed_out=False)
            return result_from_plan(
                problem, peeled.plan, method="dp", clock=clock, proven=True,
                search_space=search_space(problem, "contiguous splits in pipeline order"),
                **stats)
        if peeled is not None:
            upper, incumbent, cells = peeled.objective, peeled.plan, peeled.cell_mask
            offer(problem, incumbent, "the peeled relaxation's extended plan")
            stats["upper_bound"] = upper
    out = run_dp(problem, stage, lattice, upper=upper, clock=clock, progress=progress,
                 replication=replication, work_bound=flag(work_bound, "work_bound"),
                 threads=n_threads, cell_mask=cells)
    stats["threads"] = n_threads
    stats.update(slices_priced=out.slices_priced, slices_pruned=out.slices_pruned,
                 timed_out=not out.finished)
    # The pruned DP is exact only below the bound; at or above it the incumbent is optimal.
    improved = out.assignment is not None and out.value < upper
    plan = out.plan() if improved else incumbent
    optimal_value = out.value if improved else upper
    # With replication on a hierarchy the DP prices every link at the host rate: its plan is
    # scored by the evaluator's hierarchy pricing but not proven optimal for it.
    proven = out.finished and not gpipe and not hierarchical
    exact_bound = gpipe and out.finished and plan is not None and not hierarchical
    bound = optimal_value if exact_bound else None
    space = "contiguous splits in pipeline order" + (", stages replicated" if replication else "")
    if hierarchical:
        space += " (priced at the host link, not the hierarchy: not proven optimal)"
    return result_from_plan(problem, plan, method="dp", clock=clock, proven=proven, bound=bound,
                            search_space=search_space(problem, space), **stats)


def solve_dpl(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    merge_trivial: bool = True, replication: bool = False, **options: Any,
) -> SolveResult:
    """DP over the prefixes of a depth-first topological order of the forward graph.

    The linearization adds artificial chain edges, so the graph has only ``n + 1`` ideals;
    the split is contiguous but not guaranteed optimal (status FEASIBLE, no bound).
    ``replication`` as for :func:`solve_dp`.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> r = solve_dpl(chain_problem([4, 1, 1, 4], n_accelerators=2))
    >>> r.status.value, r.objective
    ('feasible', 5.0)
    """
    check_options(options, "dpl")
    replication = flag(replication, "replication")
    clock = Stopwatch(time_limit)
    stage = _stage_graph(problem, merge_trivial)
    lattice = dfs_lattice(stage)
    out = run_dp(problem, stage, lattice, clock=clock, progress=progress, label="DPL",
                 replication=replication)
    plan = out.plan()
    # Not proven: linearization drops splits, so "no plan" does not prove infeasibility.
    return result_from_plan(
        problem, plan, method="dpl", clock=clock, proven=False,
        search_space=search_space(problem, "contiguous splits along one linear order"),
        n_ideals=lattice.n_ideals, n_stage_nodes=stage.n_stage_nodes,
        slices_priced=out.slices_priced, timed_out=not out.finished,
    )


def _stage_graph(problem: Problem, merge_trivial: bool) -> StageGraph:
    limit = float(problem.cluster.memory_capacity().min())
    return build_stage_graph(problem.graph, merge_trivial=merge_trivial, memory_limit=limit)


def _table_bytes(problem: Problem, replication: bool, threads: int = 1) -> int:
    """Bytes per ideal of :func:`~dnnpart.solvers.dp.driver.run_dp`'s tables (value,
    back-pointers, counts), one stamp per thread, the work bound's and the levels' per-ideal
    sums, and the peeled relaxation's cell mask
    (:func:`~dnnpart.solvers.dp.peeled.solve_peeled`)."""
    cells = (problem.cluster.n_accelerators + 1) * (problem.cluster.n_cpus + 1)
    # + the peeled relaxation's map to its lattice and its cell mask (<= PEEL_RATIO of the
    # ideals); its own tables (<= 2 x PEEL_RATIO of these) are freed before these exist
    return cells * (8 + 4 + 1 + 1 + (2 if replication else 0)) + 4 * threads + 16 + 4
