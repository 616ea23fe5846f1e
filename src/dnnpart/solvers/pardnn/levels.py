"""Top, bottom and weighted levels (paper 2, Table 2) with computation and communication.

``tl(n)``: heaviest path from the artificial source to ``n``, ``n`` excluded; ``bl(n)``:
heaviest path from ``n`` (included) to the artificial sink; ``w_lvl = tl + bl``. The source
and sink weigh nothing and their edges cost nothing, so they are implicit. ``alive`` restricts
the graph to the residual one left after removing clusters (Alg. 1, line 11).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dnnpart.solvers.pardnn import kernels as k
from dnnpart.solvers.pardnn.inputs import Costs, FloatArray

BoolArray = npt.NDArray[np.bool_]


def levels(
    costs: Costs, alive: BoolArray | None = None, comm: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """``(tl, bl)`` of the live nodes (dead nodes get 0); ``comm`` overrides edge costs.

    Examples
    --------
    >>> c = Costs.from_edges(3, [0, 0, 1], [1, 2, 2], comp=[1.0, 2.0, 3.0], comm=[1.0, 5.0, 1.0])
    >>> tl, bl = levels(c)
    >>> tl.tolist(), bl.tolist()
    ([0.0, 2.0, 6.0], [9.0, 6.0, 3.0])
    """
    live = np.ones(costs.n, np.bool_) if alive is None else np.asarray(alive, np.bool_)
    w = costs.comm if comm is None else comm
    tl = k.top_levels(costs.succ_ptr, costs.succ_idx, costs.comp, w, live)
    bl = k.bottom_levels(costs.succ_ptr, costs.succ_idx, costs.comp, w, live)
    return tl, bl


def critical_path_length(costs: Costs, *, with_comm: bool = True) -> float:
    """Length of the heaviest source-to-sink path (computation, plus communication if asked).

    Examples
    --------
    >>> c = Costs.from_edges(3, [0, 1], [1, 2], comp=[1.0, 2.0, 3.0], comm=[1.0, 1.0])
    >>> critical_path_length(c), critical_path_length(c, with_comm=False)
    (8.0, 6.0)
    """
    comm = costs.comm if with_comm else np.zeros_like(costs.comm)
    _, bl = levels(costs, comm=comm)
    return float(bl.max()) if bl.size else 0.0
