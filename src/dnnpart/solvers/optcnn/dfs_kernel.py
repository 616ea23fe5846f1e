"""Numba kernel of the depth-first search baseline (``.py_func``: the uncompiled source, for
compilation checks; ``tests/twins/test_optcnn_dfs_twin.py`` holds the brute-force twin).

The search is iterative with its whole state in arrays, so the wrapper
(:func:`dnnpart.solvers.optcnn.baselines.dfs`) can run it in slices of ``max_steps`` and check
its time budget between slices.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dnnpart._jit import kernel

__all__ = ["dfs_steps"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@kernel
def dfs_steps(sizes: IntArray, node_off: IntArray, node_flat: FloatArray, in_ptr: IntArray,
              in_src: IntArray, in_off: IntArray, tab_flat: FloatArray, assign: IntArray,
              partial: FloatArray, state: IntArray, best: FloatArray, best_assign: IntArray,
              max_steps: int, prune: bool) -> int:
    """Advance the DFS by at most ``max_steps`` configuration visits; returns the visits made.

    ``assign[i]`` is the configuration tried at depth ``i`` (-1: none yet), ``partial[i]`` the
    Eq. 1 sum of layers ``< i``, ``state[0]`` the depth (-1 once finished), ``best[0]`` and
    ``best_assign`` the incumbent. With ``prune`` a branch stops once its partial sum reaches
    the incumbent; without, every complete strategy is evaluated (exhaustive DFS).
    """
    n = sizes.shape[0]
    steps = 0
    depth = state[0]
    while depth >= 0 and steps < max_steps:
        c = assign[depth] + 1
        if c == sizes[depth]:
            assign[depth] = -1
            depth -= 1
            continue
        assign[depth] = c
        steps += 1
        cols = sizes[depth]
        cost = partial[depth] + node_flat[node_off[depth] + c]
        for e in range(in_ptr[depth], in_ptr[depth + 1]):
            cost += tab_flat[in_off[e] + assign[in_src[e]] * cols + c]
        if prune and cost >= best[0]:
            continue
        if depth == n - 1:
            if cost < best[0]:
                best[0] = cost
                for i in range(n):
                    best_assign[i] = assign[i]
        else:
            partial[depth + 1] = cost
            depth += 1
    state[0] = depth
    return steps
