"""The critical-path heuristic of Mayer et al. (paper 2's ref. [19], "CP"), placement only.

The critical path (computation + communication, :mod:`dnnpart.solvers.pardnn.slicing`'s
first primary) goes to device 0; every other node, in topological order, goes to the device
with the least computation assigned so far (the critical path counted on device 0 from the
start; ties to the lowest index). Paper 2 (§5.3.1): it ignores locality off the critical path.
"""

from __future__ import annotations

import numpy as np

from dnnpart.solvers.pardnn.inputs import Costs, IntArray
from dnnpart.solvers.pardnn.slicing import slice_graph


def cp_heuristic(costs: Costs, k: int) -> IntArray:
    """Node -> device of the CP heuristic on ``k`` identical devices.

    Examples
    --------
    >>> c = Costs.from_edges(4, [0, 0, 1, 2], [1, 2, 3, 3], comp=[1.0, 5.0, 2.0, 1.0],
    ...                      comm=[1.0, 1.0, 1.0, 1.0])
    >>> cp_heuristic(c, 2).tolist()
    [0, 0, 1, 0]
    """
    cp = slice_graph(costs, 1).members(0)
    device = np.full(costs.n, -1, np.int64)
    device[cp] = 0
    loads = [0.0] * k
    loads[0] = float(costs.comp[cp].sum())
    for v in np.flatnonzero(device < 0).tolist():
        d = min(range(k), key=lambda q: (loads[q], q))
        device[v] = d
        loads[d] += float(costs.comp[v])
    return device
