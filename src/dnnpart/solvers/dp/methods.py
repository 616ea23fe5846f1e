"""The ``dp`` and ``dpl`` methods: their declarations (:mod:`dnnpart.solvers.method`)."""

from __future__ import annotations

from dnnpart.limits import max_threads
from dnnpart.solvers.dp.hierarchy import DEFAULT_MAX_HIERARCHY_IDEALS
from dnnpart.solvers.dp.ideals import DEFAULT_MAX_IDEALS, DEFAULT_MAX_MEMORY_BYTES
from dnnpart.solvers.dp.solve import solve_dp, solve_dpl
from dnnpart.solvers.method import PIPELINE_ORDER, MethodInfo, Option

DP = MethodInfo(
    name="dp", func=solve_dp,
    summary="dynamic program over ideals: optimal contiguous split minimising max device load",
    guarantee="optimal contiguous split (pipeline order; forward and backward parts contiguous)",
    objectives=("throughput",),
    exact=True,
    source="paper 1, section 5.1.1, 5.3 and appendices B, C",
    options=(
        Option("max_ideals", int, DEFAULT_MAX_IDEALS, "refuse lattices with more ideals", minimum=1),
        Option("max_memory_bytes", int, DEFAULT_MAX_MEMORY_BYTES,
               "refuse when the lattice and DP tables would need more memory", minimum=1),
        Option("use_upper_bound", bool, True, "prune with DPL's value (exact either way)"),
        Option("work_bound", bool, True,
               "skip DP cells the work bound rules out below DPL's value (exact either way)"),
        Option("threads", int, None, "threads filling the rows of large lattices (default: all "
               "cores)", minimum=1, maximum=max_threads()),
        Option("merge_trivial", bool, True, "merge zero-time nodes into their only neighbour"),
        Option("peel", bool, True, "large lattices: first solve the graph without its light "
               "side nodes, a lower bound, and extend (exact either way)"),
        Option("replication", bool, False, "let a stage run on several devices (appendix C.2)"),
        Option("max_hierarchy_ideals", int, DEFAULT_MAX_HIERARCHY_IDEALS,
               "hierarchical clusters: refuse lattices with more ideals", minimum=1),
    ),
    space=PIPELINE_ORDER,
    # GPipe form on a training graph: the PipeDream-form optimum, with its value as the bound
    exact_forms=("pipedream",),
)

DPL = MethodInfo(
    name="dpl", func=solve_dpl,
    summary="DP on a DFS linearization of the graph (n+1 ideals): fast, near-optimal",
    guarantee="a contiguous split; not guaranteed optimal",
    objectives=("throughput",),
    exact=False,
    source="paper 1, section 5.1.2",
    options=(
        Option("merge_trivial", bool, True, "merge zero-time nodes into their only neighbour"),
        Option("replication", bool, False, "let a stage run on several devices (appendix C.2)"),
    ),
    space=PIPELINE_ORDER,
)


METHODS = (DP, DPL)
