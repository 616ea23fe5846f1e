"""Appendix-B preprocessing: the forward DAG the throughput DP runs on.

Paper 1 runs its DP over ideals of the *forward* part of a graph, carrying with every forward
subgraph the backward nodes colocated with it. We build that DAG (the "stage DAG") directly:

* every colocation class becomes one stage node, forward and backward members together (the
  paper contracts ``C_FW`` and ``C_BW`` separately and then pairs them; the pair is what the
  DP places, so one node per class is the same thing);
* a backward node without a forward partner (orphaned) is its own stage node: the artificial
  forward image of appendix B;
* stage edges: every forward edge ``u -> v`` gives ``[u] -> [v]``, every backward edge
  ``u' -> v'`` gives the mirrored ``[v'] -> [u']``. Mirroring *every* backward edge (the paper
  mirrors those at orphans and relies on the backward pass mirroring the forward one) makes
  every DP split contiguous on the backward side as well, which the paper requires;
* contraction creates cycles; each strongly connected component must sit on one device, so
  components are contracted and the result is a DAG, renumbered topologically.

Edges between the forward and the backward part (loss -> its gradient) impose no order on the
pipeline and are left out of the structure; their transfer costs are still charged, because
the DP prices each device's set of *original* nodes with the evaluator's load model
(non-uniform out-edge costs per edge, which is appendix B's edge subdivision).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart._arrays import unique_ints
from dnnpart.graph.core import Graph
from dnnpart.graph.kernels import kahn_order
from dnnpart.graph.scc import strong_components

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class StageGraph:
    """The contracted forward DAG of paper 1, appendix B.

    Attributes
    ----------
    n_stage_nodes : number of contracted nodes; ids are a topological order.
    succ_ptr, succ_idx, pred_ptr, pred_idx : CSR adjacency of the stage DAG.
    member_ptr, member_idx : original nodes of each stage node (forward and backward).
    stage_of : ``(n,)`` stage node of every original node.
    n_artificial : stage nodes holding only backward nodes (artificial forward images).
    n_sccs_merged : stage nodes formed by contracting a cycle of several classes.
    """

    n_stage_nodes: int
    succ_ptr: IntArray
    succ_idx: IntArray
    pred_ptr: IntArray
    pred_idx: IntArray
    member_ptr: IntArray
    member_idx: IntArray
    stage_of: IntArray
    n_artificial: int
    n_sccs_merged: int

    def members(self, s: int) -> IntArray:
        """Original nodes contracted into stage node ``s``."""
        return self.member_idx[self.member_ptr[s] : self.member_ptr[s + 1]]


#: Graphs (nodes + edges) below this size are contracted by the plain-Python twin of scipy's
#: strongly connected components (:mod:`dnnpart.graph.scc`: same labels, ~2 us an edge).
SMALL_SCC = 50_000


def _csr(n: int, src: IntArray, dst: IntArray) -> tuple[IntArray, IntArray]:
    order = np.lexsort((dst, src))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[order].astype(np.int64)


def _condense(
    n: int, src: IntArray, dst: IntArray
) -> tuple[int, IntArray, IntArray, IntArray]:
    """Contract strongly connected components; returns ``(m, label, src, dst)`` with labels a
    topological order of the condensation and its deduplicated edges."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    # The component labels fix the stage numbering, which DPL's linearization (and so its
    # published values) depends on: scipy's labels, from its plain twin on small graphs
    # (scipy.sparse costs ~0.15 s to import; the twin a few ms below SMALL_SCC).
    if n + src.size < SMALL_SCC:
        m, comp = strong_components(n, src, dst)
    else:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        adj = coo_matrix((np.ones(src.size, np.int8), (src, dst)), shape=(n, n)).tocsr()
        m, comp = connected_components(adj, directed=True, connection="strong")
    cs, cd = comp[src].astype(np.int64), comp[dst].astype(np.int64)
    keep = cs != cd
    pairs = unique_ints(cs[keep] * m + cd[keep])
    cs, cd = pairs // m, pairs % m
    ptr, idx = _csr(m, cs, cd)
    order, count = kahn_order(m, ptr, idx)
    assert count == m, "condensation of strongly connected components must be acyclic"
    rank = np.empty(m, np.int64)
    rank[order] = np.arange(m)
    return int(m), rank[comp], rank[cs], rank[cd]


