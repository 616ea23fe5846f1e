"""Numba kernels that fill the throughput DP's rows: one kernel per feature.

Each kernel fills the rows ``i_start <= I < i_end`` of the DP tables (ideals numbered so
that subsets come first) and returns ``counters`` (``[0]`` += slices priced, ``[1]`` +=
slices cut). They share one walk (:func:`_walk_row`): for ideal ``I`` it enumerates the
ideals ``J`` below ``I`` by a depth-first walk over down-edges (each ``J`` once, via a
stamp array), growing the slice ``U = I \\ J`` one stage node at a time and updating its
price incrementally. A slice's compute time only grows as it grows, so the walk stops below
a slice whose compute reaches the cut on every device kind that can hold it: no larger
slice can be part of a better split. What differs per feature (which cells take a slice,
how, and where the walk is cut) is a strategy argument of the walk that numba resolves at
compile time; the kernels choose it.

* :func:`fill_plain`: paper 1's DP, cut at ``upper`` (a known split's value, or ``inf``).
* :func:`fill_replicated`: a slice may also run on several devices at once (appendix C.2).
* :func:`fill_bounded`: the work bound skips cells and cuts each row's walk lower.
* :func:`fill_masked`: the work bound and a cell mask (the peeled relaxation's bounds).

The arguments travel in groups (tuples; numba unpacks them at no cost):

* ``lattice = (down_ptr, down_node, down_lower)``: the cover relations (CSR by ideal).
* ``slices = (member_ptr, member_idx, succ_ptr, succ_idx, pred_ptr, pred_idx, pred_edge,
  edge_cost, node_cost, uniform, outdeg, memory)``: stage nodes' original nodes, the graph
  and what pricing a slice reads.
* ``devices = (acc_time, cpu_time, acc_cap, cpu_cap, comm_scale, overlap)``: the identical
  accelerators and CPUs (``overlap``: :data:`OVERLAP_CODES`).
* ``walk = (in_set, n_succ_in, stamp, st_lower, st_pos, st_node, st_f, st_u)``: scratch of
  one thread. ``in_set``/``n_succ_in`` must be all zero and ``stamp`` all -1 on entry (they
  are returned so); the walk stack has ``n_stage_nodes + 2`` frames (``st_f``: 5 floats,
  ``st_u``: 2 ints each).
* ``table = (dp, prev_lower, prev_kind)``: ``dp[I, a, c]`` = least max-load splitting
  ideal ``I`` over at most ``a`` accelerators and ``c`` CPUs (``inf`` when impossible);
  exact where below ``upper`` (slices whose compute reaches it are not priced, so a value
  from ``upper`` on may be ``inf`` or too high). The choice is kept in
  ``prev_lower``/``prev_kind`` (codes ``KIND_*``).

The load of a device holding the original nodes ``S`` is the evaluator's: compute plus
``c_u`` once per own node with an out-edge leaving ``S`` and once per outside node with an
edge into ``S`` (per edge for non-uniform nodes), scaled by ``comm_scale``, combined per
``overlap``; CPUs pay compute only.

``.py_func`` of each kernel runs its own source as Python (tests of the compiled code);
:mod:`dnnpart.testing.dp_row_twins` holds the twins written separately.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import helper, kernel

#: Overlap modes of paper 1, appendix C.1, as kernel codes.
OVERLAP_CODES = {"none": 0, "compute-comm": 1, "full-duplex": 2}

#: ``prev_kind`` codes: the last slice on one more accelerator or CPU, the cell's value
#: taken from one accelerator or CPU fewer, or no choice (the empty ideal, or ``inf``).
KIND_ACC, KIND_CPU, KIND_FEWER_ACC, KIND_FEWER_CPU, KIND_BASE = 0, 1, 2, 3, -1


@kernel
def fill_plain(i_start, i_end, upper, lattice, slices, devices, walk, table, counters):  # type: ignore[no-untyped-def]
    """Fill DP rows ``i_start <= I < i_end`` by paper 1's transition.

    ``dp[I, a, c] = min over J of max(dp[J, a - 1, c], acc(I \\ J))`` (or
    ``max(dp[J, a, c - 1], cpu(I \\ J))``), over the slices whose compute on that kind of
    device is below ``upper``; then the best over fewer devices. Arguments: see the module
    docstring.
    """
    dp, prev_lower, prev_kind = table
    use_acc = dp.shape[1] > 1
    use_cpu = dp.shape[2] > 1
    for big in range(i_start, i_end):
        if _start_row(big, dp, prev_lower, prev_kind):  # type: ignore[no-untyped-call]
            _walk_row(big, upper, use_acc, use_cpu, lattice, slices, devices, walk, table,  # type: ignore[no-untyped-call]
                      counters, None, None)
            _fewer_devices(dp, prev_kind, big)  # type: ignore[no-untyped-call]
    return counters


@kernel
def fill_replicated(i_start, i_end, upper, lattice, slices, devices, walk, table, counters, replicas):  # type: ignore[no-untyped-def]
    """Fill DP rows ``i_start <= I < i_end`` where a slice may run on several replicas.

    Paper 1, appendix C.2: a slice may also run on ``k <= max_rep_acc`` accelerators
    (``k <= max_rep_cpu`` CPUs) at once, at load ``load / k`` plus (overlap 0) or max-ed
    with (overlap 1, 2) the all-reduce ``(k - 1) / k * W * ar`` (``W``: the slice's memory,
    ``ar``: load units per byte of the all-reduce link, 0 for inference):
    ``dp[I, a, c] = min over J, k of max(dp[J, a - k, c], load on k replicas)``, likewise
    for CPUs. The walk stops where the least load on any number of replicas (compute / k
    with its all-reduce, which only grows with the slice too) reaches ``upper``.

    ``replicas = (max_rep_acc, max_rep_cpu, ar_acc, ar_cpu, rep_load, prev_count)``:
    ``rep_load`` is a ``(2, max(max_rep_acc, max_rep_cpu) + 1)`` scratch array of the
    thread; the chosen ``k`` goes to ``prev_count`` (shaped like ``dp``). Other arguments:
    see the module docstring.
    """
    dp, prev_lower, prev_kind = table
    use_acc = dp.shape[1] > 1
    use_cpu = dp.shape[2] > 1
    for big in range(i_start, i_end):
        if _start_row(big, dp, prev_lower, prev_kind):  # type: ignore[no-untyped-call]
            _walk_row(big, upper, use_acc, use_cpu, lattice, slices, devices, walk, table,  # type: ignore[no-untyped-call]
                      counters, None, replicas)
            _fewer_devices(dp, prev_kind, big)  # type: ignore[no-untyped-call]
    return counters


@kernel
def fill_bounded(i_start, i_end, upper, lattice, slices, devices, walk, table, counters, bound, live):  # type: ignore[no-untyped-def]
    """Fill DP rows ``i_start <= I < i_end``, skipping the cells the work bound rules out.

    ``upper`` must be finite. ``bound = (work, total_work, inv_ratio)``: a cell
    ``(I, a, c)`` is skipped (left ``inf``) when ``work[I]`` (per ideal, in accelerator time
    units) cannot fit on ``a`` accelerators and ``c`` CPUs below ``upper``, or
    ``total_work - work[I]`` on the devices left (:func:`cell_is_live`). A row without such
    a cell is left ``inf`` unwalked, and its walk stops where the slice's compute reaches
    the worst best so far of the live cells (per device kind), which only falls. The live
    cells are filled as :func:`fill_plain` fills them, from the rows below as this kernel
    left them (no slice the walk skips could improve one). ``live`` is an
    ``(n_acc + 1, n_cpu + 1)`` int8 scratch array of the thread (the row's live cells).
    Other arguments: see the module docstring.
    """
    dp, prev_lower, prev_kind = table
    for big in range(i_start, i_end):
        if not _start_row(big, dp, prev_lower, prev_kind):  # type: ignore[no-untyped-call]
            continue
        use_acc, use_cpu = _mark_live_cells(big, upper, bound, live)  # type: ignore[no-untyped-call]
        if use_acc or use_cpu:
            _walk_row(big, upper, use_acc, use_cpu, lattice, slices, devices, walk, table,  # type: ignore[no-untyped-call]
                      counters, live, None)
            _fewer_devices(dp, prev_kind, big)  # type: ignore[no-untyped-call]
    return counters


@kernel
def fill_masked(i_start, i_end, upper, lattice, slices, devices, walk, table, counters, bound, live, mask):  # type: ignore[no-untyped-def]
    """:func:`fill_bounded` that also skips the cells a cell mask rules out.

    ``mask = (mask_of, cell_mask)``: the cells ``(I, a, c)`` with
    ``cell_mask[mask_of[I], a, c] == 0`` are skipped too (the peeled relaxation's bounds,
    :mod:`dnnpart.solvers.dp.relax`: a split below ``upper`` passes only through cells
    whose relaxed prefix and suffix are below it); the row's walk is cut as with the work
    bound. With a zero work bound (``work`` all zero) only the mask skips cells.
    """
    dp, prev_lower, prev_kind = table
    for big in range(i_start, i_end):
        if not _start_row(big, dp, prev_lower, prev_kind):  # type: ignore[no-untyped-call]
            continue
        use_acc, use_cpu = _mark_live_cells(big, upper, bound, live)  # type: ignore[no-untyped-call]
        use_acc, use_cpu = _unmark_masked_cells(big, mask, live)  # type: ignore[no-untyped-call]
        if use_acc or use_cpu:
            _walk_row(big, upper, use_acc, use_cpu, lattice, slices, devices, walk, table,  # type: ignore[no-untyped-call]
                      counters, live, None)
            _fewer_devices(dp, prev_kind, big)  # type: ignore[no-untyped-call]
    return counters


# -- one row's walk ------------------------------------------------------------------------
#
# The walk prices tens of millions of slices: its loop calls no helper that takes an array.
# Numba counts references to the arrays it passes (atomic operations LLVM cannot remove,
# even where it inlines the call): such calls made the loop 2-3 times slower.

@helper
def _walk_row(big, upper, use_acc, use_cpu, lattice, slices, devices, walk, table, counters, live, replicas):  # type: ignore[no-untyped-def]
    """Row ``big``: walk the ideals ``J`` below it, pricing each slice ``big \\ J``, and let
    the row's cells take each slice below the cut.

    Slices go on accelerators only with ``use_acc``, on CPUs only with ``use_cpu``. Two
    optional strategies (``None``: not used; numba compiles a walk per combination without
    the code of an unused one, since it knows at compile time which arguments are ``None``):

    * ``live``: the row's live cells (int8, ``(n_acc + 1, n_cpu + 1)``): only they take
      slices, and the cut of each kind of device falls to the worst best so far of the
      cells a slice on it could improve. Without it every cell takes every slice and the
      cut stays at ``upper``.
    * ``replicas``: :func:`fill_replicated`'s; a slice may also run on ``k`` replicas, and
      the walk stops where its least load on any number of them (compute / k with the
      all-reduce, which only grows with the slice too) reaches ``upper``.
    """
    down_ptr, down_node, down_lower = lattice
    member_ptr, member_idx, succ_ptr, succ_idx, pred_ptr, pred_idx, pred_edge = slices[:7]
    edge_cost, node_cost, uniform, outdeg, memory = slices[7:]
    acc_time, cpu_time, acc_cap, cpu_cap, comm_scale, overlap = devices
    in_set, n_succ_in, stamp, st_lower, st_pos, st_node, st_f, st_u = walk
    dp, prev_lower, prev_kind = table
    if replicas is not None:
        max_rep_acc, max_rep_cpu, ar_acc, ar_cpu, rep_load, prev_count = replicas
    cut_acc = upper
    cut_cpu = upper
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
        # the slice grown by stage node s, priced incrementally
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
            if ta == np.inf:
                bad_acc += 1
            else:
                comp_acc += ta
            if tc == np.inf:
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
        if replicas is None:
            # a slice whose compute reaches the cut improves no cell, nor does a larger one
            if comp_acc >= cut_acc:
                acc_ok = False
            if comp_cpu >= cut_cpu:
                cpu_ok = False
            least = np.inf
            if acc_ok:
                least = comp_acc
            if cpu_ok and comp_cpu < least:
                least = comp_cpu
        else:
            # compute / k with the all-reduce only grows with the slice too
            least = np.inf
            if acc_ok:
                for k in range(1, max_rep_acc + 1):
                    v = _replica_load(comp_acc, mem * ar_acc, k, overlap)  # type: ignore[no-untyped-call]
                    if v < least:
                        least = v
            if cpu_ok:
                for k in range(1, max_rep_cpu + 1):
                    v = _replica_load(comp_cpu, mem * ar_cpu, k, overlap)  # type: ignore[no-untyped-call]
                    if v < least:
                        least = v
        if least >= upper:  # the least load the slice could have
            counters[1] += 1
            for r in range(member_ptr[s + 1] - 1, member_ptr[s] - 1, -1):
                x = member_idx[r]
                in_set[x] = 0
                for q in range(pred_ptr[x], pred_ptr[x + 1]):
                    n_succ_in[pred_idx[q]] -= 1
            continue
        counters[0] += 1
        acc_load = _acc_load(comp_acc, comm_in, comm_out, comm_scale, overlap) if acc_ok else np.inf  # type: ignore[no-untyped-call]
        cpu_load = comp_cpu if cpu_ok else np.inf
        if replicas is not None:
            # min over k of max(dp[J][a - k][c], load on k replicas), likewise for CPUs
            rep_load[0, 1] = acc_load
            for k in range(2, max_rep_acc + 1):
                rep_load[0, k] = _replica_load(acc_load, mem * ar_acc, k, overlap)  # type: ignore[no-untyped-call]
            rep_load[1, 1] = cpu_load
            for k in range(2, max_rep_cpu + 1):
                rep_load[1, k] = _replica_load(cpu_load, mem * ar_cpu, k, overlap)  # type: ignore[no-untyped-call]
            for a in range(dp.shape[1]):
                for c in range(dp.shape[2]):
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
        else:
            # max(dp[J][a - 1][c], acc(I \\ J)), likewise for CPUs
            improved = False
            for a in range(dp.shape[1]):
                for c in range(dp.shape[2]):
                    if live is not None:
                        if live[a, c] == 0:
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
            if live is not None:
                if improved:
                    # the walk may stop where compute reaches the worst best of the live
                    # cells (per kind of device), which only falls
                    worst_acc = 0.0
                    worst_cpu = 0.0
                    for a in range(dp.shape[1]):
                        for c in range(dp.shape[2]):
                            if live[a, c] == 0:
                                continue
                            if a > 0 and dp[big, a, c] > worst_acc:
                                worst_acc = dp[big, a, c]
                            if c > 0 and dp[big, a, c] > worst_cpu:
                                worst_cpu = dp[big, a, c]
                    cut_acc = min(upper, worst_acc)
                    cut_cpu = min(upper, worst_cpu)
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


@helper
def _acc_load(comp, comm_in, comm_out, comm_scale, overlap):  # type: ignore[no-untyped-def]
    """An accelerator's load: compute and its transfers combined per ``overlap``."""
    ci = comm_in * comm_scale
    co = comm_out * comm_scale
    if overlap == 0:
        return comp + ci + co
    if overlap == 1:
        return max(comp, ci + co)
    return max(comp, max(ci, co))


@helper
def _replica_load(load, sync, k, overlap):  # type: ignore[no-untyped-def]
    """A slice's load on ``k`` replicas: ``load / k`` and the all-reduce ``(k - 1) / k *
    sync``, added (overlap 0) or max-ed."""
    if overlap == 0:
        return load / k + (k - 1) * sync / k
    return max(load / k, (k - 1) * sync / k)


# -- the cells of a row --------------------------------------------------------------------

@helper
def _start_row(big, dp, prev_lower, prev_kind):  # type: ignore[no-untyped-def]
    """Row ``big`` before its walk: every cell ``inf`` without a choice. The empty ideal's
    row (``big == 0``) is all zero and has no walk: returns whether the row needs one."""
    first = 0.0 if big == 0 else np.inf
    for a in range(dp.shape[1]):
        for c in range(dp.shape[2]):
            dp[big, a, c] = first
            prev_lower[big, a, c] = -1
            prev_kind[big, a, c] = KIND_BASE
    return big != 0


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


# -- live cells (work bound, cell mask) ------------------------------------------------------

@helper
def _mark_live_cells(big, upper, bound, live):  # type: ignore[no-untyped-def]
    """Mark in ``live`` the cells of row ``big`` that the work bound keeps
    (:func:`cell_is_live`); returns whether any has ``a > 0`` and whether any has ``c > 0``
    (the kinds of device the row's last slice may use)."""
    work, total_work, inv_ratio = bound
    n_acc = live.shape[0] - 1
    n_cpu = live.shape[1] - 1
    use_acc = False
    use_cpu = False
    for a in range(n_acc + 1):
        for c in range(n_cpu + 1):
            if cell_is_live(work[big], total_work, upper, a, c, n_acc, n_cpu, inv_ratio):  # type: ignore[no-untyped-call]
                live[a, c] = 1
                if a > 0:
                    use_acc = True
                if c > 0:
                    use_cpu = True
            else:
                live[a, c] = 0
    return use_acc, use_cpu


@helper
def _unmark_masked_cells(big, mask, live):  # type: ignore[no-untyped-def]
    """Unmark the cells of row ``big`` that ``mask = (mask_of, cell_mask)`` rules out;
    returns the kinds of device the remaining live cells may use (as
    :func:`_mark_live_cells`)."""
    mask_of, cell_mask = mask
    row = mask_of[big]
    use_acc = False
    use_cpu = False
    for a in range(live.shape[0]):
        for c in range(live.shape[1]):
            if cell_mask[row, a, c] == 0:
                live[a, c] = 0
            elif live[a, c] != 0:
                if a > 0:
                    use_acc = True
                if c > 0:
                    use_cpu = True
    return use_acc, use_cpu


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
