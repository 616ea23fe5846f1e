"""Binary indexed (Fenwick) trees over level ranks (paper 2, §3.1.2, ref. [50]).

LFLAM keeps, per device and for the unmapped work, the computation per distinct top level
so that "work whose level falls in ``span(sc)``" is a logarithmic range sum. The kernels live
in :mod:`dnnpart.solvers.pardnn.kernels`; this wrapper is for callers and tests.
"""

from __future__ import annotations

import numpy as np

from dnnpart.solvers.pardnn import kernels as k


class Fenwick:
    """Point updates and range sums over positions ``0..size-1``.

    Examples
    --------
    >>> f = Fenwick(5)
    >>> f.add(1, 2.0); f.add(3, 5.0)
    >>> f.range_sum(0, 4), f.range_sum(2, 5), f.range_sum(4, 2)
    (7.0, 5.0, 0.0)
    """

    def __init__(self, size: int) -> None:
        self.tree = np.zeros(size + 1)

    @property
    def size(self) -> int:
        return int(self.tree.shape[0]) - 1

    def add(self, i: int, delta: float) -> None:
        if not 0 <= i < self.size:
            raise IndexError(f"position {i} outside 0..{self.size - 1}")
        k.fw_add(self.tree, i, float(delta))

    def prefix_sum(self, i: int) -> float:
        """Sum of positions ``[0, i)``."""
        return float(k.fw_prefix(self.tree, min(max(i, 0), self.size)))

    def range_sum(self, lo: int, hi: int) -> float:
        """Sum of positions ``[lo, hi)`` (0 when empty)."""
        lo, hi = max(lo, 0), min(hi, self.size)
        return float(k.fw_range(self.tree, lo, hi))
