"""Elimination kernels of Algorithm 1 over configuration tables (numpy, no graph bookkeeping).

* :func:`node_eliminate` is Eq. 2: the edge ``i -> k`` replacing ``i -> j -> k``.
* :func:`edge_eliminate` is Eq. 3: two parallel edges summed.
* :func:`leaf_eliminate` folds a node with a single edge into its neighbour's node cost; it is
  not one of the paper's rules and is used only by the exact completion of graphs that do not
  reduce to two nodes (:mod:`.search`).

Plain-Python twins live in ``tests/solvers/optcnn/test_kernels.py``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["edge_eliminate", "leaf_eliminate", "node_eliminate"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def node_eliminate(node_cost: FloatArray, x_in: FloatArray, x_out: FloatArray) -> tuple[FloatArray, IntArray]:
    """Eq. 2: ``t(c_i, c_k) = min_j node_cost[j] + x_in[c_i, j] + x_out[j, c_k]`` and its argmin.

    Examples
    --------
    >>> t, arg = node_eliminate(np.array([0.0, 5.0]), np.array([[1.0, 0.0]]), np.array([[0.0], [0.0]]))
    >>> t.tolist(), arg.tolist()
    ([[1.0]], [[0]])
    """
    total = x_in[:, :, None] + node_cost[None, :, None] + x_out[None, :, :]
    arg = total.argmin(axis=1)
    best = np.take_along_axis(total, arg[:, None, :], axis=1)[:, 0, :]
    return best, arg.astype(np.int64)


def edge_eliminate(x1: FloatArray, x2: FloatArray) -> FloatArray:
    """Eq. 3: the cost table of two parallel edges merged into one.

    Examples
    --------
    >>> edge_eliminate(np.eye(2), np.ones((2, 2))).tolist()
    [[2.0, 1.0], [1.0, 2.0]]
    """
    out: FloatArray = x1 + x2
    return out


def leaf_eliminate(node_cost: FloatArray, x: FloatArray) -> tuple[FloatArray, IntArray]:
    """Fold leaf ``j`` into neighbour ``i``: ``add[c_i] = min_j node_cost[j] + x[c_i, j]``.

    ``x`` is oriented neighbour-first (transpose it when the leaf is the edge's source).

    Examples
    --------
    >>> add, arg = leaf_eliminate(np.array([3.0, 1.0]), np.array([[0.0, 5.0], [0.0, 0.0]]))
    >>> add.tolist(), arg.tolist()
    ([3.0, 1.0], [0, 1])
    """
    total = x + node_cost[None, :]
    arg = total.argmin(axis=1).astype(np.int64)
    return np.take_along_axis(total, arg[:, None], axis=1)[:, 0], arg
