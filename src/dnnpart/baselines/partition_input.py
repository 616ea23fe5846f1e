"""The weighted undirected graph a balanced graph partitioner gets.

Nodes are the DP's contracted nodes (colocation classes and the cycles they create, so a
partition never splits a class); a node weighs its accelerator compute time; an edge between
two contracted nodes weighs the transfer cost of every original node with an output crossing
it (``c_u`` once per receiving contracted node, as the cost model charges), in both
directions summed. This is the graph paper 1 handed to Scotch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.problem import Problem

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class WeightedGraph:
    """Undirected graph in CSR form with float weights.

    Attributes
    ----------
    xadj, adjncy : CSR adjacency, both directions stored, no self-loops, no duplicates.
    vertex_weight : ``(m,)`` accelerator compute time of each vertex.
    edge_weight : ``(len(adjncy),)`` transfer cost of each arc (symmetric).
    accelerator_ok : ``(m,)`` whether every member runs on accelerators.
    node_vertex : ``(n,)`` vertex of every original node.
    """

    xadj: IntArray
    adjncy: IntArray
    vertex_weight: FloatArray
    edge_weight: FloatArray
    accelerator_ok: npt.NDArray[np.bool_]
    node_vertex: IntArray

    @property
    def n_vertices(self) -> int:
        return int(self.vertex_weight.shape[0])


def partition_input(problem: Problem) -> WeightedGraph:
    """Build the weighted partitioning graph of ``problem``.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> wg = partition_input(chain_problem([4, 1, 2], n_accelerators=2))
    >>> wg.vertex_weight.tolist(), wg.adjncy.tolist()
    ([4.0, 1.0, 2.0], [1, 0, 2, 1])
    """
    graph, cluster = problem.graph, problem.cluster
    stage = build_stage_graph(graph, merge_trivial=False)
    m = stage.n_stage_nodes
    vertex_of = stage.stage_of.astype(np.int64)
    acc_kind = cluster.devices[cluster.accelerators[0]].kind if cluster.accelerators else "accelerator"
    acc_time = graph.time_on(acc_kind) if acc_kind in graph.device_kinds else np.full(graph.n_nodes, np.inf)
    finite = np.isfinite(acc_time)
    weight = np.bincount(vertex_of, weights=np.where(finite, acc_time, 0.0), minlength=m)
    ok = np.bincount(vertex_of, weights=(~finite).astype(np.float64), minlength=m) == 0

    src, dst = graph.edge_sources(), graph.succ_idx.astype(np.int64)
    a, b = vertex_of[src], vertex_of[dst]
    cross = a != b
    node_cost, uniform = graph.node_out_cost()
    # uniform senders pay once per (sender, receiving vertex); others per edge
    uni = cross & uniform[src]
    keys = np.empty((0, 2), np.int64)
    if uni.any():
        keys = np.unique(np.stack((src[uni], b[uni]), axis=1), axis=0)
    pair_a = np.concatenate((vertex_of[keys[:, 0]], a[cross & ~uniform[src]]))
    pair_b = np.concatenate((keys[:, 1], b[cross & ~uniform[src]]))
    cost = np.concatenate((node_cost[keys[:, 0]], graph.edge_cost[cross & ~uniform[src]]))
    # symmetric: both arcs of every pair carry the summed cost of both directions
    u = np.concatenate((pair_a, pair_b))
    v = np.concatenate((pair_b, pair_a))
    c = np.concatenate((cost, cost))
    summed: FloatArray = np.empty(0)
    if u.size:
        flat = u * m + v
        uniq, inverse = np.unique(flat, return_inverse=True)
        summed = np.bincount(inverse, weights=c, minlength=uniq.size).astype(np.float64)
        u, v = uniq // m, uniq % m
    xadj = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=m), out=xadj[1:])
    return WeightedGraph(
        xadj=xadj, adjncy=v.astype(np.int64), vertex_weight=weight.astype(np.float64),
        edge_weight=np.asarray(summed, np.float64), accelerator_ok=ok, node_vertex=vertex_of,
    )


def integer_weights(values: FloatArray, *, total: float) -> IntArray:
    """Scale non-negative weights to integers >= 1 whose sum is about ``total``.

    Partitioners take integer weights; a floor of 1 keeps zero-weight items valid.

    Examples
    --------
    >>> import numpy as np
    >>> integer_weights(np.array([0.0, 1.0, 3.0]), total=400).tolist()
    [1, 100, 300]
    """
    s = float(values.sum())
    scale = total / s if s > 0 else 1.0
    return np.maximum(1, np.rint(values * scale)).astype(np.int64)
