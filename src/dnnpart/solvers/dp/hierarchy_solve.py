"""``dp`` on a hierarchical cluster (paper 1, appendix C.3): the hierarchy DP
(:mod:`dnnpart.solvers.dp.hierarchy`) bounded by the flat DP's split, as a method result."""

from __future__ import annotations

import math
from typing import Any

from dnnpart.errors import ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph.stage_graph import StageGraph
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.dp.devices import device_model
from dnnpart.solvers.dp.driver import run_dp
from dnnpart.solvers.dp.hierarchy import HierarchyOutcome, hierarchy_model, run_hierarchy_dp
from dnnpart.solvers.dp.ideals import enumerate_stage_ideals
from dnnpart.solvers.dp.options import check_cap, search_space
from dnnpart.solvers.incumbent import offer
from dnnpart.solvers.method import Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan


def solve_hierarchy(
    problem: Problem, stage: StageGraph, clock: Stopwatch, max_ideals: int,
    use_upper_bound: bool, progress: Progress | None,
) -> SolveResult:
    """The ``dp`` method's result on a hierarchical cluster, over the ideals of ``stage``.

    ``max_ideals``: the option ``max_hierarchy_ideals`` (``ProblemTooLargeError`` above it).
    With ``use_upper_bound`` the flat DP's split, priced on the hierarchy, bounds the search.

    Examples
    --------
    >>> from dnnpart.devices import two_level_cluster
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.testing import chain_graph
    >>> c = two_level_cluster(n_groups=2, accelerators_per_group=1, memory_bytes=1e9,
    ...                       intra_bandwidth=1e10, inter_bandwidth=1e9)
    >>> p = Problem(graph=chain_graph(4, acc_time=[4.0, 1.0, 1.0, 4.0]), cluster=c)
    >>> r = solve_hierarchy(p, build_stage_graph(p.graph), Stopwatch(None), 1000, True, None)
    >>> r.status.value, r.objective
    ('optimal', 5.0)
    """
    check_cap(max_ideals, "max_hierarchy_ideals")
    model = device_model(problem)
    levels = hierarchy_model(problem, model.comm_scale)
    try:
        lattice = enumerate_stage_ideals(stage, max_ideals=int(max_ideals))
    except ProblemTooLargeError as exc:
        raise ProblemTooLargeError(
            f"dp on a hierarchical cluster: more than {max_ideals:,} ideals (the hierarchy DP "
            "costs up to O(I^4)); raise max_hierarchy_ideals, or run the flat dp on a reference "
            f"cluster, or dpl ({exc})"
        ) from None
    if progress is not None:
        progress.update(f"DP (hierarchy): {lattice.n_ideals:,} ideals", 0.0)
    stats: dict[str, Any] = {"n_ideals": lattice.n_ideals, "n_stage_nodes": stage.n_stage_nodes,
                             "n_groups": len(levels.groups)}

    def run(upper: float) -> HierarchyOutcome:
        return run_hierarchy_dp(problem, stage, lattice, levels, acc_time=model.acc_time,
                                cpu_time=model.cpu_time, acc_cap=model.acc_cap,
                                cpu_cap=model.cpu_cap, upper=upper, clock=clock,
                                progress=progress)

    upper, flat = math.inf, None
    if use_upper_bound:
        # The flat DP's split, priced on the hierarchy, bounds the optimum only if it lies in
        # the space; so a run below it that finds nothing is repeated without it.
        flat = run_dp(problem, stage, lattice, clock=clock, label="flat DP bound").plan()
        if flat is not None:
            upper = evaluate(problem, flat).objective
            offer(problem, flat, "the flat DP's split", upper)
        stats["upper_bound"] = upper
    out = run(upper)
    priced = out.slices_priced
    if out.finished and out.assignment is None and math.isfinite(upper):
        out = run(math.inf)
        priced += out.slices_priced
    stats.update(slices_priced=priced, timed_out=not out.finished)
    plan = None if out.assignment is None else Plan(assignment=out.assignment)
    if plan is None and not out.finished and flat is not None and math.isfinite(upper):
        plan = flat  # stopped (time limit, Ctrl-C): the flat split is the best plan so far
    gpipe = problem.graph.is_training and problem.objective.training == "gpipe"
    proven = out.finished and not gpipe
    bound = out.value if (gpipe and out.finished and plan is not None) else None
    space = "contiguous splits in pipeline order, one segment per group (CPU stages between groups)"
    return result_from_plan(problem, plan, method="dp", clock=clock, proven=proven, bound=bound,
                            search_space=search_space(problem, space), **stats)
