"""Step-1 portfolio and refinement of ``--method pardnn`` (ours, not paper 2's).

The paper's step 1 (slicing + LFLAM) is scored by the op-level emulator beside up to two
other placements built from the same costs and constraints, the lowest emulated makespan is
kept (ties: the earlier candidate), and :mod:`dnnpart.solvers.pardnn.refine` then moves
single nodes off its emulated critical chain:

1. ``pardnn``: the paper's step 1;
2. ``pardnn-lc-slicing`` (``lc_slicing=true``, graphs of at most :data:`LC_SLICING_MAX_NODES`
   nodes): the paper's LFLAM on the slicing of linear clustering -- the same K primaries,
   then every secondary a heaviest path with the levels recomputed after each path instead
   of Alg. 1's stale levels (O(V (V + E)), hence the size limit);
3. ``cp-heuristic`` (``cp_guard=true``): the CP heuristic.

Reasons and figures: ``docs/pardnn.md``, "Step-1 portfolio and refinement". On the captured
training graphs the paper's step 1 alone is strictly faster than LC+GLB in 9 of 20 cells;
candidate 2 wins where stale secondaries cut an unrolled LSTM badly, candidate 3 where the
K primaries swallow a narrow graph, and the refinement removes transfers and idle waits
that LFLAM's level estimates cannot see.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.solvers.pardnn.constraints import follow_variables
from dnnpart.solvers.pardnn.inputs import Costs, IntArray
from dnnpart.solvers.pardnn.refine import refine

#: Largest graph for the linear-clustering slicing candidate (its O(V (V + E)) slicing takes
#: ~1 s at 15k nodes on one core).
LC_SLICING_MAX_NODES = 30_000

#: Default emulations the refinement may spend.
REFINE_EVALS = 200


def step_one_portfolio(
    graph: Any, cluster: Any, costs: Costs, k: int, to_global: IntArray, device: IntArray,
    fixed: IntArray, variable: IntArray, *, cp_guard: bool = True, lc_slicing: bool = True,
    refine_evals: int = REFINE_EVALS, time_limit: float | None = None,
) -> tuple[IntArray, dict[str, Any]]:
    """The best emulated step-1 candidate, refined; ``(device, stats)``.

    ``device`` is the paper's step 1 (local devices; ``to_global`` maps them onto
    ``cluster``); ``fixed`` (pins, ``-1`` free) and ``variable`` (group leaders) constrain
    every candidate. ``stats`` holds ``step1_source`` and the refinement's ``refine_moves``,
    ``refine_evals``.
    """
    from dnnpart.simulate import emulate_ops

    free_var = np.where(fixed < 0, variable, -1)

    def constrained(d: IntArray) -> IntArray:
        d = np.where(fixed >= 0, fixed, d).astype(np.int64)
        return follow_variables(d, free_var)

    candidates: list[tuple[str, IntArray]] = [("pardnn", device)]
    if lc_slicing and costs.n <= LC_SLICING_MAX_NODES and k > 1:
        from dnnpart.baselines.linear_clustering import linear_clusters
        from dnnpart.solvers.pardnn.mapping import lflam
        from dnnpart.solvers.pardnn.slicing import Slicing

        free = fixed < 0
        cl, ptr, nodes, _ = linear_clusters(costs, free=free)
        d2, _ = lflam(costs, Slicing(cluster=cl, cl_ptr=ptr, cl_nodes=nodes, k=k), fixed)
        candidates.append(("pardnn-lc-slicing", constrained(d2)))
    if cp_guard and k > 1:
        from dnnpart.baselines.cp_heuristic import cp_heuristic

        candidates.append(("cp-heuristic", constrained(cp_heuristic(costs, k))))

    def emulate(d: IntArray) -> Any:
        return emulate_ops(graph, cluster, to_global[d], memory=False)

    spans = [emulate(d).makespan for _, d in candidates]
    pick = int(np.argmin(spans))  # first of the lowest: ties keep the earlier candidate
    source, chosen = candidates[pick]
    stats: dict[str, Any] = {"step1_source": source}
    if refine_evals > 0 and k > 1:
        r = refine(chosen, emulate, pred_ptr=costs.pred_ptr, pred_idx=costs.pred_idx,
                   succ_ptr=costs.succ_ptr, succ_idx=costs.succ_idx, k=k, variable=free_var,
                   fixed=fixed, max_evals=refine_evals, time_limit=time_limit)
        chosen = r.device
        stats.update(refine_moves=r.moves, refine_evals=r.evals)
    return chosen, stats
