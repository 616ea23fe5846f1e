"""Numba kernel of the inner search (Alg. 1's feasibility check); ``.py_func`` is its
uncompiled source (compilation checks; ``tests/solvers/parmesan/test_dfs_twin.py`` holds the
brute-force twin).

:func:`dfs_feasible` decides whether a bijection of the ``n`` vertices of ``G'`` (taken in a
fixed search order, "positions") onto ``n`` devices has every stage time ``<= t``. It is an
iterative depth-first search with an explicit stack, so that it can stop after ``max_nodes``
expanded nodes and be resumed by a later call with the same state arrays (the Python driver
checks the wall clock between calls).

Checking scheme: the terms of a vertex pair are checked at the later of the two positions
(``chk_*`` CSR by position). Under Eq. 6 (``mode = 0``) terms are summed into both endpoints'
partial times; since every term is non-negative, a partial time above ``t`` already proves
infeasibility (this checks a stage as soon as any of its terms is known, which prunes no less
than checking it when its last term becomes known). Under Eq. 7 (``mode = 1``) a stage's time
is ``c_u`` plus the max of its ring terms, so each ring term is checked on its own.
Forward checking. Under Eq. 6 a placed vertex's partial time includes a lower bound on its
terms whose other end is not placed yet: ``res_tab[res_row[res_ptr[j] + m], d]`` is the cheapest those
terms (all but the first ``m`` of them, in the order the search realises them) can cost from
device ``d`` on distinct other devices (largest bytes on the cheapest links, by the
rearrangement inequality, plus the cheapest latency per transfer). When a term becomes real
(chk entry ``e``, event row ``ev_row[e]``) the reservation shrinks by the difference of two rows
and the real cost is added. ``res_row`` maps these rows onto the distinct ones of ``res_tab``
(positions whose remaining terms weigh the same share a row: far fewer rows than ``D`` +
terms, which were 400 MB at 4,096 devices).
Under Eq. 7, ``fut[k]`` holds the largest weights (bytes, latency
counts) of the ring terms of position ``k`` placed later, as sender (columns 0, 1) and receiver
(2, 3), and ``dmin[d]`` the cheapest inverse bandwidth and latency out of (0, 1) and into (2, 3)
device ``d``: a ring term that cannot fit even over ``d``'s cheapest link rejects ``d``. Both
are lower bounds, so the search stays exact.
Symmetry breaking: ``gt_*`` lists, per position, earlier positions whose device must be
smaller. Candidate devices of a position are tried cheapest first (added time), ties by
device id.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import kernel

STATUS_INFEASIBLE, STATUS_FOUND, STATUS_BUDGET = 0, 1, 2


@kernel
def dfs_feasible(n_dev, mode, t, base, chk_ptr, chk_other, chk_w, chk_nl, chk_dir, chk_base,  # type: ignore[no-untyped-def]
                 gt_ptr, gt_other, inv, lat, fut, dmin, res_ptr, ev_row, res_row, res_tab, state,
                 dev_at, used, loads, cand, ncand, ci, max_nodes):
    """Run (or resume) the search; returns ``(status, nodes expanded in this call)``.

    ``state[0]`` is the current position, ``state[1]`` is 0 before the first call. On
    ``STATUS_FOUND`` ``dev_at`` holds the device of every position.
    """
    n = n_dev
    scratch = np.zeros(n)
    score = np.zeros(n)
    nodes = 0
    need_gen = False
    if state[1] == 0:
        state[1] = 1
        for i in range(n):
            dev_at[i] = -1
            used[i] = False
            loads[0, i] = base[i]
        state[0] = 0
        need_gen = True
    k = state[0]
    while k >= 0:
        if need_gen:
            # candidates of position k: free devices passing symmetry and the checking scheme
            need_gen = False
            nodes += 1
            cnt = 0
            for d in range(n_dev):
                if used[d]:
                    continue
                ok = True
                for g in range(gt_ptr[k], gt_ptr[k + 1]):
                    if d <= dev_at[gt_other[g]]:
                        ok = False
                        break
                if not ok:
                    continue
                added = 0.0
                # forward check: the cheapest any later term of position k can be from d
                own_out = fut[k, 0] * dmin[d, 0] + fut[k, 1] * dmin[d, 1]
                own_in = fut[k, 2] * dmin[d, 2] + fut[k, 3] * dmin[d, 3]
                for e in range(chk_ptr[k], chk_ptr[k + 1]):
                    dj = dev_at[chk_other[e]]
                    if chk_dir[e] == 1:
                        tt = chk_w[e] * inv[d, dj] + chk_nl[e] * lat[d, dj]
                    else:
                        tt = chk_w[e] * inv[dj, d] + chk_nl[e] * lat[dj, d]
                    if mode == 0:
                        # the earlier end had reserved the cheapest cost of its remaining
                        # terms; this one is now real
                        row = ev_row[e]
                        scratch[chk_other[e]] += tt - (res_tab[res_row[row], dj]
                                                       - res_tab[res_row[row + 1], dj])
                        added += tt
                    else:
                        if chk_base[e] + tt > t:
                            ok = False
                        if tt > added:
                            added = tt
                if mode == 0:
                    if loads[k, k] + added + res_tab[res_row[res_ptr[k]], d] > t:
                        ok = False
                    for e in range(chk_ptr[k], chk_ptr[k + 1]):
                        j = chk_other[e]
                        if loads[k, j] + scratch[j] > t:
                            ok = False
                        scratch[j] = 0.0
                elif base[k] + own_out > t or base[k] + own_in > t:
                    ok = False
                if ok:
                    cand[k, cnt] = d
                    score[cnt] = added
                    cnt += 1
            if cnt > 1:
                order = np.argsort(score[:cnt], kind="mergesort")
                tmp = cand[k, :cnt].copy()
                for i in range(cnt):
                    cand[k, i] = tmp[order[i]]
            ncand[k] = cnt
            ci[k] = 0
            if nodes >= max_nodes:
                state[0] = k
                return STATUS_BUDGET, nodes
        if dev_at[k] >= 0:
            used[dev_at[k]] = False
            dev_at[k] = -1
        if ci[k] >= ncand[k]:
            k -= 1
            continue
        d = cand[k, ci[k]]
        ci[k] += 1
        dev_at[k] = d
        used[d] = True
        if k == n - 1:
            state[0] = k
            return STATUS_FOUND, nodes
        for i in range(n):
            loads[k + 1, i] = loads[k, i]
        if mode == 0:
            loads[k + 1, k] += res_tab[res_row[res_ptr[k]], d]
            for e in range(chk_ptr[k], chk_ptr[k + 1]):
                j = chk_other[e]
                dj = dev_at[j]
                if chk_dir[e] == 1:
                    tt = chk_w[e] * inv[d, dj] + chk_nl[e] * lat[d, dj]
                else:
                    tt = chk_w[e] * inv[dj, d] + chk_nl[e] * lat[dj, d]
                row = ev_row[e]
                loads[k + 1, k] += tt
                loads[k + 1, j] += tt - (res_tab[res_row[row], dj] - res_tab[res_row[row + 1], dj])
        k += 1
        need_gen = True
    state[0] = -1
    return STATUS_INFEASIBLE, nodes
