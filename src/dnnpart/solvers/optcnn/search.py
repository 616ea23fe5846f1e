"""Algorithm 1 of paper 3: node and edge elimination, enumeration of the final graph, undo.

:func:`optimize` takes the precomputed cost tables of any layer DAG (node costs
``t_C + t_S`` and one ``t_X`` table per edge) and returns an optimal strategy under Eq. 1.

1. **Reduction** (lines 4-13): node elimination (Eq. 2) of every node with exactly one in-edge
   and one out-edge, and edge elimination (Eq. 3) of parallel edges, until neither applies.
   ``final_nodes`` reports K, the number of nodes left. Single-source, single-sink
   series-parallel graphs end with K = 2.
2. **Final graph** (line 14): if the product of the remaining configuration counts is at most
   ``enum_limit``, every strategy of the final graph is enumerated at once (broadcast sum).
3. **Exact completion** where that is too many (extra sources, non-series-parallel regions;
   the paper assumes this does not happen): reduce further with leaf elimination (a node with
   one edge folds into its neighbour) and drop isolated nodes, then condition on the node of
   highest degree: for each of its configurations fold its edges into the neighbours' node
   costs, remove it, and solve the rest recursively (reductions apply again). Exact, and
   exponential only in the number of conditioned nodes.
4. **Undo** (lines 15-23): eliminated nodes take the argmin recorded for their neighbours'
   configurations, last eliminated first.

The kernels are in :mod:`.kernels`; this module only keeps the graph's books.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.layerwise.tables import CostTables
from dnnpart.solvers.optcnn.kernels import edge_eliminate, leaf_eliminate, node_eliminate

__all__ = ["DEFAULT_ENUM_LIMIT", "SearchResult", "optimize", "optimize_tables"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Largest number of final-graph strategies enumerated at once.
DEFAULT_ENUM_LIMIT = 1 << 20


@dataclass(frozen=True)
class SearchResult:
    """Outcome of Algorithm 1.

    Attributes
    ----------
    strategy
        Configuration index per node.
    value
        t_O of the strategy (Eq. 1).
    final_nodes
        K: nodes left after the paper's node/edge eliminations.
    node_eliminations, edge_eliminations
        Counts of the paper's eliminations.
    completion
        ``"enumerate"`` (line 14) or ``"conditioning"`` (the exact completion).
    conditioned
        Subproblems solved by conditioning (0 when enumerated).
    """

    strategy: tuple[int, ...]
    value: float
    final_nodes: int
    node_eliminations: int
    edge_eliminations: int
    completion: str
    conditioned: int


@dataclass
class _Work:
    """Mutable multigraph with node and edge cost tables."""

    unary: dict[int, FloatArray]
    edges: dict[int, tuple[int, int, FloatArray]]
    ins: dict[int, set[int]]
    outs: dict[int, set[int]]
    next_eid: int = 0
    const: float = 0.0
    log: list[tuple[str, int, int, int, IntArray]] = field(default_factory=list)

    @classmethod
    def build(cls, node_cost: Sequence[FloatArray], edges: Sequence[tuple[int, int]],
              t_x: Sequence[FloatArray]) -> _Work:
        w = cls({i: np.asarray(c, dtype=np.float64) for i, c in enumerate(node_cost)}, {},
                {i: set() for i in range(len(node_cost))}, {i: set() for i in range(len(node_cost))})
        for (u, v), x in zip(edges, t_x, strict=True):
            if u == v:
                raise ValueError(f"self-loop on node {u}")
            x = np.asarray(x, dtype=np.float64)
            if x.shape != (len(w.unary[u]), len(w.unary[v])):
                raise ValueError(f"edge ({u}, {v}) table has shape {x.shape}, "
                                 f"expected {(len(w.unary[u]), len(w.unary[v]))}")
            w.add_edge(u, v, x)
        return w

    def copy(self) -> _Work:
        return _Work(dict(self.unary), dict(self.edges), {k: set(s) for k, s in self.ins.items()},
                     {k: set(s) for k, s in self.outs.items()}, self.next_eid, self.const, [])

    def add_edge(self, u: int, v: int, x: FloatArray) -> None:
        e = self.next_eid
        self.next_eid += 1
        self.edges[e] = (u, v, x)
        self.outs[u].add(e)
        self.ins[v].add(e)

    def drop_edge(self, e: int) -> tuple[int, int, FloatArray]:
        u, v, x = self.edges.pop(e)
        self.outs[u].discard(e)
        self.ins[v].discard(e)
        return u, v, x

    def drop_node(self, j: int) -> None:
        del self.unary[j], self.ins[j], self.outs[j]

    def degree(self, j: int) -> int:
        return len(self.ins[j]) + len(self.outs[j])

    # -- the paper's rules ---------------------------------------------------------------

    def node_elimination(self) -> int:
        count = 0
        for j in list(self.unary):
            if len(self.ins[j]) == 1 and len(self.outs[j]) == 1:
                (e1,), (e2,) = self.ins[j], self.outs[j]
                i, _, x1 = self.drop_edge(e1)
                _, k, x2 = self.drop_edge(e2)
                table, arg = node_eliminate(self.unary[j], x1, x2)
                self.log.append(("node", j, i, k, arg))
                self.drop_node(j)
                self.add_edge(i, k, table)
                count += 1
        return count

    def edge_elimination(self) -> int:
        count = 0
        by_pair: dict[tuple[int, int], list[int]] = {}
        for e, (u, v, _) in self.edges.items():
            by_pair.setdefault((u, v), []).append(e)
        for (u, v), group in by_pair.items():
            if len(group) > 1:
                tables = [self.drop_edge(e)[2] for e in group]
                merged = tables[0]
                for x in tables[1:]:
                    merged = edge_eliminate(merged, x)
                self.add_edge(u, v, merged)
                count += len(group) - 1
        return count

    def reduce(self) -> tuple[int, int]:
        nodes = edges = 0
        while True:
            n = self.node_elimination()
            m = self.edge_elimination()
            nodes, edges = nodes + n, edges + m
            if n == 0 and m == 0:
                return nodes, edges

    # -- the exact completion ------------------------------------------------------------

    def leaf_elimination(self) -> int:
        count = 0
        for j in list(self.unary):
            if j not in self.unary:
                continue
            if self.degree(j) == 0:
                pick = int(np.argmin(self.unary[j]))
                self.const += float(self.unary[j][pick])
                self.log.append(("fixed", j, -1, -1, np.asarray([pick], dtype=np.int64)))
                self.drop_node(j)
                count += 1
            elif self.degree(j) == 1:
                if self.ins[j]:
                    (e,) = self.ins[j]
                    i, _, x = self.drop_edge(e)
                else:
                    (e,) = self.outs[j]
                    _, i, x = self.drop_edge(e)
                    x = x.T
                add, arg = leaf_eliminate(self.unary[j], x)
                self.unary[i] = self.unary[i] + add
                self.log.append(("leaf", j, i, -1, arg))
                self.drop_node(j)
                count += 1
        return count

    def condition(self, j: int, c: int) -> None:
        """Fix node ``j`` to configuration ``c``: fold its edges into its neighbours."""
        self.const += float(self.unary[j][c])
        for e in list(self.ins[j]):
            i, _, x = self.drop_edge(e)
            self.unary[i] = self.unary[i] + x[:, c]
        for e in list(self.outs[j]):
            _, k, x = self.drop_edge(e)
            self.unary[k] = self.unary[k] + x[c, :]
        self.drop_node(j)

    def enumerate_all(self) -> tuple[float, dict[int, int]]:
        nodes = sorted(self.unary)
        if not nodes:
            return self.const, {}
        pos = {n: a for a, n in enumerate(nodes)}
        shape = tuple(len(self.unary[n]) for n in nodes)
        total = np.zeros(shape, dtype=np.float64)
        for n in nodes:
            total += _along(self.unary[n], (pos[n],), len(nodes))
        for u, v, x in self.edges.values():
            if pos[u] < pos[v]:
                total += _along(x, (pos[u], pos[v]), len(nodes))
            else:
                total += _along(x.T, (pos[v], pos[u]), len(nodes))
        flat = int(np.argmin(total))
        idx = np.unravel_index(flat, shape)
        return self.const + float(total.flat[flat]), {n: int(idx[pos[n]]) for n in nodes}

    def size(self) -> float:
        return float(np.prod([float(len(u)) for u in self.unary.values()]))

    def undo(self, assignment: dict[int, int]) -> None:
        for kind, j, i, k, arg in reversed(self.log):
            if kind == "node":
                assignment[j] = int(arg[assignment[i], assignment[k]])
            elif kind == "leaf":
                assignment[j] = int(arg[assignment[i]])
            else:
                assignment[j] = int(arg[0])


def _along(table: FloatArray, axes: tuple[int, ...], ndim: int) -> FloatArray:
    """Reshape ``table`` so that its dimensions lie on ``axes`` of an ``ndim``-array."""
    shape = [1] * ndim
    for a, s in zip(axes, table.shape, strict=True):
        shape[a] = s
    return table.reshape(shape)


def _solve_exact(work: _Work, enum_limit: int, counter: list[int]) -> tuple[float, dict[int, int]]:
    """Exact optimum of ``work`` (consumed): reductions, leaves, then enumerate or condition."""
    while True:
        n, m = work.reduce()
        if work.leaf_elimination() == 0 and n == 0 and m == 0:
            break
    if work.size() <= enum_limit or len(work.unary) <= 1:
        value, assignment = work.enumerate_all()
    else:
        pivot = max(work.unary, key=lambda n: (work.degree(n), -n))
        value, assignment = np.inf, {}
        for c in range(len(work.unary[pivot])):
            sub = work.copy()
            sub.condition(pivot, c)
            counter[0] += 1
            v, a = _solve_exact(sub, enum_limit, counter)
            if v < value:
                value, assignment = v, {**a, pivot: c}
    work.undo(assignment)
    return value, assignment


def optimize(node_cost: Sequence[FloatArray], edges: Sequence[tuple[int, int]], t_x: Sequence[FloatArray],
             *, enum_limit: int = DEFAULT_ENUM_LIMIT) -> SearchResult:
    """Algorithm 1 over cost tables: an optimal strategy of Eq. 1.

    Parameters
    ----------
    node_cost
        ``t_C + t_S`` per node, shape ``(C_i,)``.
    edges, t_x
        ``(u, v)`` per edge (a DAG; parallel edges allowed) and its ``(C_u, C_v)`` table.
    enum_limit
        Largest final-graph strategy count enumerated at once; above it the exact completion
        conditions on nodes.

    Examples
    --------
    >>> u = [np.array([1.0, 0.0]), np.array([0.0, 3.0]), np.array([0.0, 0.0])]
    >>> x = np.array([[0.0, 2.0], [2.0, 0.0]])
    >>> r = optimize(u, [(0, 1), (1, 2)], [x, x])
    >>> r.strategy, r.value, r.final_nodes
    ((0, 0, 0), 1.0, 2)
    """
    work = _Work.build(node_cost, edges, t_x)
    n_nodes, n_edges = work.reduce()
    k = len(work.unary)
    counter = [0]
    if work.size() <= enum_limit:
        value, assignment = work.enumerate_all()
        work.undo(assignment)
        completion = "enumerate"
    else:
        value, assignment = _solve_exact(work, enum_limit, counter)
        completion = "conditioning"
    strategy = tuple(assignment[i] for i in range(len(node_cost)))
    return SearchResult(strategy, float(value), k, n_nodes, n_edges, completion, counter[0])


def optimize_tables(tables: CostTables, *, fixed: Mapping[int, int] | None = None,
                    enum_limit: int = DEFAULT_ENUM_LIMIT) -> SearchResult:
    """:func:`optimize` over the tables of a layer graph (:func:`.tables.build_tables`).

    ``fixed`` pins layers to configuration indices; the others are optimised around them (used
    to complete a published strategy, e.g. Table 5, where it leaves layers open).

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> from dnnpart.layerwise.tables import build_tables
    >>> t = build_tables(lenet5(64), 2, P100, paper_bandwidth(2))
    >>> free, pinned = optimize_tables(t), optimize_tables(t, fixed={1: 0})
    >>> pinned.strategy[1], pinned.value >= free.value
    (0, True)
    """
    node_cost = tables.node_cost
    for i, c in (fixed or {}).items():
        if not 0 <= c < len(node_cost[i]):
            raise ValueError(f"layer {i}: configuration {c} out of range")
        pinned = np.full_like(node_cost[i], _FORBIDDEN)
        pinned[c] = node_cost[i][c]
        node_cost[i] = pinned
    return optimize(node_cost, tables.edges, tables.t_x, enum_limit=enum_limit)


#: Node cost of a configuration excluded by ``fixed`` (finite, so sums stay comparable).
_FORBIDDEN = 1e30
