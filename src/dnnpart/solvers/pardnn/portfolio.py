"""Step-1 portfolio and refinement of ``--method pardnn`` (ours, not paper 2's).

The paper's step 1 (slicing + LFLAM) is scored by the op-level emulator beside up to three
other placements built from the same costs and constraints; the two of lowest emulated
makespan (ties: the earlier candidate) are each refined by :mod:`dnnpart.solvers.pardnn.
refine` (single nodes moved off the emulated critical chain, ``refine_evals`` emulations
each) and the better result is kept (ties: the better-ranked one):

1. ``pardnn``: the paper's step 1;
2. ``pardnn-lc-slicing`` (``lc_slicing=true``, graphs of at most :data:`LC_SLICING_MAX_NODES`
   nodes): the paper's LFLAM on the slicing of linear clustering -- the same K primaries,
   then every secondary a heaviest path with the levels recomputed after each path instead
   of Alg. 1's stale levels (O(V (V + E)), hence the size limit);
3. ``pardnn-slicing-glb`` (``glb_mapping=true``): Alg. 1's slicing mapped by GLB with
   EST-first ordering (the mapping of the LC+GLB baseline, :mod:`dnnpart.baselines.
   linear_clustering`) instead of LFLAM;
4. ``cp-heuristic`` (``cp_guard=true``): the CP heuristic.

Reasons and figures: ``docs/methods/pardnn.md``, "Step-1 portfolio and refinement". On the captured
training graphs the paper's step 1 alone is strictly faster than LC+GLB in 9 of 20 cells;
candidate 2 wins where stale secondaries cut an unrolled LSTM badly, candidate 3 where
LFLAM's K fixed primaries keep the devices of an unrolled LSTM waiting on each other, 4
where the K primaries swallow a narrow graph, and the refinement removes transfers and
idle waits that LFLAM's level estimates cannot see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dnnpart.solvers.pardnn.constraints import follow_variables
from dnnpart.solvers.pardnn.inputs import Costs, IntArray
from dnnpart.solvers.pardnn.refine import Refined, refine
from dnnpart.solvers.pardnn.slicing import Slicing

#: Largest graph for the linear-clustering slicing candidate (its O(V (V + E)) slicing takes
#: ~1 s at 15k nodes on one core).
LC_SLICING_MAX_NODES = 30_000

#: Default emulations the refinement may spend (``refine_evals=auto``: this many, fewer on
#: large graphs so that emulations x nodes stays within :data:`REFINE_WORK`).
REFINE_EVALS = 200

#: The best candidates (by emulated makespan) that are refined, each with the whole budget;
#: the better refined one is kept (ties: the better-ranked candidate).
REFINED_CANDIDATES = 2

#: Node-emulations the default refinement budget allows: 200 emulations up to 20k nodes,
#: 20 at 200k (one emulation of 200k nodes costs ~0.15 s).
REFINE_WORK = 4_000_000


def default_refine_evals(n: int) -> int:
    """``refine_evals=auto``: ``min(200, max(10, 4e6 // n))``, deterministic in the graph size.

    Examples
    --------
    >>> default_refine_evals(15_000), default_refine_evals(200_000), default_refine_evals(10**7)
    (200, 20, 10)
    """
    return min(REFINE_EVALS, max(10, REFINE_WORK // max(n, 1)))


def step_one_portfolio(
    graph: Any, cluster: Any, costs: Costs, k: int, to_global: IntArray, device: IntArray,
    fixed: IntArray, variable: IntArray, *, slicing: Slicing | None = None, cp_guard: bool = True,
    lc_slicing: bool = True, glb_mapping: bool = True, refine_evals: int | None = None,
    time_limit: float | None = None, stop: Callable[[], bool] | None = None,
) -> tuple[IntArray, dict[str, Any]]:
    """The better of the two best emulated step-1 candidates, refined; ``(device, stats)``.

    ``device`` is the paper's step 1 (local devices; ``to_global`` maps them onto
    ``cluster``) and ``slicing`` the Alg. 1 slicing it came from (recomputed when absent);
    ``fixed`` (pins, ``-1`` free) and ``variable`` (group leaders) constrain
    every candidate. ``refine_evals`` ``None`` means :func:`default_refine_evals`. ``stats``
    holds ``step1_source`` (the kept candidate) and its refinement's ``refine_moves``,
    ``refine_evals``. ``stop``
    ends the refinement early (Ctrl-C), keeping its best placement.
    """
    from dnnpart.simulate import emulate_ops

    free_var = np.where(fixed < 0, variable, -1)

    def constrained(d: IntArray) -> IntArray:
        d = np.where(fixed >= 0, fixed, d).astype(np.int64)
        return follow_variables(d, free_var)

    candidates: list[tuple[str, IntArray]] = [("pardnn", device)]
    if lc_slicing and costs.n <= LC_SLICING_MAX_NODES and k > 1:
        from dnnpart.solvers.pardnn.baselines.linear_clustering import linear_clusters
        from dnnpart.solvers.pardnn.mapping import lflam

        free = fixed < 0
        cl, ptr, nodes, _ = linear_clusters(costs, free=free)
        d2, _ = lflam(costs, Slicing(cluster=cl, cl_ptr=ptr, cl_nodes=nodes, k=k), fixed)
        candidates.append(("pardnn-lc-slicing", constrained(d2)))
    if glb_mapping and k > 1:
        from dnnpart.solvers.pardnn.baselines.linear_clustering import glb_est_first
        from dnnpart.solvers.pardnn.slicing import slice_graph

        sl = slicing if slicing is not None else slice_graph(costs, k, fixed < 0)
        d3 = glb_est_first(costs, sl.cluster, sl.cl_ptr, sl.cl_nodes, k)
        candidates.append(("pardnn-slicing-glb", constrained(d3)))
    if cp_guard and k > 1:
        from dnnpart.solvers.pardnn.baselines.cp_heuristic import cp_heuristic

        candidates.append(("cp-heuristic", constrained(cp_heuristic(costs, k))))

    def emulate(d: IntArray) -> Any:
        return emulate_ops(graph, cluster, to_global[d], memory=False)

    spans = [emulate(d).makespan for _, d in candidates]
    ranked = sorted(range(len(candidates)), key=lambda i: (spans[i], i))  # ties: the earlier
    if refine_evals is None:
        refine_evals = default_refine_evals(costs.n)
    if refine_evals <= 0 or k <= 1:
        source, chosen = candidates[ranked[0]]
        return chosen, {"step1_source": source}
    best: tuple[Refined, int] | None = None
    for i in ranked[:REFINED_CANDIDATES]:
        r = refine(candidates[i][1], emulate, pred_ptr=costs.pred_ptr, pred_idx=costs.pred_idx,
                   succ_ptr=costs.succ_ptr, succ_idx=costs.succ_idx, k=k, variable=free_var,
                   fixed=fixed, max_evals=refine_evals, time_limit=time_limit, stop=stop)
        if best is None or r.makespan < best[0].makespan:
            best = (r, i)
    assert best is not None
    r, i = best
    return r.device, {"step1_source": candidates[i][0], "refine_moves": r.moves, "refine_evals": r.evals}
