"""Operator clustering (Sec. 4.2, Eq. 4): fuse adjacent hyper-ops until at most ``K`` remain.

Each step lists every pair of hyper-ops joined by a structural edge, ordered by
``cost(u, v) = c_u(u) + c_u(v) - alpha * c_m(u, v)`` (Eq. 4), and fuses the first *valid*
pair: fusing keeps the hyper-graph acyclic (no other path from ``u`` to ``v``: then every
hyper-op stays convex) and the fused hyper-op within device memory.

Choices where the paper is silent (Appendix B is not in the seed text; also in
``docs/methods/parmesan.md``):

* ``c_m(u, v)`` is the total time of the communication edges between ``u`` and ``v``, both
  directions.
* The memory test uses the stage memory of :class:`~.opdag.MemoryModel` at stage position 0
  (the most micro-batches in flight), since a hyper-op's final stage is not known yet: a hyper-op
  that passes fits in any stage on its own.
* Ties in Eq. 4 go to the pair whose smallest member ids are smallest (deterministic).
* When no valid pair is left before ``K`` is reached, clustering stops there.
* The pairs wait in a lazy heap (stale entries skipped, invalid ones dropped: both
  properties are stable until one of the two blocks changes), not a full sort per merge: the
  fused pair is the same, 6,155 ops of a Swin-L training graph cluster to 128 in seconds.
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
    n_stages: int = 1, trace: list[Merge] | None = None, respect: IntArray | None = None,
) -> IntArray:
    """Hyper-op label of every node, hyper-ops numbered in a topological order.

    ``respect`` (a label per node) forbids fusing nodes with different labels: phase 1 passes
    the stage of every op in the layer-level partition, so that partition stays a chain of
    fronted subgraphs of the hyper-graph (see :mod:`.phase1`).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(4, acc_time=[1.0, 5.0, 1.0, 1.0]))
    >>> cluster_ops(dag, 2).tolist()  # the two cheap tail ops first, then the head
    [0, 0, 1, 1]
    >>> cluster_ops(dag, 2, respect=np.array([0, 0, 0, 1])).tolist()
    [0, 0, 0, 1]
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
    comm: dict[int, dict[int, float]] = {v: {} for v in range(dag.n)}
    for a, b, t in zip(dag.c_src.tolist(), dag.c_dst.tolist(), dag.c_time.tolist(), strict=True):
        comm[a][b] = comm[a].get(b, 0.0) + t
        comm[b][a] = comm[b].get(a, 0.0) + t
    side = None if respect is None else np.asarray(respect).tolist()
    version = dict.fromkeys(range(dag.n), 0)

    def fits(block: set[int]) -> bool:
        mask = np.zeros(dag.n, np.bool_)
        mask[list(block)] = True
        return bool(dag.memory(mask, mem, 0, max(1, n_stages))[0] <= mem.device_memory)

    # Lazy heap of adjacent pairs in Eq. 4 order (cost, then smallest ids). An entry is stale
    # once either block changed (its version moved on); a pair found invalid stays invalid
    # while both blocks are unchanged (an other path u ~> v survives every merge that does not
    # touch u or v, and memory depends on the two blocks only), so it is dropped: the first
    # valid entry popped is the argmin of Eq. 4 over the valid pairs, as a full sort would give.
    heap: list[tuple[float, int, int, int, int, int, int]] = []

    def push(u: int, v: int) -> None:
        if side is not None and side[u] != side[v]:
            return
        c = comp[u] + comp[v] - alpha * comm[u].get(v, 0.0)
        heapq.heappush(heap, (c, min(u, v), max(u, v), u, v, version[u], version[v]))

    for u in members:
        for v in succ[u]:
            push(u, v)
    while len(members) > k and heap:
        c, _, _, u, v, vu, vv = heapq.heappop(heap)
        if u not in members or v not in members or version[u] != vu or version[v] != vv:
            continue
        if len(succ[u]) > 1 and len(pred[v]) > 1 and _has_other_path(u, v, succ):
            continue
        if not fits(members[u] | members[v]):
            continue
        keep, gone = min(u, v), max(u, v)
        if trace is not None:
            trace.append(Merge(frozenset(members[u]), frozenset(members[v]), c))
        members[keep] |= members.pop(gone)
        comp[keep] += comp.pop(gone)
        version[keep] += 1
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
        for w, t in comm.pop(gone).items():
            del comm[w][gone]
            if w != keep:
                comm[keep][w] = comm[keep].get(w, 0.0) + t
                comm[w][keep] = comm[w].get(keep, 0.0) + t
        comm[keep].pop(keep, None)
        for w in succ[keep]:
            push(keep, w)
        for w in pred[keep]:
            push(w, keep)
    number = smallest_first_numbering(succ, {v: len(pred[v]) for v in members})
    label = np.empty(dag.n, np.int64)
    for r, block in members.items():
        label[list(block)] = number[r]
    return label


def smallest_first_numbering(succ: dict[int, set[int]], indeg: dict[int, int]) -> dict[int, int]:
    """A topological numbering of a DAG given as successor sets and in-degrees (Kahn's
    algorithm, the smallest ready node first: deterministic labels). ``indeg`` is consumed.

    Examples
    --------
    >>> smallest_first_numbering({0: {2}, 1: {2}, 2: set()}, {0: 0, 1: 0, 2: 2})
    {0: 0, 1: 1, 2: 2}
    """
    ready = [v for v, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    number: dict[int, int] = {}
    while ready:
        v = heapq.heappop(ready)
        number[v] = len(number)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(ready, w)
    return number
