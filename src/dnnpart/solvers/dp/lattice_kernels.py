"""Numba kernels over ideal lattices (``.py_func``: the uncompiled source, for compilation
checks; the twins written from the definitions are in ``tests/twins/test_lattice_twin.py``).

* :func:`enumerate_lattice` lists the ideals of a DAG layer by layer (by size), each as its
  parent ideal plus one node, and records every cover relation ``J = I - m`` of the lattice
  (the "down-edges" the DP walks). Ideals of one layer are deduplicated with Zobrist hashing
  (XOR of per-node random keys, updated in O(1) per added node) in an open-addressing table,
  confirmed by comparing uint64 bitsets; only two layers of bitsets are alive at a time.
* :func:`dfs_topological_order` is the linearization of DPL (paper 1, section 5.1.2).
* :func:`ideal_sums` sums a per-node value over each ideal of a lattice.

The kernels that fill the DP's rows are in :mod:`dnnpart.solvers.dp.kernels`; this module
is what :mod:`dnnpart.solvers.dp.ideals` needs, without them.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import kernel, linear_kernel


@kernel
def enumerate_lattice(n, pred_ptr, pred_idx, succ_ptr, succ_idx, zobrist, max_ideals, max_edges):  # type: ignore[no-untyped-def]
    """Enumerate the ideals of a DAG (ids topological) by size, with their cover relations.

    Returns ``(n_ideals, parent, added, edge_upper, edge_node, edge_lower)``: ideal ``i`` is
    ``parent[i]`` plus node ``added[i]`` (ideal 0 is empty); each edge says
    ``edge_upper = edge_lower + {edge_node}``. When more than ``max_ideals`` ideals exist,
    returns ``n_ideals = -1`` early (memory stays bounded by the limit); when more than
    ``max_edges`` cover edges (or frontier pairs of one level) would be stored, returns
    ``n_ideals = -2`` before allocating them.
    """
    n_words = (n + 63) // 64
    one = np.uint64(1)
    cap = 1024
    parent = np.empty(cap, np.int32)
    added = np.empty(cap, np.int32)
    parent[0] = -1
    added[0] = -1
    n_ideals = 1
    e_cap = 1024
    e_upper = np.empty(e_cap, np.int32)
    e_node = np.empty(e_cap, np.int32)
    e_lower = np.empty(e_cap, np.int32)
    n_edges = 0

    indeg = np.zeros(n, np.int64)
    for v in range(n):
        indeg[v] = pred_ptr[v + 1] - pred_ptr[v]
    n_sources = 0
    for v in range(n):
        if indeg[v] == 0:
            n_sources += 1
    cur_bits = np.zeros((1, n_words), np.uint64)
    cur_hash = np.zeros(1, np.uint64)
    cur_gidx = np.zeros(1, np.int64)
    cur_fptr = np.zeros(2, np.int64)
    cur_fidx = np.empty(max(n_sources, 1), np.int64)
    t = 0
    for v in range(n):
        if indeg[v] == 0:
            cur_fidx[t] = v
            t += 1
    cur_fptr[1] = n_sources
    n_cur = 1

    while n_cur > 0:
        total = cur_fptr[n_cur]
        if total == 0:
            break
        if total > max_edges:
            return -2, parent[:0], added[:0], e_upper[:0], e_node[:0], e_lower[:0]
        t_cap = 16
        while t_cap < 2 * total:
            t_cap *= 2
        mask = np.uint64(t_cap - 1)
        table = np.full(t_cap, -1, np.int64)
        nxt_bits = np.empty((total, n_words), np.uint64)
        nxt_hash = np.empty(total, np.uint64)
        nxt_gidx = np.empty(total, np.int64)
        nxt_fptr = np.zeros(total + 1, np.int64)
        f_cap = 2 * total + 16
        nxt_fidx = np.empty(f_cap, np.int64)
        n_f = 0
        n_nxt = 0
        for j in range(n_cur):
            for f in range(cur_fptr[j], cur_fptr[j + 1]):
                v = cur_fidx[f]
                vw = v >> 6
                vb = one << np.uint64(v & 63)
                h = cur_hash[j] ^ zobrist[v]
                slot = int(h & mask)
                found = -1
                while table[slot] != -1:
                    c = table[slot]
                    if nxt_hash[c] == h:
                        same = True
                        for w in range(n_words):
                            word = cur_bits[j, w]
                            if w == vw:
                                word = word | vb
                            if word != nxt_bits[c, w]:
                                same = False
                                break
                        if same:
                            found = c
                            break
                    slot = int((np.uint64(slot) + one) & mask)
                if found == -1:
                    if n_ideals >= max_ideals:
                        return -1, parent[:0], added[:0], e_upper[:0], e_node[:0], e_lower[:0]
                    c = n_nxt
                    n_nxt += 1
                    table[slot] = c
                    for w in range(n_words):
                        nxt_bits[c, w] = cur_bits[j, w]
                    nxt_bits[c, vw] = nxt_bits[c, vw] | vb
                    nxt_hash[c] = h
                    if n_ideals == cap:
                        cap *= 2
                        parent2 = np.empty(cap, np.int32)
                        added2 = np.empty(cap, np.int32)
                        parent2[:n_ideals] = parent[:n_ideals]
                        added2[:n_ideals] = added[:n_ideals]
                        parent = parent2
                        added = added2
                    parent[n_ideals] = cur_gidx[j]
                    added[n_ideals] = v
                    nxt_gidx[c] = n_ideals
                    n_ideals += 1
                    # frontier of the new ideal: the old one without v, plus successors of
                    # v whose predecessors are now all inside
                    need = (cur_fptr[j + 1] - cur_fptr[j]) + (succ_ptr[v + 1] - succ_ptr[v])
                    if n_f + need > f_cap:
                        f_cap = 2 * (n_f + need)
                        fidx2 = np.empty(f_cap, np.int64)
                        fidx2[:n_f] = nxt_fidx[:n_f]
                        nxt_fidx = fidx2
                    for g in range(cur_fptr[j], cur_fptr[j + 1]):
                        if cur_fidx[g] != v:
                            nxt_fidx[n_f] = cur_fidx[g]
                            n_f += 1
                    for e in range(succ_ptr[v], succ_ptr[v + 1]):
                        x = succ_idx[e]
                        ready = True
                        for q in range(pred_ptr[x], pred_ptr[x + 1]):
                            p = pred_idx[q]
                            if (nxt_bits[c, p >> 6] >> np.uint64(p & 63)) & one == 0:
                                ready = False
                                break
                        if ready:
                            nxt_fidx[n_f] = x
                            n_f += 1
                    nxt_fptr[c + 1] = n_f
                    found = c
                if n_edges >= max_edges:
                    return -2, parent[:0], added[:0], e_upper[:0], e_node[:0], e_lower[:0]
                if n_edges == e_cap:
                    e_cap *= 2
                    u2 = np.empty(e_cap, np.int32)
                    n2 = np.empty(e_cap, np.int32)
                    l2 = np.empty(e_cap, np.int32)
                    u2[:n_edges] = e_upper[:n_edges]
                    n2[:n_edges] = e_node[:n_edges]
                    l2[:n_edges] = e_lower[:n_edges]
                    e_upper = u2
                    e_node = n2
                    e_lower = l2
                e_upper[n_edges] = nxt_gidx[found]
                e_node[n_edges] = v
                e_lower[n_edges] = cur_gidx[j]
                n_edges += 1
        cur_bits = nxt_bits[:n_nxt]
        cur_hash = nxt_hash[:n_nxt]
        cur_gidx = nxt_gidx[:n_nxt]
        cur_fptr = nxt_fptr[: n_nxt + 1]
        cur_fidx = nxt_fidx[:n_f]
        n_cur = n_nxt
    return (n_ideals, parent[:n_ideals], added[:n_ideals], e_upper[:n_edges],
            e_node[:n_edges], e_lower[:n_edges])


@linear_kernel
def dfs_topological_order(n, succ_ptr, succ_idx):  # type: ignore[no-untyped-def]
    """A topological order that follows a depth-first traversal (DPL's linearization).

    A node is emitted once all its predecessors are; among ready nodes the most recently
    readied one goes next, so the order runs down one branch before taking up another
    (smallest ids first among simultaneous choices).
    """
    indeg = np.zeros(n, np.int64)
    for e in range(succ_idx.shape[0]):
        indeg[succ_idx[e]] += 1
    stack = np.empty(n, np.int64)
    top = 0
    for v in range(n - 1, -1, -1):
        if indeg[v] == 0:
            stack[top] = v
            top += 1
    order = np.empty(n, np.int64)
    t = 0
    while top > 0:
        top -= 1
        u = stack[top]
        order[t] = u
        t += 1
        for e in range(succ_ptr[u + 1] - 1, succ_ptr[u] - 1, -1):
            w = succ_idx[e]
            indeg[w] -= 1
            if indeg[w] == 0:
                stack[top] = w
                top += 1
    return order[:t]


@linear_kernel
def ideal_sums(parent, added, value):  # type: ignore[no-untyped-def]
    """Per ideal, the sum of ``value`` over its nodes (``parent``/``added`` of a lattice)."""
    out = np.zeros(parent.shape[0], np.float64)
    for i in range(1, parent.shape[0]):
        out[i] = out[parent[i]] + value[added[i]]
    return out
