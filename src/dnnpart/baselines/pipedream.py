"""PipeDream's optimizer as paper 1 ran it (section 6, "Baselines").

PipeDream partitions a *path* of layers by dynamic programming. Paper 1 runs it on branching
layer graphs by first contracting every branching region into a single node
(:mod:`dnnpart.graph.branching`), then putting the contracted graph in one linear order
and running the DP over the prefixes of that order.

Steps, on the same preprocessing as the DP (colocation classes and the cycles they create
contracted, zero-time nodes with one neighbour merged into it):

1. skeleton of the forward stage DAG, leaving out the edges out of *fan-out* nodes: nodes
   that take no time, have at most one input and several consumers (inputs and broadcasts
   of one tensor, e.g. BERT's attention mask feeding all 24 layers). PipeDream's profiler
   does not see them as layers, and they make no branch: a consumer can read the tensor
   wherever it runs. Zero-time *joins* (Inception's concatenations) stay: they close real
   branches;
2. the tails of every biconnected component with a cycle become one colocation class;
3. DP over a linear order of the result (our ``dpl`` on the recoloured graph); the plan is
   scored on the original problem.

For the ``pipeline`` objective (paper 4's baseline, "PipeDream + CS") step 3 is instead
Parmesan's phase-1 DP with a fixed stage count ``S`` and ``R`` replicas per stage
(``stages``, ``replicas`` options, or searched over every ``S * R <= D`` as for
``parmesan``) on the contracted graph, without clustering or refinement, and the stages are
mapped by CS (``mapping=cs``; ``mapping=parmesan`` gives paper 4's "+ our map" row). When the
contracted graph's fronted subgraphs do not fit the DP's cap (autograd graphs such as Swin-L's
keep hundreds of parameter sources after the contraction), the DP runs over the prefixes of one
linear order (every source just before its first consumer) -- PipeDream's own path DP.
"""

from __future__ import annotations

from typing import Any

from dnnpart.errors import UsageError
from dnnpart.graph.branching import contract_branches
from dnnpart.plan import SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.dp import solve_dpl
from dnnpart.solvers.method import CONTIGUOUS, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.parmesan.solver import pipeline_options
from dnnpart.solvers.result import result_from_plan


def pipedream_problem(problem: Problem, *, ignore_inputs: bool = True) -> tuple[Problem, int]:
    """``problem`` with every branching region made one colocation class.

    Returns the recoloured problem and the number of forward stage nodes left.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p2, n_left = pipedream_problem(chain_problem([1, 2, 3], n_accelerators=2))
    >>> n_left
    3
    """
    limit = float(problem.cluster.memory_capacity().min())
    recoloured, n_left = contract_branches(problem.graph, memory_limit=limit, ignore_inputs=ignore_inputs)
    return (Problem(graph=recoloured, cluster=problem.cluster, objective=problem.objective,
                    name=problem.name), n_left)


def solve_pipedream(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    ignore_inputs: bool = True, **options: Any,
) -> SolveResult:
    """PipeDream's partitioner on a branching graph, as paper 1 ran it.

    Parameters
    ----------
    ignore_inputs : leave the edges out of fan-out nodes (zero time, at most one input,
        several consumers) out of the search for branching regions, as PipeDream does.
        ``False`` reproduces what paper 1's code prints for BERT-24 and GNMT training.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> r = solve_pipedream(chain_problem([4, 1, 1, 4], n_accelerators=2))
    >>> r.objective
    5.0
    """
    if problem.objective.kind == "pipeline":
        from dnnpart.solvers.parmesan.solver import run_parmesan

        contracted, _ = pipedream_problem(problem, ignore_inputs=ignore_inputs)
        options.setdefault("mapping", "cs")
        return run_parmesan(
            problem, method="pipedream", time_limit=time_limit, progress=progress, k=None,
            refine_steps=0, graph=contracted.graph, path_fallback=True,
            partition_name="PipeDream's layer-path partition",
            search_space="pipelines of S stages x R replicas over the branch-contracted path, "
                         "on S * R of the accelerators",
            **options)
    options.pop("deterministic", None)  # the throughput DP is deterministic already
    if options:
        raise UsageError(f"pipedream: option(s) {sorted(options)} apply to --objective pipeline "
                         "only")
    clock = Stopwatch(time_limit)
    contracted, n_left = pipedream_problem(problem, ignore_inputs=ignore_inputs)
    if progress is not None:
        progress.update(f"pipedream: {n_left:,} nodes after contracting branches", 0.0)
    remaining = None if time_limit is None else max(1e-3, time_limit - clock.elapsed)
    inner = solve_dpl(contracted, time_limit=remaining, progress=progress)
    return result_from_plan(
        problem, inner.plan, method="pipedream", clock=clock, proven=False,
        search_space="contiguous splits of the graph with branching regions contracted",
        n_path_nodes=n_left, timed_out=bool(inner.stats.get("timed_out", False)),
    )


PIPEDREAM = MethodInfo(
    name="pipedream", func=solve_pipedream,
    summary="PipeDream's DP: contract branching regions to a path, then split the path",
    guarantee="baseline; contiguous split, optimal only over splits of the contracted path",
    objectives=("throughput", "pipeline"),
    source="paper 1, section 6 (baseline, after PipeDream [NHP+19]); paper 4, Table 1",
    options=(
        Option("ignore_inputs", bool, True, "leave input transfers out, as PipeDream did"),
        *pipeline_options(clustering=False, refinement=False, seed_option=False,
                          mapping_default="cs"),
    ),
    space=CONTIGUOUS,
)


METHODS = (PIPEDREAM,)
