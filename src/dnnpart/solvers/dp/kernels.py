"""Numba kernel that fills the throughput DP's rows (``.py_func`` is its plain-Python twin).

:func:`dp_fill` fills DP rows. For ideal ``I`` it enumerates the ideals ``J`` below ``I`` by
a depth-first walk over down-edges (each ``J`` once, via a stamp array), growing the slice
``U = I \\ J`` one stage node at a time and updating its load incrementally. Since a
slice's compute time can only grow as it grows, the walk stops where the compute time of
``U`` on every device kind that can hold it reaches ``upper`` (a known solution's value):
no such slice can be part of a better solution.

The kernels over the lattices themselves are in :mod:`dnnpart.solvers.dp.lattice_kernels`.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import helper, kernel

#: Overlap modes of paper 1, appendix C.1, as kernel codes.
OVERLAP_CODES = {"none": 0, "compute-comm": 1, "full-duplex": 2}

#: ``prev_kind`` codes of :func:`dp_fill`.
KIND_ACC, KIND_CPU, KIND_FEWER_ACC, KIND_FEWER_CPU, KIND_BASE = 0, 1, 2, 3, -1


@kernel
def dp_fill(  # type: ignore[no-untyped-def]
    i_start, i_end, down_ptr, down_node, down_lower, member_ptr, member_idx,
    succ_ptr, succ_idx, pred_ptr, pred_idx, pred_edge, edge_cost, node_cost, uniform, outdeg,
    acc_time, cpu_time, memory, acc_cap, cpu_cap, comm_scale, overlap, upper,
    in_set, n_succ_in, stamp, st_lower, st_pos, st_node, st_f, st_u,
    dp, prev_lower, prev_kind, counters,
    max_rep_acc, max_rep_cpu, ar_acc, ar_cpu, rep_load, prev_count,
    work, total_work, inv_ratio, live_cell, src_ok,
    use_mask, mask_of, cell_mask,
):
    """Fill DP rows ``i_start <= I < i_end`` (ideals numbered so that subsets come first).

    ``dp[I, a, c]`` = least max-load splitting ideal ``I`` over at most ``a`` accelerators
    and ``c`` CPUs (``inf`` when impossible or when every split is ``>= upper``); the
    choice is kept in ``prev_lower``/``prev_kind``. The load of a device holding the
    original nodes ``S`` is the evaluator's: compute plus ``c_u`` once per own node with an
    out-edge leaving ``S`` and once per outside node with an edge into ``S`` (per edge for
    non-uniform nodes), scaled by ``comm_scale``, combined per ``overlap``; CPUs pay compute
    only. ``in_set``/``n_succ_in`` must be all zero and ``stamp`` all -1 on entry (they are
    returned so). ``counters[0]`` += slices priced, ``counters[1]`` += slices cut by
    ``upper``.

    Replication (paper 1, appendix C.2): a slice may also run on ``k <= max_rep_acc``
    accelerators (``k <= max_rep_cpu`` CPUs) at once, at load ``load / k`` plus (overlap 0)
    or max-ed with (overlap 1, 2) the all-reduce ``(k - 1) / k * W * ar`` (``W``: the
    slice's memory, ``ar``: load units per byte of the all-reduce link, 0 for inference).
    ``rep_load`` is a ``(2, max(max_rep_acc, max_rep_cpu) + 1)`` scratch array; the chosen
    ``k`` goes to ``prev_count`` (only written when some ``max_rep_* > 1``, so without
    replication it may be a ``(1, 1, 1)`` dummy). ``max_rep_acc = max_rep_cpu = 1`` is the
    plain DP.

    Work bound (``live_cell``, no replication, ``upper`` finite): a cell ``(I, a, c)`` is
    skipped when ``work[I]`` (per ideal, in accelerator time units) cannot fit on ``a``
    accelerators and ``c`` CPUs below ``upper``, or ``total_work - work[I]`` on the devices
    left (:func:`cell_is_live`); a row without such a cell is left ``inf`` unwalked, and
    its walk stops where the slice's compute reaches the worst best so far of the live cells
    (per device kind), which only falls. ``src_ok`` is an ``(n_acc + 1, n_cpu + 1)`` int8
    scratch array (the live cells of the row).

    Cell mask (``use_mask``, only with ``live_cell``): also skip the cells ``(I, a, c)`` with
    ``cell_mask[mask_of[I], a, c] == 0`` (the peeled relaxation's bounds,
    :mod:`dnnpart.solvers.dp.relax`: a split below ``upper`` passes only through cells whose
    relaxed prefix and suffix are below it); the row's walk is cut as with the work bound.
    """
    n_acc = dp.shape[1] - 1
    n_cpu = dp.shape[2] - 1
    inf = np.inf
    replicate = max_rep_acc > 1 or max_rep_cpu > 1
    for big in range(i_start, i_end):
        use_acc = n_acc > 0
        use_cpu = n_cpu > 0
        cut_acc = upper
        cut_cpu = upper
        for a in range(n_acc + 1):
            for c in range(n_cpu + 1):
                dp[big, a, c] = inf
                prev_lower[big, a, c] = -1
                prev_kind[big, a, c] = KIND_BASE
        if big == 0:
            for a in range(n_acc + 1):
                for c in range(n_cpu + 1):
                    dp[0, a, c] = 0.0
            continue
        if live_cell:
            # the row's cells that can still be on a split below upper, and the kinds of
            # device their last slice may use
            use_acc = False
            use_cpu = False
            for a in range(n_acc + 1):
                for c in range(n_cpu + 1):
                    live = cell_is_live(  # type: ignore[no-untyped-call]
                        work[big], total_work, upper, a, c, n_acc, n_cpu, inv_ratio)
                    if use_mask and cell_mask[mask_of[big], a, c] == 0:
                        live = False
                    if live:
                        src_ok[a, c] = 1
                        if a > 0:
                            use_acc = True
                        if c > 0:
                            use_cpu = True
                    else:
                        src_ok[a, c] = 0
            if not (use_acc or use_cpu):
                continue
        stamp[big] = big
        sp = 0
        st_lower[0] = big
        st_pos[0] = down_ptr[big]
        st_node[0] = -1
        for q in range(5):
            st_f[0, q] = 0.0
        st_u[0, 0] = 0
        st_u[0, 1] = 0
        while sp >= 0:
            cur = st_lower[sp]
            pos = st_pos[sp]
            if pos == down_ptr[cur + 1]:
                s = st_node[sp]
                if s >= 0:
                    # undo membership of stage node s (reverse order of adding)
                    for r in range(member_ptr[s + 1] - 1, member_ptr[s] - 1, -1):
                        x = member_idx[r]
                        in_set[x] = 0
                        for q in range(pred_ptr[x], pred_ptr[x + 1]):
                            n_succ_in[pred_idx[q]] -= 1
                sp -= 1
                continue
            st_pos[sp] = pos + 1
            lower = down_lower[pos]
            if stamp[lower] == big:
                continue
            stamp[lower] = big
            s = down_node[pos]
            comp_acc = st_f[sp, 0]
            comp_cpu = st_f[sp, 1]
            mem = st_f[sp, 2]
            comm_in = st_f[sp, 3]
            comm_out = st_f[sp, 4]
            bad_acc = st_u[sp, 0]
            bad_cpu = st_u[sp, 1]
            for r in range(member_ptr[s], member_ptr[s + 1]):
                x = member_idx[r]
                ta = acc_time[x]
                tc = cpu_time[x]
                if ta == inf:
                    bad_acc += 1
                else:
                    comp_acc += ta
                if tc == inf:
                    bad_cpu += 1
                else:
                    comp_cpu += tc
                mem += memory[x]
                # x itself moves from outside to inside the slice
                if uniform[x]:
                    if n_succ_in[x] > 0:
                        comm_in -= node_cost[x]
                    if n_succ_in[x] < outdeg[x]:
                        comm_out += node_cost[x]
                else:
                    for e in range(succ_ptr[x], succ_ptr[x + 1]):
                        if in_set[succ_idx[e]]:
                            comm_in -= edge_cost[e]
                        else:
                            comm_out += edge_cost[e]
                in_set[x] = 1
                for q in range(pred_ptr[x], pred_ptr[x + 1]):
                    p = pred_idx[q]
                    n_succ_in[p] += 1
                    if uniform[p]:
                        if in_set[p]:
                            if n_succ_in[p] == outdeg[p]:
                                comm_out -= node_cost[p]
                        elif n_succ_in[p] == 1:
                            comm_in += node_cost[p]
                    else:
                        if in_set[p]:
                            comm_out -= edge_cost[pred_edge[q]]
                        else:
                            comm_in += edge_cost[pred_edge[q]]
            acc_ok = use_acc and bad_acc == 0 and mem <= acc_cap
            cpu_ok = use_cpu and bad_cpu == 0 and mem <= cpu_cap
            if not replicate:
                # a slice whose compute reaches every live cell's best so far improves none
                if comp_acc >= cut_acc:
                    acc_ok = False
                if comp_cpu >= cut_cpu:
                    cpu_ok = False
            lb = inf
            if acc_ok:
                lb = comp_acc
            if cpu_ok and comp_cpu < lb:
                lb = comp_cpu
            if replicate:
                # compute / k with the all-reduce only grows with the slice too
                lb = inf
                for row in range(2):
                    ok = acc_ok if row == 0 else cpu_ok
                    if not ok:
                        continue
                    base = comp_acc if row == 0 else comp_cpu
                    sync = mem * (ar_acc if row == 0 else ar_cpu)
                    for k in range(1, (max_rep_acc if row == 0 else max_rep_cpu) + 1):
                        v = base / k + (k - 1) * sync / k if overlap == 0 else max(
                            base / k, (k - 1) * sync / k)
                        if v < lb:
                            lb = v
            if lb >= upper:
                counters[1] += 1
                for r in range(member_ptr[s + 1] - 1, member_ptr[s] - 1, -1):
                    x = member_idx[r]
                    in_set[x] = 0
                    for q in range(pred_ptr[x], pred_ptr[x + 1]):
                        n_succ_in[pred_idx[q]] -= 1
                continue
            counters[0] += 1
            acc_load = inf
            if acc_ok:
                ci = comm_in * comm_scale
                co = comm_out * comm_scale
                if overlap == 0:
                    acc_load = comp_acc + ci + co
                elif overlap == 1:
                    acc_load = max(comp_acc, ci + co)
                else:
                    acc_load = max(comp_acc, max(ci, co))
            cpu_load = comp_cpu if cpu_ok else inf
            if not replicate:
                improved = False
                for a in range(n_acc + 1):
                    for c in range(n_cpu + 1):
                        if live_cell and src_ok[a, c] == 0:
                            continue
                        best = dp[big, a, c]
                        if a > 0 and acc_load < best:
                            v = max(dp[lower, a - 1, c], acc_load)
                            if v < best:
                                best = v
                                prev_lower[big, a, c] = lower
                                prev_kind[big, a, c] = KIND_ACC
                                improved = True
                        if c > 0 and cpu_load < best:
                            v = max(dp[lower, a, c - 1], cpu_load)
                            if v < best:
                                best = v
                                prev_lower[big, a, c] = lower
                                prev_kind[big, a, c] = KIND_CPU
                                improved = True
                        dp[big, a, c] = best
                if live_cell and improved:
                    # the row's walk may stop where compute reaches the worst live best
                    worst_acc = 0.0
                    worst_cpu = 0.0
                    for a in range(n_acc + 1):
                        for c in range(n_cpu + 1):
                            if src_ok[a, c] == 0:
                                continue
                            if a > 0 and dp[big, a, c] > worst_acc:
                                worst_acc = dp[big, a, c]
                            if c > 0 and dp[big, a, c] > worst_cpu:
                                worst_cpu = dp[big, a, c]
                    cut_acc = min(upper, worst_acc)
                    cut_cpu = min(upper, worst_cpu)
            else:
                # min over k of max(dp[J][a - k][c], load on k replicas), likewise for CPUs
                for row in range(2):
                    base = acc_load if row == 0 else cpu_load
                    sync = mem * (ar_acc if row == 0 else ar_cpu)
                    rep_load[row, 1] = base
                    for k in range(2, (max_rep_acc if row == 0 else max_rep_cpu) + 1):
                        rep_load[row, k] = base / k + (k - 1) * sync / k if overlap == 0 else max(
                            base / k, (k - 1) * sync / k)
                for a in range(n_acc + 1):
                    for c in range(n_cpu + 1):
                        best = dp[big, a, c]
                        for k in range(1, min(a, max_rep_acc) + 1):
                            load = rep_load[0, k]
                            if load < best:
                                v = max(dp[lower, a - k, c], load)
                                if v < best:
                                    best = v
                                    prev_lower[big, a, c] = lower
                                    prev_kind[big, a, c] = KIND_ACC
                                    prev_count[big, a, c] = k
                        for k in range(1, min(c, max_rep_cpu) + 1):
                            load = rep_load[1, k]
                            if load < best:
                                v = max(dp[lower, a, c - k], load)
                                if v < best:
                                    best = v
                                    prev_lower[big, a, c] = lower
                                    prev_kind[big, a, c] = KIND_CPU
                                    prev_count[big, a, c] = k
                        dp[big, a, c] = best
            sp += 1
            st_lower[sp] = lower
            st_pos[sp] = down_ptr[lower]
            st_node[sp] = s
            st_f[sp, 0] = comp_acc
            st_f[sp, 1] = comp_cpu
            st_f[sp, 2] = mem
            st_f[sp, 3] = comm_in
            st_f[sp, 4] = comm_out
            st_u[sp, 0] = bad_acc
            st_u[sp, 1] = bad_cpu
        _fewer_devices(dp, prev_kind, big)  # type: ignore[no-untyped-call]
    return counters


@helper
def _fewer_devices(dp, prev_kind, big):  # type: ignore[no-untyped-def]
    """Splitting over fewer devices is allowed: ``dp[big, a, c]`` takes the best of fewer."""
    for a in range(dp.shape[1]):
        for c in range(dp.shape[2]):
            if a > 0 and dp[big, a - 1, c] < dp[big, a, c]:
                dp[big, a, c] = dp[big, a - 1, c]
                prev_kind[big, a, c] = KIND_FEWER_ACC
            if c > 0 and dp[big, a, c - 1] < dp[big, a, c]:
                dp[big, a, c] = dp[big, a, c - 1]
                prev_kind[big, a, c] = KIND_FEWER_CPU


#: Relative slack of :func:`cell_is_live`: work sums are added in different orders per ideal.
LIVE_SLACK = 1e-9


@helper
def cell_is_live(work_in, total_work, upper, a, c, n_acc, n_cpu, inv_ratio):  # type: ignore[no-untyped-def]
    """Whether a split of an ideal of work ``work_in`` over ``a`` accelerators and ``c`` CPUs
    can be part of a split of everything with max-load below ``upper`` (work bound only).

    A device's load is at least its compute. In accelerator time units (a node's
    accelerator time, or its CPU time over ``inv_ratio`` where it cannot run on one), a CPU
    takes at most ``upper * inv_ratio`` before its load reaches ``upper``: ``inv_ratio`` is
    the largest ratio of accelerator to CPU time over all nodes.

    >>> cell_is_live(3.0, 6.0, 1.0, 3, 0, 6, 0, 0.0)    # 3 + 3 on 6 devices below 1.0
    True
    >>> cell_is_live(3.0, 6.0, 1.0, 2, 0, 6, 0, 0.0)    # 3 on 2 devices: one gets 1.5
    False
    """
    tol = upper * (1.0 + LIVE_SLACK)
    cap_in = float(a)
    if c > 0:
        cap_in += c * inv_ratio
    if work_in > tol * cap_in:
        return False
    cap_rest = float(n_acc - a)
    if n_cpu - c > 0:
        cap_rest += (n_cpu - c) * inv_ratio
    return total_work - work_in <= tol * cap_rest + LIVE_SLACK * total_work
