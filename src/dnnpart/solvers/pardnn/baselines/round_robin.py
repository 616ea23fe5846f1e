"""Round-robin placement: node ``v`` (topological id) on device ``v mod K``."""

from __future__ import annotations

import numpy as np

from dnnpart.solvers.pardnn.inputs import Costs, IntArray


def round_robin(costs: Costs, k: int) -> IntArray:
    """Node -> device, cycling through the devices in topological order.

    Examples
    --------
    >>> round_robin(Costs.from_edges(5, [], [], comp=[1.0] * 5, comm=[]), 2).tolist()
    [0, 1, 0, 1, 0]
    """
    return np.arange(costs.n, dtype=np.int64) % k
