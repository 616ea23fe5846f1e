"""Branching regions of a DAG: biconnected components of its undirected skeleton.

PipeDream's optimizer needs a path. Paper 1 runs it on branching layer graphs by contracting
every branching region into one node (section 6, "Baselines"). A region is a biconnected
component of the undirected graph with at least two edges (a cycle in the skeleton: branches
that fork and join again). Contracting all of a region's nodes would also swallow the node
where it joins, which is where the next region forks, and chain every region together; so we
merge the region's *tails* (nodes with an edge inside the region leaving them): the fork and
the branch bodies, but not the join.

Kept apart from the solver so that it is tested on its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import Graph
from dnnpart.graph.stage_graph import build_stage_graph

IntArray = npt.NDArray[np.int64]


def biconnected_edge_components(n_nodes: int, src: IntArray, dst: IntArray) -> IntArray:
    """Biconnected component of every edge of the undirected multigraph ``src[i] -- dst[i]``.

    Iterative Hopcroft-Tarjan with an edge stack; self-loops get their own component.
    Component ids are ``0 .. c-1`` in order of discovery.

    Examples
    --------
    >>> import numpy as np
    >>> # a triangle 0-1-2 with a pendant edge 2-3
    >>> biconnected_edge_components(4, np.array([0, 1, 0, 2]), np.array([1, 2, 2, 3])).tolist()
    [1, 1, 1, 0]
    """
    m = int(src.shape[0])
    comp = np.full(m, -1, np.int64)
    if m == 0:
        return comp
    ends = np.concatenate((src, dst)).astype(np.int64)
    other = np.concatenate((dst, src)).astype(np.int64)
    edge_of = np.concatenate((np.arange(m), np.arange(m)))
    order = np.argsort(ends, kind="stable")
    adj_node, adj_edge = other[order], edge_of[order]
    ptr = np.zeros(n_nodes + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=n_nodes), out=ptr[1:])

    entry = np.full(n_nodes, -1, np.int64)
    low = np.zeros(n_nodes, np.int64)
    cursor = ptr[:-1].copy()
    clock, n_comp = 0, 0
    edge_stack: list[int] = []
    for root in range(n_nodes):
        if entry[root] >= 0:
            continue
        entry[root] = low[root] = clock
        clock += 1
        # frames: (node, edge id used to enter it)
        frames: list[tuple[int, int]] = [(root, -1)]
        while frames:
            v, via = frames[-1]
            if cursor[v] < ptr[v + 1]:
                i = int(cursor[v])
                cursor[v] += 1
                w, e = int(adj_node[i]), int(adj_edge[i])
                if e == via:
                    continue
                if w == v:  # self-loop
                    comp[e] = n_comp
                    n_comp += 1
                    continue
                if entry[w] < 0:
                    edge_stack.append(e)
                    entry[w] = low[w] = clock
                    clock += 1
                    frames.append((w, e))
                elif entry[w] < entry[v]:
                    edge_stack.append(e)
                    low[v] = min(low[v], entry[w])
                continue
            frames.pop()
            if not frames:
                continue
            parent = frames[-1][0]
            low[parent] = min(low[parent], low[v])
            if low[v] >= entry[parent]:
                while True:
                    e = edge_stack.pop()
                    comp[e] = n_comp
                    if e == via:
                        break
                n_comp += 1
    return comp


def branch_region_labels(
    n_nodes: int, src: IntArray, dst: IntArray, *, ignore_sources: npt.NDArray[np.bool_] | None = None
) -> IntArray:
    """Label nodes so that each branching region's tails share a label.

    ``src -> dst`` are the directed edges of a DAG; edges out of nodes flagged in
    ``ignore_sources`` are left out of the skeleton (PipeDream ignores its input layers,
    which feed many layers without making them a branch). Labels are ``0 .. n_nodes-1``
    representatives (union-find roots).

    Examples
    --------
    >>> import numpy as np
    >>> # diamond 0 -> {1, 2} -> 3, then 3 -> 4
    >>> src, dst = np.array([0, 0, 1, 2, 3]), np.array([1, 2, 3, 3, 4])
    >>> labels = branch_region_labels(5, src, dst)
    >>> len({labels[0], labels[1], labels[2]}), bool(labels[3] == labels[0]), bool(labels[4] == labels[3])
    (1, False, False)
    """
    keep = np.ones(src.shape[0], np.bool_)
    if ignore_sources is not None:
        keep &= ~ignore_sources[src]
    s, d = src[keep].astype(np.int64), dst[keep].astype(np.int64)
    comp = biconnected_edge_components(n_nodes, s, d)
    parent = np.arange(n_nodes, dtype=np.int64)

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = int(parent[root])
        while parent[x] != root:
            parent[x], x = root, int(parent[x])
        return root

    size = np.bincount(comp, minlength=int(comp.max()) + 1 if comp.size else 0)
    first_tail: dict[int, int] = {}
    for e in np.flatnonzero(size[comp] >= 2).tolist():
        c, tail = int(comp[e]), int(s[e])
        head = first_tail.setdefault(c, tail)
        a, b = find(head), find(tail)
        if a != b:
            parent[b] = a
    return np.array([find(v) for v in range(n_nodes)], dtype=np.int64)


def contract_branches(graph: Graph, *, memory_limit: float,
                      ignore_inputs: bool = True) -> tuple[Graph, int]:
    """``graph`` with every branching region made one colocation class: PipeDream's path.

    On the contracted forward DAG of :func:`~dnnpart.graph.stage_graph.build_stage_graph`
    (zero-time nodes with one neighbour merged into it), the tails of every biconnected
    component with a cycle become one class. With ``ignore_inputs`` the edges out of
    *fan-out* nodes (no time, at most one input, several consumers: inputs and broadcasts of
    one tensor) are left out of the search, as PipeDream's profiler does not see them as
    layers. Returns the recoloured graph and the number of forward stage nodes left.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g, n_left = contract_branches(chain_graph(3), memory_limit=1e9)
    >>> n_left
    3
    """
    stage = build_stage_graph(graph, merge_trivial=True, memory_limit=memory_limit)
    m = stage.n_stage_nodes
    src = np.repeat(np.arange(m, dtype=np.int64), np.diff(stage.succ_ptr))
    dst = stage.succ_idx.astype(np.int64)
    ignore = None
    if ignore_inputs:
        busy = np.any(graph.compute_time > 0, axis=1).astype(np.float64)
        idle = np.bincount(stage.stage_of, weights=busy, minlength=m) == 0
        ignore = idle & (np.diff(stage.pred_ptr) <= 1) & (np.diff(stage.succ_ptr) >= 2)
    labels = branch_region_labels(m, src, dst, ignore_sources=ignore)
    color = labels[stage.stage_of]
    recoloured = dataclasses.replace(graph, color_class=color.astype(graph.color_class.dtype))
    return recoloured, int(np.unique(labels).size)

