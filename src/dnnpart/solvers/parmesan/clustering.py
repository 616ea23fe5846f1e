"""Operator clustering (Sec. 4.2, Eq. 4): fuse adjacent hyper-ops until at most ``K`` remain.

Each step lists every pair of hyper-ops joined by a structural edge, ordered by
``cost(u, v) = c_u(u) + c_u(v) - alpha * c_m(u, v)`` (Eq. 4), and fuses the first *valid*
pair: fusing keeps the hyper-graph acyclic (no other path from ``u`` to ``v``: then every
hyper-op stays convex) and the fused hyper-op within device memory.

Choices where the paper is silent (Appendix B is not in the seed text; also in
``docs/parmesan.md``):

* ``c_m(u, v)`` is the total time of the communication edges between ``u`` and ``v``, both
  directions.
* The memory test uses the stage memory of :class:`~.opdag.MemoryModel` at stage position 0
  (the most micro-batches in flight), since a hyper-op's final stage is not known yet: a hyper-op
  that passes fits in any stage on its own.
* Ties in Eq. 4 go to the pair whose smallest member ids are smallest (deterministic).
* When no valid pair is left before ``K`` is reached, clustering stops there.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from dnnpart.solvers.parmesan.opdag import IntArray, MemoryModel, OpDag


@dataclass(frozen=True, slots=True)
class Merge:
    """One clustering step: the member sets fused and their Eq. 4 cost."""

    u: frozenset[int]
    v: frozenset[int]
    cost: float


def _has_other_path(u: int, v: int, succ: dict[int, set[int]]) -> bool:
    stack = [w for w in succ[u] if w != v]
    seen = set(stack)
    while stack:
        x = stack.pop()
        if x == v:
            return True
        for y in succ[x]:
            if y not in seen:
                seen.add(y)
                stack.append(y)
    return False


def cluster_ops(
    dag: OpDag, k: int, *, alpha: float = 0.001, memory: MemoryModel | None = None,
    n_stages: int = 1, trace: list[Merge] | None = None,
) -> IntArray:
    """Hyper-op label of every node, hyper-ops numbered in a topological order.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(4, acc_time=[1.0, 5.0, 1.0, 1.0]))
    >>> cluster_ops(dag, 2).tolist()  # the two cheap tail ops first, then the head
    [0, 0, 1, 1]
    """
    mem = memory or MemoryModel()
    # a block is keyed by its smallest member
    members: dict[int, set[int]] = {v: {v} for v in range(dag.n)}
    comp = {v: float(dag.compute[v]) for v in range(dag.n)}
    succ: dict[int, set[int]] = {v: set() for v in range(dag.n)}
    pred: dict[int, set[int]] = {v: set() for v in range(dag.n)}
    for a, b in zip(dag.src.tolist(), dag.dst.tolist(), strict=True):
        succ[a].add(b)
        pred[b].add(a)
    comm: dict[tuple[int, int], float] = {}
    for a, b, t in zip(dag.c_src.tolist(), dag.c_dst.tolist(), dag.c_time.tolist(), strict=True):
        key = (min(a, b), max(a, b))
        comm[key] = comm.get(key, 0.0) + t

    def fits(block: set[int]) -> bool:
        mask = np.zeros(dag.n, np.bool_)
        mask[list(block)] = True
        return bool(dag.memory(mask, mem, 0, max(1, n_stages))[0] <= mem.device_memory)

    while len(members) > k:
        pairs = []
        for u in members:
            for v in succ[u]:
                c = comp[u] + comp[v] - alpha * comm.get((min(u, v), max(u, v)), 0.0)
                pairs.append((c, min(u, v), max(u, v), u, v))
        pairs.sort()
        chosen = None
        for c, _, _, u, v in pairs:
            if len(succ[u]) > 1 and len(pred[v]) > 1 and _has_other_path(u, v, succ):
                continue
            if not fits(members[u] | members[v]):
                continue
            chosen = (c, u, v)
            break
        if chosen is None:
            break
        c, u, v = chosen
        keep, gone = min(u, v), max(u, v)
        if trace is not None:
            trace.append(Merge(frozenset(members[u]), frozenset(members[v]), c))
        members[keep] |= members.pop(gone)
        comp[keep] += comp.pop(gone)
        for w in succ.pop(gone):
            pred[w].discard(gone)
            if w != keep:
                succ[keep].add(w)
                pred[w].add(keep)
        for w in pred.pop(gone):
            succ[w].discard(gone)
            if w != keep:
                pred[keep].add(w)
                succ[w].add(keep)
        succ[keep].discard(keep)
        pred[keep].discard(keep)
        new_comm: dict[tuple[int, int], float] = {}
        for (a, b), t in comm.items():
            a2 = keep if a == gone else a
            b2 = keep if b == gone else b
            if a2 == b2:
                continue
            key = (min(a2, b2), max(a2, b2))
            new_comm[key] = new_comm.get(key, 0.0) + t
        comm = new_comm
    # topological numbering of the hyper-ops (Kahn, smallest representative first)
    indeg = {v: len(pred[v]) for v in members}
    ready = sorted(v for v, d in indeg.items() if d == 0)
    number: dict[int, int] = {}
    heapq.heapify(ready)
    while ready:
        v = heapq.heappop(ready)
        number[v] = len(number)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(ready, w)
    label = np.empty(dag.n, np.int64)
    for r, block in members.items():
        label[list(block)] = number[r]
    return label
