"""Array kernels over CSR graphs (numba-compiled; ``.py_func`` is the Python twin; all linear
time, so small graphs run the twin until numba loads: :func:`dnnpart._jit.linear_kernel`).

Conventions: ``ptr``/``idx`` is a CSR adjacency, node ids are ``0..n-1``.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import linear_kernel as kernel


@kernel
def kahn_order(n, succ_ptr, succ_idx):  # type: ignore[no-untyped-def]
    """Topological order by Kahn's algorithm with a FIFO queue (stable w.r.t. ids).

    Returns ``(order, count)``; ``count < n`` means the graph has a cycle.
    """
    indeg = np.zeros(n, np.int64)
    for e in range(succ_idx.shape[0]):
        indeg[succ_idx[e]] += 1
    order = np.empty(n, np.int64)
    head = 0
    tail = 0
    for v in range(n):
        if indeg[v] == 0:
            order[tail] = v
            tail += 1
    while head < tail:
        u = order[head]
        head += 1
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            w = succ_idx[e]
            indeg[w] -= 1
            if indeg[w] == 0:
                order[tail] = w
                tail += 1
    return order, tail


@kernel
def longest_path_levels(n, pred_ptr, pred_idx):  # type: ignore[no-untyped-def]
    """Level of each node = edges on the longest path from a source (ids topological)."""
    level = np.zeros(n, np.int64)
    for v in range(n):
        best = 0
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            cand = level[pred_idx[e]] + 1
            if cand > best:
                best = cand
        level[v] = best
    return level


@kernel
def weighted_longest_path(n, pred_ptr, pred_idx, node_weight):  # type: ignore[no-untyped-def]
    """Finish time of each node on the critical path (ids topological, node weights only)."""
    finish = np.zeros(n, np.float64)
    for v in range(n):
        start = 0.0
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            f = finish[pred_idx[e]]
            if f > start:
                start = f
        finish[v] = start + node_weight[v]
    return finish


@kernel
def ancestors_mask(n, succ_ptr, succ_idx, target):  # type: ignore[no-untyped-def]
    """Nodes from which some node of ``target`` is reachable (``target`` included)."""
    reach = target.copy()
    for v in range(n - 1, -1, -1):
        if reach[v]:
            continue
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            if reach[succ_idx[e]]:
                reach[v] = True
                break
    return reach


@kernel
def descendants_mask(n, succ_ptr, succ_idx, source):  # type: ignore[no-untyped-def]
    """Nodes reachable from some node of ``source`` (``source`` included)."""
    reach = source.copy()
    for v in range(n):
        if reach[v]:
            for e in range(succ_ptr[v], succ_ptr[v + 1]):
                reach[succ_idx[e]] = True
    return reach


@kernel
def contiguity_violation(n, succ_ptr, succ_idx, member):  # type: ignore[no-untyped-def]
    """Find ``(u, v)``: an edge leaving the set ``member`` to a node that reaches it again.

    Returns ``(-1, -1)`` when the set is contiguous (Definition 3.1 of paper 1): there is
    no ``u in S, v not in S, w in S`` with ``v`` reachable from ``u`` and ``w`` from ``v``.
    """
    reach = member.copy()
    for v in range(n - 1, -1, -1):
        if reach[v]:
            continue
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            if reach[succ_idx[e]]:
                reach[v] = True
                break
    for u in range(n):
        if member[u]:
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                w = succ_idx[e]
                if (not member[w]) and reach[w]:
                    return u, w
    return -1, -1
