"""Enumeration of ideals (downward-closed node sets) of a DAG.

An ideal is kept as a Python ``int`` bitset (bit ``v`` set when node ``v`` is in it). This
plain enumerator serves counting, guards and brute-force oracles; the throughput DP uses its
own compact representation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

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
    preds = predecessor_masks(graph)
    succs = [[int(w) for w in graph.successors(v)] for v in range(graph.n_nodes)]
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
