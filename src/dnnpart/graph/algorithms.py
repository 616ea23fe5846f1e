"""Structural queries on a :class:`~dnnpart.graph.core.Graph`.

All functions are O(n + m) array code unless said otherwise; ids are topological.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dnnpart.errors import ProblemTooLargeError
from dnnpart.graph import kernels
from dnnpart.graph.core import NO_CLASS, BoolArray, FloatArray, Graph, IntArray


def topological_levels(graph: Graph) -> IntArray:
    """Number of edges on the longest path from a source to each node.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> topological_levels(chain_graph(3)).tolist()
    [0, 1, 2]
    """
    result: IntArray = kernels.longest_path_levels(graph.n_nodes, graph.pred_ptr, graph.pred_idx)
    return result


def _mask(graph: Graph, nodes: npt.ArrayLike) -> BoolArray:
    arr = np.asarray(nodes)
    if arr.dtype == np.bool_:
        if arr.shape != (graph.n_nodes,):
            raise ValueError(f"node mask must have shape ({graph.n_nodes},), got {arr.shape}")
        return arr.copy()
    mask = np.zeros(graph.n_nodes, dtype=np.bool_)
    mask[arr.astype(np.int64)] = True
    return mask


def descendants(graph: Graph, nodes: npt.ArrayLike) -> BoolArray:
    """Mask of nodes reachable from ``nodes`` (indices or a mask), the nodes included."""
    result: BoolArray = kernels.descendants_mask(
        graph.n_nodes, graph.succ_ptr, graph.succ_idx, _mask(graph, nodes)
    )
    return result


def ancestors(graph: Graph, nodes: npt.ArrayLike) -> BoolArray:
    """Mask of nodes from which ``nodes`` (indices or a mask) are reachable, included."""
    result: BoolArray = kernels.ancestors_mask(
        graph.n_nodes, graph.succ_ptr, graph.succ_idx, _mask(graph, nodes)
    )
    return result


def is_reachable(graph: Graph, source: int, target: int) -> bool:
    """Whether ``target`` is reachable from ``source`` (a node reaches itself)."""
    if target < source:
        return False
    return bool(descendants(graph, [source])[target])


def contiguity_witness(graph: Graph, nodes: npt.ArrayLike) -> tuple[int, int] | None:
    """An edge ``(u, v)`` proving ``nodes`` is not contiguous, or ``None`` if it is.

    ``u`` is in the set, ``v`` is not, and some node of the set is reachable from ``v``
    (Definition 3.1 of paper 1).
    """
    u, v = kernels.contiguity_violation(
        graph.n_nodes, graph.succ_ptr, graph.succ_idx, _mask(graph, nodes)
    )
    return None if u < 0 else (int(u), int(v))


def is_contiguous(graph: Graph, nodes: npt.ArrayLike) -> bool:
    """Whether no path leaves the set and comes back (Definition 3.1 of paper 1).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(3)
    >>> is_contiguous(g, [0, 1]), is_contiguous(g, [0, 2])
    (True, False)
    """
    return contiguity_witness(graph, nodes) is None


def is_ideal(graph: Graph, nodes: npt.ArrayLike) -> bool:
    """Whether the set is downward closed: every predecessor of a member is a member."""
    mask = _mask(graph, nodes)
    dst_in = np.repeat(mask, np.diff(graph.pred_ptr))
    return bool(np.all(mask[graph.pred_idx[dst_in]]))


def width(graph: Graph, *, exact_limit: int = 2000) -> tuple[int, bool]:
    """Size of a maximum antichain, and whether the figure is exact.

    Exact (Dilworth: ``n`` minus a maximum matching in the transitive closure) when the graph
    has at most ``exact_limit`` nodes; otherwise the largest topological level, a lower bound.
    """
    n = graph.n_nodes
    levels = topological_levels(graph)
    level_bound = int(np.bincount(levels).max())
    if n > exact_limit:
        return level_bound, False
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_bipartite_matching

    closure = np.zeros((n, n), dtype=np.bool_)
    for v in range(n - 1, -1, -1):  # descendants of v = union over successors
        succ = graph.successors(v)
        if succ.size:
            closure[v, succ] = True
            closure[v] |= np.any(closure[succ], axis=0)
    matching = maximum_bipartite_matching(sp.csr_matrix(closure), perm_type="column")
    return n - int(np.count_nonzero(matching >= 0)), True


def count_ideals(graph: Graph, *, limit: int = 1_000_000, max_memory_bytes: int = 256_000_000) -> int:
    """Number of ideals (downward-closed sets, the empty set included), up to ``limit``.

    Counts level by level, keeping only the open level (an ideal is an ``n``-bit set: a
    200,000-node chain would otherwise hold gigabytes of finished levels).

    Raises
    ------
    ProblemTooLargeError
        When there are more than ``limit`` ideals, or the open level would need more than
        ``max_memory_bytes``.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> count_ideals(chain_graph(4))
    5
    """
    from dnnpart.graph.ideals import ideal_levels

    n = graph.n_nodes
    if n + 1 > limit:  # every DAG has at least n + 1 ideals (the prefixes of a topological order)
        raise ProblemTooLargeError(f"the graph has more than {limit:,} ideals ({n:,} nodes)")
    # predecessor masks are Python ints as wide as their highest bit: estimate them first
    highest = np.zeros(n, np.int64)
    has_pred = np.diff(graph.pred_ptr) > 0
    if graph.pred_idx.size:  # segments of nodes with predecessors are back to back
        starts = graph.pred_ptr[:-1][has_pred]
        highest[has_pred] = np.maximum.reduceat(graph.pred_idx.astype(np.int64), starts)
    if int(highest.sum()) // 8 + 64 * n > max_memory_bytes:
        raise ProblemTooLargeError(
            f"counting the ideals of this graph ({n:,} nodes) would need more than "
            f"{max_memory_bytes:,} bytes of bitsets; not counted")
    per_ideal = 2 * (graph.n_nodes // 8 + 64)  # the ideal and its frontier, as Python ints
    count = 1

    def check(size: int) -> None:
        if count + size > limit or size * per_ideal > max_memory_bytes:
            raise ProblemTooLargeError(
                f"the graph has more than {min(limit, count + size - 1):,} ideals "
                "(counting stopped at its limit); raise the limit, or use a method that "
                "does not enumerate ideals (dpl, ip)")

    for level in ideal_levels(graph, on_grow=check):
        count += len(level)
    return count


def critical_path(graph: Graph, kind: str = "accelerator") -> float:
    """Length of the longest path weighted by compute time on ``kind`` (no transfers)."""
    time = graph.time_on(kind)
    finish: FloatArray = kernels.weighted_longest_path(
        graph.n_nodes, graph.pred_ptr, graph.pred_idx, time
    )
    return float(finish.max())


def communication_to_computation_ratio(graph: Graph, kind: str = "accelerator") -> float:
    """CCR (paper 2, Table 5): total transfer cost over total compute time on ``kind``."""
    work = float(np.sum(graph.time_on(kind)))
    return float(np.sum(graph.edge_cost)) / work if work > 0 else float("inf")


def degree_of_parallelism(graph: Graph, kind: str = "accelerator") -> float:
    """Average degree of parallelism (paper 2, Table 5): total work over critical path."""
    path = critical_path(graph, kind)
    return float(np.sum(graph.time_on(kind))) / path if path > 0 else 1.0


def colocation_units(graph: Graph) -> tuple[IntArray, IntArray]:
    """Groups of nodes that must share a device, as CSR ``(unit_ptr, unit_nodes)``.

    Nodes of one colocation class form a unit; unclassed nodes are units of their own.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> ptr, nodes = colocation_units(chain_graph(3))
    >>> ptr.tolist(), nodes.tolist()
    ([0, 1, 2, 3], [0, 1, 2])
    """
    cls = graph.color_class
    key = np.where(cls != NO_CLASS, cls, cls.max(initial=0) + 1 + np.arange(graph.n_nodes))
    _, unit = np.unique(key, return_inverse=True)
    order = np.argsort(unit, kind="stable").astype(np.int64)
    ptr = np.zeros(int(unit.max()) + 2, np.int64)
    np.cumsum(np.bincount(unit), out=ptr[1:])
    return ptr, order


__all__ = [
    "ProblemTooLargeError",
    "ancestors",
    "colocation_units",
    "communication_to_computation_ratio",
    "contiguity_witness",
    "count_ideals",
    "critical_path",
    "degree_of_parallelism",
    "descendants",
    "is_contiguous",
    "is_ideal",
    "is_reachable",
    "topological_levels",
    "width",
]
