"""Graph slicing (paper 2, §3.1.1, Alg. 1): K primary and many secondary linear clusters.

* Primary ``j`` is a heaviest path (comp + comm) of the graph left after removing primaries
  ``0..j-1``, with the levels recomputed on that residual graph each time. The path starts at
  the live node of largest bottom level (lowest id on ties) and walks to the live successor
  maximising ``comm + bl``; with exact bottom levels this is a maximum-weight path.
* After the K-th primary the levels are computed once more on the residual graph and never
  again (Alg. 1's saving over linear clustering). Secondaries start at the live node of
  largest stale weighted level (ties: smaller top level, then lower id, so a stale critical
  path is entered at its first node) and walk the same way with the stale bottom levels until
  a dead end; a node with no live successor is a one-node cluster.

Choice where Alg. 1 is loose: its line 7 recomputes the levels *before* line 11 removes the
path; we recompute on the graph *after* removal, which is what the text ("levels recomputed"
on "the graph left") describes. Nodes outside ``free`` (pinned ones) belong to no cluster.
Cost: K + 1 level passes, O(K (V + E)), plus a sort, O(V log V).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.solvers.pardnn import kernels as k
from dnnpart.solvers.pardnn.inputs import Costs, IntArray


@dataclass(frozen=True, slots=True, eq=False)
class Slicing:
    """Clusters as CSR over nodes in path order.

    Attributes
    ----------
    cluster : node -> cluster id (primaries ``0..k-1``, secondaries ``k..n_clusters-1``;
        ``-1`` for nodes outside every cluster).
    cl_ptr, cl_nodes : cluster ``c`` is ``cl_nodes[cl_ptr[c]:cl_ptr[c+1]]`` in path order.
    k : number of primaries.
    """

    cluster: IntArray
    cl_ptr: IntArray
    cl_nodes: IntArray
    k: int

    @property
    def n_clusters(self) -> int:
        return int(self.cl_ptr.shape[0]) - 1

    def members(self, c: int) -> IntArray:
        return self.cl_nodes[self.cl_ptr[c] : self.cl_ptr[c + 1]]


def slice_graph(costs: Costs, k_primaries: int, free: npt.NDArray[np.bool_] | None = None) -> Slicing:
    """Alg. 1 on ``costs`` with ``k_primaries`` primaries.

    Examples
    --------
    >>> c = Costs.from_edges(4, [0, 0, 1, 2], [1, 2, 3, 3], comp=[1.0, 5.0, 1.0, 1.0],
    ...                      comm=[0.0, 0.0, 0.0, 0.0])
    >>> s = slice_graph(c, 1)
    >>> [s.members(i).tolist() for i in range(s.n_clusters)]
    [[0, 1, 3], [2]]
    """
    n = costs.n
    alive = np.ones(n, np.bool_) if free is None else np.asarray(free, np.bool_).copy()
    cluster = np.full(n, -1, np.int64)
    order_nodes = np.zeros(n, np.int64)
    ptr = np.zeros(n + k_primaries + 1, np.int64)
    pos = k.slice_primaries(
        costs.succ_ptr, costs.succ_idx, costs.comp, costs.comm, alive, k_primaries, cluster,
        order_nodes, ptr, 0, 0,
    )
    tl = k.top_levels(costs.succ_ptr, costs.succ_idx, costs.comp, costs.comm, alive)
    bl = k.bottom_levels(costs.succ_ptr, costs.succ_idx, costs.comp, costs.comm, alive)
    live = np.flatnonzero(alive)
    order = live[np.lexsort((live, tl[live], -(tl[live] + bl[live])))].astype(np.int64)
    n_clusters = k.slice_secondaries(
        order, costs.succ_ptr, costs.succ_idx, costs.comm, bl, alive, cluster, order_nodes, ptr,
        int(pos), k_primaries,
    )
    return Slicing(
        cluster=cluster,
        cl_ptr=ptr[: n_clusters + 1].copy(),
        cl_nodes=order_nodes[: int(ptr[n_clusters])].copy(),
        k=k_primaries,
    )
