"""Numba kernels of the hierarchy DP (``.py_func``: the uncompiled source, for compilation
checks; the brute force over the hierarchy's space checks the values).

Same recurrence, same loop order and same floating-point summation order as the plain
implementation :func:`dnnpart.solvers.dp.hierarchy.run_hierarchy_dp_plain` (which stays as the
reference twin), over dense arrays instead of Python-int bitmasks:

* :func:`subset_matrix` tells for every pair of ideals whether one lies inside the other
  (``O(I^2 W)`` over packed 64-bit words), so that the segment DP finds the ideals between its
  ends with one lookup each.
* :func:`hierarchy_row` fills one row ``j`` of the outer table (groups used x CPUs used),
  running the segment DP (up to ``a`` accelerators of one group) for every ideal ``i`` inside
  ``j``; with ``only_lo >= 0`` it runs just the segment ``j \\ only_lo`` and returns its chain,
  which is how the driver rebuilds a plan without storing chains. Slices are priced inline
  (numba cannot call another lazily compiled kernel), ``O(n + E)`` each.

Rows are one kernel call each, so the driver checks the stop flag and the clock between rows.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import kernel

#: Outer-table choice codes of :func:`hierarchy_row`.
CHOICE_NONE, CHOICE_GROUP, CHOICE_CPU, CHOICE_FEWER = 0, 1, 2, 3


@kernel
def subset_matrix(words):  # type: ignore[no-untyped-def]
    """``out[i, j]`` is True when ideal ``i`` (packed bits ``words[i]``) lies inside ``j``."""
    n, w = words.shape
    out = np.zeros((n, n), np.bool_)
    for i in range(n):
        for j in range(i, n):
            ok = True
            for t in range(w):
                if words[i, t] & ~words[j, t]:
                    ok = False
                    break
            out[i, j] = ok
    return out


@kernel
def hierarchy_row(  # type: ignore[no-untyped-def]
    j, only_lo, n_groups, n_cpu, a, limit, table, kind, arg, arg_h, arg_c,
    sub, member, comp, bad, acc_time, cpu_time, memory, acc_cap, cpu_cap,
    succ_ptr, succ_idx, pred_ptr, pred_idx, edge_cost, node_cost, uniform, intra, inter, overlap, chain,
):
    """Fill row ``j`` of ``table`` (and its choices); return ``(slices priced, chain length)``.

    ``table[i, h, c]``: best max-load of ideal ``i`` with ``h`` groups and ``c`` CPUs.
    With ``only_lo >= 0`` nothing is written to the table: the segment ``j \\ only_lo`` is
    solved and its chain of ideals (``only_lo`` first, ``j`` last) written into ``chain``.
    """
    inf = np.inf
    n = member.shape[1]
    priced = 0
    chain_len = 0
    cur = table[j]
    ins = np.empty(j + 1, np.int64)
    best = np.empty((j + 1, a + 1), np.float64)
    back = np.empty((j + 1, a + 1), np.int64)
    mem_j = member[j]
    nodes = np.empty(n, np.int64)
    feeders = np.empty(n, np.int64)
    seen = np.zeros(n, np.int64)
    stamp = 0
    for i in range(j):
        if not sub[i, j] or (only_lo >= 0 and i != only_lo):
            continue
        prev = table[i]
        group_open = False
        for h in range(n_groups):
            for c in range(n_cpu + 1):
                if prev[h, c] < inf:
                    group_open = True
        if only_lo >= 0:
            group_open = True
        # a segment helps only if it beats cur[h, c] for some h, c that prev[h - 1, c] could
        # improve: its value must stay below the largest such cur[h, c] (seg_limit)
        seg_limit = -1.0
        for h in range(1, n_groups + 1):
            for c in range(n_cpu + 1):
                if prev[h - 1, c] < cur[h, c] and cur[h, c] > seg_limit:
                    seg_limit = cur[h, c]
        if only_lo >= 0:
            seg_limit = inf
        seg_cap = min(limit, seg_limit * (1 + 1e-9) + 1e-9)
        if (group_open and seg_limit > 0.0 and bad[j] == bad[i]
                and comp[j] - comp[i] <= a * seg_cap):
            # segment DP over the ideals between i and j, in lattice order
            mem_i = member[i]
            n_in = 0
            for k in range(i, j + 1):
                if sub[i, k] and sub[k, j]:
                    ins[n_in] = k
                    n_in += 1
            for m in range(a + 1):
                best[0, m] = 0.0  # accelerators may stay unused
            for p2 in range(1, n_in):
                k2 = ins[p2]
                for m in range(a + 1):
                    best[p2, m] = inf
                mem_k2 = member[k2]
                for p1 in range(p2):
                    k = ins[p1]
                    if not sub[k, k2] or bad[k2] != bad[k] or comp[k2] - comp[k] > seg_cap:
                        continue
                    # the work left after k2 must fit on the accelerators left (each below
                    # seg_cap), and the state at k must be able to improve the row
                    rest = comp[j] - comp[k2]
                    has = False
                    for m in range(a):
                        left = a - 1 - m
                        if best[p1, m] < seg_limit and (rest <= 0.0 or (
                                left > 0 and rest <= left * seg_cap)):
                            has = True
                    if not has:
                        continue
                    # price slice k2 \ k on an accelerator of the group holding j \ i
                    priced += 1
                    mem_k = member[k]
                    n_s = 0
                    for v in range(n):
                        if mem_k2[v] and not mem_k[v]:
                            nodes[n_s] = v
                            n_s += 1
                    total_mem = 0.0
                    compute = 0.0
                    for t in range(n_s):
                        total_mem += memory[nodes[t]]
                    for t in range(n_s):
                        compute += acc_time[nodes[t]]
                    if not total_mem <= acc_cap or not np.isfinite(compute):
                        continue
                    comm_out = 0.0
                    comm_in = 0.0
                    n_f = 0
                    stamp += 1
                    for t in range(n_s):
                        u = nodes[t]
                        for e in range(pred_ptr[u], pred_ptr[u + 1]):
                            q = pred_idx[e]
                            if not (mem_k2[q] and not mem_k[q]) and seen[q] != stamp:
                                seen[q] = stamp
                                feeders[n_f] = q
                                n_f += 1
                        if uniform[u]:
                            ext = False
                            ext_out = False
                            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                                v = succ_idx[e]
                                if not (mem_k2[v] and not mem_k[v]):
                                    ext = True
                                    if not (mem_j[v] and not mem_i[v]):
                                        ext_out = True
                            if ext:
                                comm_out += node_cost[u] * (inter if ext_out else intra)
                        else:
                            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                                v = succ_idx[e]
                                if not (mem_k2[v] and not mem_k[v]):
                                    out_v = not (mem_j[v] and not mem_i[v])
                                    comm_out += edge_cost[e] * (inter if out_v else intra)
                    # feeders in ascending order: the plain twin's summation order
                    feeders[:n_f].sort()
                    for t in range(n_f):
                        p = feeders[t]
                        rate = inter if not (mem_j[p] and not mem_i[p]) else intra
                        if uniform[p]:
                            comm_in += node_cost[p] * rate
                        else:
                            fed = 0.0
                            for e in range(succ_ptr[p], succ_ptr[p + 1]):
                                v = succ_idx[e]
                                if mem_k2[v] and not mem_k[v]:
                                    fed += edge_cost[e]
                            comm_in += rate * fed
                    if overlap == 0:
                        load = compute + comm_in + comm_out
                    elif overlap == 1:
                        load = max(compute, comm_in + comm_out)
                    else:
                        load = max(compute, max(comm_in, comm_out))
                    if load > limit or load >= seg_limit:
                        continue
                    for m in range(1, a + 1):
                        value = max(best[p1, m - 1], load)
                        if value < best[p2, m]:
                            best[p2, m] = value
                            back[p2, m] = p1
            last = n_in - 1
            mbest = 0
            for m in range(1, a + 1):
                if best[last, m] < best[last, mbest]:
                    mbest = m
            value = best[last, mbest]
            if only_lo >= 0:
                if value < inf:
                    p = last
                    m = mbest
                    chain[0] = ins[p]
                    chain_len = 1
                    while p != 0:
                        p = back[p, m]
                        m -= 1
                        chain[chain_len] = ins[p]
                        chain_len += 1
                    chain[:chain_len] = chain[:chain_len][::-1].copy()
                return priced, chain_len
            if value < inf and value <= limit:
                for h in range(1, n_groups + 1):
                    for c in range(n_cpu + 1):
                        cand = max(prev[h - 1, c], value)
                        if cand < cur[h, c]:
                            cur[h, c] = cand
                            kind[j, h, c] = CHOICE_GROUP
                            arg[j, h, c] = i
        if only_lo >= 0:
            return priced, chain_len
        if n_cpu > 0:
            cpu_open = False
            for h in range(n_groups + 1):
                for c in range(n_cpu):
                    if prev[h, c] < inf:
                        cpu_open = True
            if cpu_open:
                total_mem = 0.0
                load = 0.0
                for v in range(n):
                    if mem_j[v] and not member[i, v]:
                        total_mem += memory[v]
                        load += cpu_time[v]
                if not total_mem <= cpu_cap:
                    load = inf
                if load <= limit:
                    for h in range(n_groups + 1):
                        for c in range(1, n_cpu + 1):
                            cand = max(prev[h, c - 1], load)
                            if cand < cur[h, c]:
                                cur[h, c] = cand
                                kind[j, h, c] = CHOICE_CPU
                                arg[j, h, c] = i
    # fewer groups or CPUs than available is allowed
    for h in range(n_groups + 1):
        for c in range(n_cpu + 1):
            if h >= 1 and cur[h - 1, c] < cur[h, c]:
                cur[h, c] = cur[h - 1, c]
                kind[j, h, c] = CHOICE_FEWER
                arg_h[j, h, c] = h - 1
                arg_c[j, h, c] = c
            if c >= 1 and cur[h, c - 1] < cur[h, c]:
                cur[h, c] = cur[h, c - 1]
                kind[j, h, c] = CHOICE_FEWER
                arg_h[j, h, c] = h
                arg_c[j, h, c] = c - 1
    return priced, chain_len
