# mypy: allow-untyped-defs
"""Numba kernel of the Eq. 2 memory tracker (paper 2); wrapper in :mod:`.memory`.

``kernel.py_func`` (the uncompiled source) serves compilation checks; the Eq. 2 twin written
apart is in ``tests/simulate/test_ops.py``. Times enter as integer
ranks (every event time is some node's start or finish, ranked once by the caller), so the
events are ordered by two stable counting sorts -- by ``(rank, add before remove)``, then by
device -- in O(events + ranks + devices) instead of a comparison sort of ~10 |V| keys.
"""

from __future__ import annotations

import numpy as np

from dnnpart._jit import kernel


@kernel
def memory_sweep(succ_ptr, succ_idx, a, mem, normal, rank_start, rank_finish, n_ranks, n_dev):
    """Peaks and curves of the held tensors (Eq. 2's terms 2 and 3; term 1 is the caller's).

    A normal tensor ``u`` (``mem > 0``) is held on ``a[u]`` over ranks ``[rs(u), max(rf(u),
    last start of its consumers there)]``; a copy of any tensor with ``mem > 0`` on another
    device ``q`` holding consumers over ``[rf(u), last start of its consumers on q]``.
    Intervals are closed: at one rank, adds count before removes.

    Returns ``(peak, ptr, rank, at, after)``: ``peak[d]`` the largest held bytes on ``d`` (at
    least 0); device ``d``'s curve points are ``ptr[d]:ptr[d + 1]``: at each distinct event
    rank, the bytes after its adds (``at``) and after its removes (``after``).
    """
    n = a.shape[0]
    cap = n + succ_idx.shape[0]
    idev = np.empty(cap, np.int64)
    ibeg = np.empty(cap, np.int64)
    iend = np.empty(cap, np.int64)
    isize = np.empty(cap, np.float64)
    last = np.full(n_dev, -1, np.int64)  # last consumer start rank per device, for one u
    touched = np.empty(n_dev, np.int64)
    m = 0
    for u in range(n):
        nt = 0
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            q = a[v]
            if last[q] < 0:
                touched[nt] = q
                nt += 1
                last[q] = rank_start[v]
            elif rank_start[v] > last[q]:
                last[q] = rank_start[v]
        if mem[u] > 0:
            if normal[u]:
                end = rank_finish[u]
                if last[a[u]] > end:
                    end = last[a[u]]
                idev[m] = a[u]
                ibeg[m] = rank_start[u]
                iend[m] = end
                isize[m] = mem[u]
                m += 1
            for i in range(nt):
                q = touched[i]
                if q != a[u]:
                    idev[m] = q
                    ibeg[m] = rank_finish[u]
                    iend[m] = last[q]
                    isize[m] = mem[u]
                    m += 1
        for i in range(nt):
            last[touched[i]] = -1
    # events 0..m-1 add interval i at ibeg, m..2m-1 remove it at iend; key2 = 2 rank + remove
    n_ev = 2 * m
    n_keys = 2 * n_ranks
    count = np.zeros(n_keys + 1, np.int64)
    for i in range(m):
        count[2 * ibeg[i] + 1] += 1
        count[2 * iend[i] + 2] += 1
    for k in range(n_keys):
        count[k + 1] += count[k]
    by_time = np.empty(n_ev, np.int64)
    for j in range(n_ev):
        key = 2 * ibeg[j] if j < m else 2 * iend[j - m] + 1
        by_time[count[key]] = j
        count[key] += 1
    dcount = np.zeros(n_dev + 1, np.int64)
    for i in range(m):
        dcount[idev[i] + 1] += 2
    for d in range(n_dev):
        dcount[d + 1] += dcount[d]
    ptr_ev = dcount.copy()
    order = np.empty(n_ev, np.int64)
    for x in range(n_ev):  # stable: time order kept inside each device
        j = by_time[x]
        d = idev[j if j < m else j - m]
        order[dcount[d]] = j
        dcount[d] += 1
    # sweep each device's events; one curve point per distinct rank
    peak = np.zeros(n_dev)
    ptr = np.zeros(n_dev + 1, np.int64)
    crank = np.empty(n_ev, np.int64)
    cat = np.empty(n_ev, np.float64)
    cafter = np.empty(n_ev, np.float64)
    c = 0
    for d in range(n_dev):
        run = 0.0
        best = 0.0
        j = ptr_ev[d]
        hi = ptr_ev[d + 1]
        while j < hi:
            ev = order[j]
            r = ibeg[ev] if ev < m else iend[ev - m]
            while j < hi and order[j] < m and ibeg[order[j]] == r:
                run += isize[order[j]]
                j += 1
            at = run
            while j < hi and order[j] >= m and iend[order[j] - m] == r:
                run -= isize[order[j] - m]
                j += 1
            if at > best:
                best = at
            crank[c] = r
            cat[c] = at
            cafter[c] = run
            c += 1
        peak[d] = best
        ptr[d + 1] = c
    return peak, ptr, crank[:c], cat[:c], cafter[:c]
