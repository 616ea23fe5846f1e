"""Enumeration of ideals (downward-closed node sets) of a DAG.

An ideal is kept as a Python ``int`` bitset (bit ``v`` set when node ``v`` is in it). This
plain enumerator serves counting, guards and brute-force oracles; the throughput DP uses its
own compact representation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from dnnpart.errors import ProblemTooLargeError
from dnnpart.graph.core import Graph


def predecessor_masks(graph: Graph) -> list[int]:
    """Bitset of the direct predecessors of each node."""
    masks = []
    for v in range(graph.n_nodes):
        m = 0
        for u in graph.predecessors(v):
            m |= 1 << int(u)
        masks.append(m)
    return masks


def ideal_levels(
    graph: Graph, *, on_grow: Callable[[int], None] | None = None
) -> Iterator[dict[int, int]]:
    """The non-empty ideals level by level (level k: the ideals of k nodes).

    Each level maps an ideal to the bitset of nodes that can be added to it; only the open
    level is held. ``on_grow(size)`` is called after each new ideal with the level's size so
    far, so a caller can stop (raise) before a level outgrows a bound.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> [len(level) for level in ideal_levels(chain_graph(3))]
    [1, 1, 1]
    """
    succs = [[int(w) for w in graph.successors(v)] for v in range(graph.n_nodes)]
    return _levels(predecessor_masks(graph), succs, on_grow)


def _levels(
    preds: list[int], succs: list[list[int]], on_grow: Callable[[int], None] | None
) -> Iterator[dict[int, int]]:
    sources = 0
    for v, m in enumerate(preds):
        if m == 0:
            sources |= 1 << v
    layer = {0: sources}
    while layer:
        nxt: dict[int, int] = {}
        for ideal, frontier in layer.items():
            f = frontier
            while f:
                low = f & -f
                v = low.bit_length() - 1
                f ^= low
                grown = ideal | low
                if grown in nxt:
                    continue
                new_frontier = frontier & ~low
                for w in succs[v]:
                    if preds[w] & grown == preds[w]:
                        new_frontier |= 1 << w
                nxt[grown] = new_frontier
                if on_grow is not None:
                    on_grow(len(nxt))
        if nxt:
            yield nxt
        layer = nxt


def enumerate_ideals(graph: Graph, *, limit: int = 1_000_000) -> list[int]:
    """All ideals as bitsets, ordered by size (the empty ideal first, the full set last).

    Raises
    ------
    ProblemTooLargeError
        When more than ``limit`` ideals exist.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> [bin(i) for i in enumerate_ideals(chain_graph(2))]
    ['0b0', '0b1', '0b11']
    """
    result = [0]
    for level in ideal_levels(graph):
        result.extend(level)
        if len(result) > limit:
            raise ProblemTooLargeError(
                f"the graph has more than {limit:,} ideals; raise the limit, or use a method "
                "that does not enumerate ideals (dpl, ip)"
            )
    return result


def _dag_adjacency(n_nodes: int, src: Sequence[int], dst: Sequence[int]
                   ) -> tuple[list[int], list[list[int]]]:
    preds = [0] * n_nodes
    succs: list[list[int]] = [[] for _ in range(n_nodes)]
    for a, b in zip(src, dst, strict=True):
        a, b = int(a), int(b)
        if not preds[b] >> a & 1:
            preds[b] |= 1 << a
            succs[a].append(b)
    return preds, succs


class _Overflow(Exception):
    """Raised inside :func:`_bounded_levels` when the count passes its limit."""


def _bounded_levels(n_nodes: int, src: Sequence[int], dst: Sequence[int], limit: int
                    ) -> Iterator[dict[int, int]]:
    """:func:`ideal_levels` of an edge-list DAG that raises :class:`_Overflow` as soon as the
    ideals seen (the empty one included) pass ``limit``, inside a level as well."""
    preds, succs = _dag_adjacency(n_nodes, src, dst)
    seen = 1
    if seen > limit:
        raise _Overflow

    def check(size: int) -> None:
        if seen + size > limit:
            raise _Overflow

    for level in _levels(preds, succs, check):
        seen += len(level)
        yield level


def count_dag_ideals(n_nodes: int, src: Sequence[int], dst: Sequence[int], *, limit: int) -> int:
    """Number of ideals (the empty one included) of the DAG ``src -> dst``, at most ``limit + 1``.

    The streaming guard of the enumerating methods: it counts level by level (only the open
    level is held, at most ``limit`` ideals of ``n_nodes`` bits) and stops as soon as the count
    passes ``limit``, so a caller learns that a lattice is too large *before* allocating
    anything per ideal. Edges may repeat; nodes are ``0 .. n_nodes - 1`` in any order.

    Examples
    --------
    >>> count_dag_ideals(3, [0, 1], [1, 2], limit=100)  # a chain: its 4 prefixes
    4
    >>> count_dag_ideals(20, [], [], limit=1000)  # 2**20 subsets of an antichain: stops early
    1001
    """
    count = 1
    try:
        for level in _bounded_levels(n_nodes, src, dst, limit):
            count += len(level)
    except _Overflow:
        return limit + 1
    return count


def dag_ideals(n_nodes: int, src: Sequence[int], dst: Sequence[int], *, limit: int
               ) -> list[int] | None:
    """All ideals of the DAG ``src -> dst`` as bitsets by size (empty first, full set last),
    or ``None`` as soon as there are more than ``limit`` (memory: at most ``limit`` bitsets).

    Examples
    --------
    >>> [bin(i) for i in dag_ideals(2, [0], [1], limit=10)]
    ['0b0', '0b1', '0b11']
    >>> dag_ideals(20, [], [], limit=1000) is None
    True
    """
    out = [0]
    try:
        for level in _bounded_levels(n_nodes, src, dst, limit):
            out.extend(level)
    except _Overflow:
        return None
    return out
