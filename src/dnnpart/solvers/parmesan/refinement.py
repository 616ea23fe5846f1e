"""Iterative refinement of boundary ops (Sec. 4.3).

A move sends one atomic op that has an edge into another stage to the stage of such a
neighbour. Valid moves keep the stages a chain of fronted subgraphs (for every structural edge
``x -> y``: ``stage(x) <= stage(y)``, which also keeps every stage convex), leave the source
stage non-empty and keep both changed stages within memory.

Selection rule (the paper's Appendix C is not in the seed text; also in ``docs/methods/parmesan.md``):
among valid moves, take the one whose stage times, sorted in decreasing order, are
lexicographically smallest, and apply it only if that vector is strictly smaller than the
current one. The first entry is the max stage time, so a step never increases it; ties between
equal entries are broken towards a smaller second-largest stage time and so on, which lets the
refinement drain a bottleneck shared by several stages. It stops when no move improves or
after ``max_steps`` (the paper's ``I = 100``).
"""

from __future__ import annotations

import numpy as np

from dnnpart.solvers.parmesan.opdag import IntArray, MemoryModel, OpDag


def refine(
    dag: OpDag, stage_of: IntArray, replicas: IntArray, *, memory: MemoryModel | None = None,
    max_steps: int = 100,
) -> tuple[IntArray, int]:
    """Refined ``stage_of`` and the number of moves made.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(4))
    >>> st, moves = refine(dag, np.array([0, 1, 1, 1]), np.array([1, 1]))
    >>> st.tolist(), moves
    ([0, 0, 1, 1], 1)
    """
    mem = memory or MemoryModel()
    s_n = int(replicas.shape[0])
    stage = np.array(stage_of, dtype=np.int64)
    nbrs: list[set[int]] = [set() for _ in range(dag.n)]
    for a, b in zip(np.concatenate((dag.src, dag.c_src)).tolist(),
                    np.concatenate((dag.dst, dag.c_dst)).tolist(), strict=True):
        nbrs[a].add(b)
        nbrs[b].add(a)
    succ: list[list[int]] = [[] for _ in range(dag.n)]
    pred: list[list[int]] = [[] for _ in range(dag.n)]
    for a, b in zip(dag.src.tolist(), dag.dst.tolist(), strict=True):
        succ[a].append(b)
        pred[b].append(a)

    def times_of(st: IntArray) -> np.ndarray:
        u = st[None, :] == np.arange(s_n)[:, None]
        return dag.work(u) / replicas

    def fits(st: IntArray, j: int) -> bool:
        return bool(dag.memory(st == j, mem, j, s_n)[0] <= mem.device_memory)

    times = times_of(stage)
    key = tuple(sorted(times.tolist(), reverse=True))
    counts = np.bincount(stage, minlength=s_n)
    moves = 0
    for _ in range(max_steps):
        best_key, best_move = key, None
        for v in range(dag.n):
            i = int(stage[v])
            if counts[i] <= 1:
                continue
            for j in sorted({int(stage[w]) for w in nbrs[v]} - {i}):
                if j < i and any(stage[p] > j for p in pred[v]):
                    continue
                if j > i and any(stage[w] < j for w in succ[v]):
                    continue
                stage[v] = j
                if fits(stage, i) and fits(stage, j):
                    new = times.copy()
                    u = stage[None, :] == np.array([i, j])[:, None]
                    new[[i, j]] = dag.work(u) / replicas[[i, j]]
                    k = tuple(sorted(new.tolist(), reverse=True))
                    if k < best_key:
                        best_key, best_move = k, (v, j, new)
                stage[v] = i
        if best_move is None:
            break
        v, j, new = best_move
        counts[stage[v]] -= 1
        counts[j] += 1
        stage[v] = j
        times, key = new, best_key
        moves += 1
    return stage, moves