def _trivial_merges(
    graph: Graph, n_stage: int, stage_of: IntArray, s_src: IntArray, s_dst: IntArray,
    memory_limit: float,
) -> IntArray | None:
    """Map of stage nodes after paper 1's "trivial node" merges, or ``None`` if none apply.

    A stage node whose every member takes zero time on every device kind and whose original
    edges all stay within it or go to one single neighbouring stage node is merged into that
    neighbour (input placeholders, output heads of layer graphs). Colocating such a node with
    its only neighbour never raises a load (it removes a transfer, adds no compute), so this
    is exact unless the node's own memory decides feasibility: we merge only nodes without
    memory, or any when the whole graph fits in one accelerator (``memory_limit``).
    """
    zero_time = np.all(graph.compute_time == 0, axis=1)
    trivial = np.bincount(stage_of, weights=(~zero_time).astype(float), minlength=n_stage) == 0
    mem = np.bincount(stage_of, weights=graph.memory_bytes, minlength=n_stage)
    if graph.memory_bytes.sum() > memory_limit:
        trivial &= mem == 0
    if not trivial.any():
        return None
    src, dst = graph.edge_sources(), graph.succ_idx.astype(np.int64)
    a, b = stage_of[src], stage_of[dst]
    cross = a != b
    neighbours: list[set[int]] = [set() for _ in range(n_stage)]
    for x, y in zip(a[cross].tolist(), b[cross].tolist(), strict=True):
        neighbours[x].add(y)
        neighbours[y].add(x)
    parent = list(range(n_stage))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    changed = False
    queue = [int(s) for s in np.flatnonzero(trivial)]
    while queue:
        s = queue.pop()
        if find(s) != s or len(neighbours[s]) != 1:
            continue
        t = find(next(iter(neighbours[s])))
        # merge s into t: t's neighbours lose s
        parent[s] = t
        neighbours[t].discard(s)
        changed = True
        if trivial[t] and len(neighbours[t]) == 1:
            queue.append(t)
    if not changed:
        return None
    return np.array([find(s) for s in range(n_stage)], dtype=np.int64)


def build_stage_graph(
    graph: Graph, *, merge_trivial: bool = True, memory_limit: float = np.inf
) -> StageGraph:
    """Contract colocation classes and the cycles they create; give orphans forward images.

    Parameters
    ----------
    merge_trivial : also merge zero-time nodes into their only neighbour, as the paper's
        code does (see :func:`_trivial_merges` for when that is exact).
    memory_limit : accelerator memory, to decide when a trivial merge is exact.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> sg = build_stage_graph(chain_graph(3))
    >>> sg.n_stage_nodes, sg.succ_idx.tolist()
    (3, [1, 2])
    """
    n = graph.n_nodes
    cls = graph.color_class
    backward = graph.is_backward
    has_class = cls >= 0
    group = np.empty(n, np.int64)
    _, inv = np.unique(cls[has_class], return_inverse=True)
    n_classes = int(inv.max()) + 1 if inv.size else 0
    group[has_class] = inv
    group[~has_class] = n_classes + np.arange(int((~has_class).sum()))
    n_groups = n_classes + int((~has_class).sum())
    has_forward = np.zeros(n_groups, np.bool_)
    has_forward[group[~backward]] = True

    src = graph.edge_sources()
    dst = graph.succ_idx.astype(np.int64)
    fw_edge = ~backward[src] & ~backward[dst]
    # backward edges at orphans get mirrored forward images (appendix B); the others follow
    # from the forward structure they mirror
    bw_edge = backward[src] & backward[dst] & ~(has_forward[group[src]] & has_forward[group[dst]])
    hs = np.concatenate((group[src[fw_edge]], group[dst[bw_edge]]))
    hd = np.concatenate((group[dst[fw_edge]], group[src[bw_edge]]))
    n_comp, label, s_src, s_dst = _condense(n_groups, hs, hd)
    stage_of = label[group]
    groups_per_stage = np.bincount(label, minlength=n_comp)
    n_merged_sccs = int((groups_per_stage > 1).sum())
    if merge_trivial:
        merged = _trivial_merges(graph, n_comp, stage_of, s_src, s_dst, memory_limit)
        if merged is not None:
            reps, compact = np.unique(merged, return_inverse=True)
            n_comp, label2, s_src, s_dst = _condense(reps.size, compact[s_src], compact[s_dst])
            stage_of = label2[compact[stage_of]]

    succ_ptr, succ_idx = _csr(n_comp, s_src, s_dst)
    pred_ptr, pred_idx = _csr(n_comp, s_dst, s_src)
    member_idx = np.argsort(stage_of, kind="stable").astype(np.int64)
    member_ptr = np.zeros(n_comp + 1, np.int64)
    np.cumsum(np.bincount(stage_of, minlength=n_comp), out=member_ptr[1:])
    forward_count = np.bincount(stage_of[~backward], minlength=n_comp)
    return StageGraph(
        n_stage_nodes=int(n_comp),
        succ_ptr=succ_ptr,
        succ_idx=succ_idx,
        pred_ptr=pred_ptr,
        pred_idx=pred_idx,
        member_ptr=member_ptr,
        member_idx=member_idx,
        stage_of=stage_of,
        n_artificial=int((forward_count == 0).sum()),
        n_sccs_merged=n_merged_sccs,
    )
