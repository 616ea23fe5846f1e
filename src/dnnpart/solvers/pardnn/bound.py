"""Makespan lower bound over placements without memory caps.

Any schedule on K identical devices runs every node, so it lasts at least Σcomp / K; and it
runs the nodes of every path one after another, so at least the heaviest path counted without
communication (co-locating a path removes its transfers). The bound is the larger of the two.
"""

from __future__ import annotations

from dnnpart.solvers.pardnn.inputs import Costs
from dnnpart.solvers.pardnn.levels import critical_path_length


def makespan_lower_bound(costs: Costs, k: int) -> float:
    """``max(critical path without communication, Σ comp / K)``.

    Examples
    --------
    >>> c = Costs.from_edges(3, [0], [1], comp=[2.0, 3.0, 4.0], comm=[9.0])
    >>> makespan_lower_bound(c, 2), makespan_lower_bound(c, 1)
    (5.0, 9.0)
    """
    return max(critical_path_length(costs, with_comm=False), float(costs.comp.sum()) / k)
