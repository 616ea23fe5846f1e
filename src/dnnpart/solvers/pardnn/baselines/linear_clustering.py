"""Linear clustering + GLB with EST-first ordering (paper 2's LC baseline, refs. [25, 27, 37]).

* **Linear clustering** (Kim & Browne): repeatedly take a heaviest path (comp + comm) of the
  graph left, recomputing the levels after *every* path, until no node is left: O(V (V + E)).
  Paths are taken in batches of :data:`BATCH` between time checks; when ``time_limit``
  expires, the nodes still left are cut into linear clusters with the levels of that moment,
  without recomputation (PARDNN's secondary rule), and ``finished`` is False.
* **GLB** (guided load balancing, Radulescu & van Gemund) with EST-first ordering: the
  clusters, ordered by the earliest start time of their first node (top level with the
  communication inside clusters set to zero; ties to the lower first node), each go to the
  device with the least computation so far (ties to the lowest index).
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from dnnpart.solvers.pardnn import kernels as kern
from dnnpart.solvers.pardnn.inputs import Costs, IntArray
from dnnpart.solvers.pardnn.levels import levels

#: Paths extracted between two checks of the time budget.
BATCH = 64


def linear_clusters(
    costs: Costs, time_limit: float | None = None, *, free: npt.NDArray[np.bool_] | None = None,
) -> tuple[IntArray, IntArray, IntArray, bool]:
    """``(cluster, cl_ptr, cl_nodes, finished)``: node -> cluster and clusters in path order.

    Nodes outside ``free`` (default: none) belong to no cluster (``-1``), as in
    :func:`~dnnpart.solvers.pardnn.slicing.slice_graph`.
    """
    alive = np.ones(costs.n, np.bool_) if free is None else np.asarray(free, np.bool_).copy()
    n = int(alive.sum())
    cluster = np.full(costs.n, -1, np.int64)
    order_nodes = np.zeros(costs.n, np.int64)
    ptr = np.zeros(n + BATCH + 1, np.int64)
    start = time.perf_counter()
    pos, c = 0, 0
    while pos < n:
        if time_limit is not None and time.perf_counter() - start > time_limit:
            break
        pos = int(kern.slice_primaries(costs.succ_ptr, costs.succ_idx, costs.comp, costs.comm, alive,
                                       BATCH, cluster, order_nodes, ptr, c, pos))
        c += BATCH
    finished = pos >= n
    # drop the empty trailing clusters of the last batch
    c = int(np.searchsorted(ptr[: c + 1], pos, side="left"))
    if not finished:
        tl = kern.top_levels(costs.succ_ptr, costs.succ_idx, costs.comp, costs.comm, alive)
        bl = kern.bottom_levels(costs.succ_ptr, costs.succ_idx, costs.comp, costs.comm, alive)
        live = np.flatnonzero(alive)
        order = live[np.lexsort((live, tl[live], -(tl[live] + bl[live])))].astype(np.int64)
        c = int(kern.slice_secondaries(order, costs.succ_ptr, costs.succ_idx, costs.comm, bl, alive, cluster,
                                       order_nodes, ptr, pos, c))
    return cluster, ptr[: c + 1].copy(), order_nodes[: int(ptr[c])].copy(), finished


def glb_est_first(costs: Costs, cluster: IntArray, cl_ptr: IntArray, cl_nodes: IntArray, k: int) -> IntArray:
    """GLB with EST-first ordering: node -> device (``-1`` for nodes outside every cluster)."""
    src = costs.edge_sources()
    key = np.where(cluster >= 0, cluster, -2 - np.arange(costs.n))  # unclustered: each its own
    comm_cl = np.where(key[src] != key[costs.succ_idx], costs.comm, 0.0)
    tl, _ = levels(costs, comm=comm_cl)
    n_cl = len(cl_ptr) - 1
    # a slicing may hold empty clusters (primaries after the graph ran out): they get no device
    nonempty = np.flatnonzero(np.diff(cl_ptr) > 0)
    first = cl_nodes[cl_ptr[nonempty]]
    order = nonempty[np.lexsort((first, tl[first]))]
    weight = np.bincount(cluster[cl_nodes], weights=costs.comp[cl_nodes], minlength=n_cl)
    device_of = np.zeros(n_cl, np.int64)
    loads = [0.0] * k
    for c in order.tolist():
        d = min(range(k), key=lambda q: (loads[q], q))
        device_of[c] = d
        loads[d] += float(weight[c])
    out: IntArray = np.where(cluster >= 0, device_of[np.maximum(cluster, 0)], -1)
    return out


def linear_clustering(costs: Costs, k: int, time_limit: float | None = None) -> tuple[IntArray, bool]:
    """Node -> device of LC + GLB (EST-first), and whether LC finished within ``time_limit``.

    Examples
    --------
    >>> c = Costs.from_edges(4, [0, 0, 1, 2], [1, 2, 3, 3], comp=[1.0, 5.0, 2.0, 1.0],
    ...                      comm=[1.0, 1.0, 1.0, 1.0])
    >>> device, finished = linear_clustering(c, 2)
    >>> device.tolist(), finished
    ([0, 0, 1, 0], True)
    """
    cluster, cl_ptr, cl_nodes, finished = linear_clusters(costs, time_limit)
    return glb_est_first(costs, cluster, cl_ptr, cl_nodes, k), finished
