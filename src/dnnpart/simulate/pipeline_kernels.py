"""Numba kernel of the pipeline simulator: timing of a DAG of ops with fixed device orders.

The schedule (GPipe, 1F1B) fixes each device's op order; that order is one more dependency
per op (its device predecessor, delay 0), so every op starts at the latest of its
dependencies' finish plus delay. Plain-Python twin: ``timing_kernel.py_func``.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from dnnpart.graph.kernels import kahn_order as _kahn_kernel
from dnnpart.interrupt import shield_numba_compiles

shield_numba_compiles()  # numba compilations are not cut by the stop backstop

#: The graph layer's Kahn order, compiled here so that a numba kernel can call it.
_kahn = numba.njit(cache=True)(_kahn_kernel.py_func)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@numba.njit(cache=True)
def timing_kernel(dur: FloatArray, ptr: IntArray, pred: IntArray,
                  delay: FloatArray) -> tuple[FloatArray, FloatArray, int]:
    """Start and finish of every op (Kahn order); the count of timed ops (< n: a cycle).

    ``pred[ptr[v]:ptr[v+1]]`` are op ``v``'s dependencies, ``delay`` the time between a
    dependency's finish and ``v``'s earliest start (a transfer; 0 for the device order).
    """
    n = dur.shape[0]
    m = pred.shape[0]
    # successor lists, to release ops in Kahn order
    cnt = np.zeros(n + 1, np.int64)
    for e in range(m):
        cnt[pred[e] + 1] += 1
    sptr = np.cumsum(cnt)
    fill = sptr[:-1].copy()
    succ = np.empty(m, np.int64)
    for v in range(n):
        for e in range(ptr[v], ptr[v + 1]):
            u = pred[e]
            succ[fill[u]] = v
            fill[u] += 1
    order, timed = _kahn(n, sptr, succ)
    start = np.zeros(n)
    finish = np.zeros(n)
    for k in range(timed):
        v = order[k]
        s = 0.0
        for e in range(ptr[v], ptr[v + 1]):
            t = finish[pred[e]] + delay[e]
            if t > s:
                s = t
        start[v] = s
        finish[v] = s + dur[v]
    return start, finish, timed
