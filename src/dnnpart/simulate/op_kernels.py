"""Numba kernel of the op-level emulator (paper 2, section 3.2.1); wrappers in :mod:`.ops`.

Each kernel's uncompiled source (``kernel.py_func``) serves compilation checks only; the
naive emulator in ``tests/simulate/test_ops.py``, written apart, is its twin.

Heaps are binary heaps over parallel arrays (numba has no tuple-keyed priority queue that is
fast at 10^6 entries): the global event heap is keyed ``(time, 2 * op + kind)`` and each
device's ready queue ``(ready time, op)``.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from dnnpart.interrupt import shield_numba_compiles

shield_numba_compiles()  # numba compilations are not cut by the stop backstop

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FINISH, READY = 0, 1


@numba.njit(cache=True, inline="always")
def _less(ta: float, ka: int, tb: float, kb: int) -> bool:
    return ta < tb or (ta == tb and ka < kb)


@numba.njit(cache=True)
def _push(times: FloatArray, keys: IntArray, base: int, size: int, t: float, k: int) -> None:
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if _less(t, k, times[base + parent], keys[base + parent]):
            times[base + i] = times[base + parent]
            keys[base + i] = keys[base + parent]
            i = parent
        else:
            break
    times[base + i] = t
    keys[base + i] = k


@numba.njit(cache=True)
def _pop(times: FloatArray, keys: IntArray, base: int, size: int) -> None:
    """Remove the top of a heap of ``size`` entries (read it before calling)."""
    last = size - 1
    t, k = times[base + last], keys[base + last]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= last:
            break
        if c + 1 < last and _less(times[base + c + 1], keys[base + c + 1], times[base + c], keys[base + c]):
            c += 1
        if _less(times[base + c], keys[base + c], t, k):
            times[base + i] = times[base + c]
            keys[base + i] = keys[base + c]
            i = c
        else:
            break
    if last > 0:
        times[base + i] = t
        keys[base + i] = k


@numba.njit(cache=True)
def emulate_kernel(
    succ_ptr: IntArray, succ_idx: IntArray, indeg_in: IntArray, dev: IntArray,
    dur: FloatArray, edge_bytes: FloatArray, n_dev: int, bw: FloatArray, lat: FloatArray,
    unit_s: float, contention: bool, path_ptr: IntArray, path_res: IntArray, n_res: int,
) -> tuple[FloatArray, FloatArray, FloatArray, IntArray, IntArray, FloatArray, FloatArray, int]:
    """Emulate a framework scheduler; returns start, finish, ready and the transfers.

    Semantics (``docs/simulate.md``): an op is *ready* when all its inputs are on its device;
    each device runs one op at a time, picking the ready op with the least (ready time, id)
    whenever it is idle. When op ``u`` finishes, its tensor goes once to every other device
    holding a consumer (destinations in the order of their first consumer), taking
    ``latency + bytes / bandwidth`` of the routed pair (``bytes`` = the largest edge bytes to
    that device) converted to graph time units by ``unit_s``. With ``contention`` every
    resource on the pair's path (``path_res[path_ptr[p]:path_ptr[p+1]]`` for the pair
    ``p = src * n_dev + dst``: directed physical links, or the pair itself) carries one
    transfer at a time: a transfer starts when all of them are free and holds them all until
    it arrives, first come first served (ties: producer id).

    Returns ``start, finish, ready, xfer_src, xfer_dst, xfer_start, xfer_end, n_xfer``; a
    negative ``n_xfer`` signals a cycle (never for a DAG built with ``build_graph``).
    """
    n = dur.shape[0]
    indeg = indeg_in.copy()
    start = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    ready = np.zeros(n)
    m = succ_idx.shape[0]
    xs = np.empty(m, np.int64)
    xd = np.empty(m, np.int64)
    xb = np.empty(m, np.float64)
    xe = np.empty(m, np.float64)
    nx = 0
    # event heap: at most one READY and one FINISH per op
    et = np.empty(2 * n + 1, np.float64)
    ek = np.empty(2 * n + 1, np.int64)
    esize = 0
    # per-device ready queues in one flat array
    count = np.zeros(n_dev + 1, np.int64)
    for v in range(n):
        count[dev[v] + 1] += 1
    qbase = np.cumsum(count)
    qt = np.empty(n + 1, np.float64)
    qk = np.empty(n + 1, np.int64)
    qsize = np.zeros(n_dev, np.int64)
    busy = np.zeros(n_dev, np.bool_)
    res_free = np.zeros(max(n_res, 1))
    dest_bytes = np.full(n_dev, -1.0)
    dest_arrive = np.zeros(n_dev)
    dests = np.empty(n_dev, np.int64)
    for v in range(n):
        if indeg[v] == 0:
            _push(et, ek, 0, esize, 0.0, 2 * v + READY)
            esize += 1
    done = 0
    while esize > 0:
        t = et[0]
        while esize > 0 and et[0] == t:
            key = ek[0]
            _pop(et, ek, 0, esize)
            esize -= 1
            v = key // 2
            if key % 2 == READY:
                d = dev[v]
                _push(qt, qk, qbase[d], qsize[d], ready[v], v)
                qsize[d] += 1
                continue
            # FINISH of v: free its device, ship its tensor, release its consumers
            done += 1
            du = dev[v]
            busy[du] = False
            nd = 0
            for e in range(succ_ptr[v], succ_ptr[v + 1]):
                dv = dev[succ_idx[e]]
                if dv != du:
                    if dest_bytes[dv] < 0:
                        dests[nd] = dv
                        nd += 1
                        dest_bytes[dv] = 0.0
                    if edge_bytes[e] > dest_bytes[dv]:
                        dest_bytes[dv] = edge_bytes[e]
            for i in range(nd):
                dv = dests[i]
                go = t
                p = du * n_dev + dv
                if contention:
                    for q in range(path_ptr[p], path_ptr[p + 1]):
                        if res_free[path_res[q]] > go:
                            go = res_free[path_res[q]]
                arrive = go + (lat[du, dv] + dest_bytes[dv] / bw[du, dv]) / unit_s
                if contention:
                    for q in range(path_ptr[p], path_ptr[p + 1]):
                        res_free[path_res[q]] = arrive
                dest_arrive[dv] = arrive
                xs[nx] = v
                xd[nx] = dv
                xb[nx] = go
                xe[nx] = arrive
                nx += 1
            for e in range(succ_ptr[v], succ_ptr[v + 1]):
                w = succ_idx[e]
                dv = dev[w]
                at = t if dv == du else dest_arrive[dv]
                if at > ready[w]:
                    ready[w] = at
                indeg[w] -= 1
                if indeg[w] == 0:
                    _push(et, ek, 0, esize, ready[w], 2 * w + READY)
                    esize += 1
            for i in range(nd):
                dest_bytes[dests[i]] = -1.0
        for d in range(n_dev):
            if busy[d] or qsize[d] == 0:
                continue
            v = qk[qbase[d]]
            _pop(qt, qk, qbase[d], qsize[d])
            qsize[d] -= 1
            start[v] = t
            finish[v] = t + dur[v]
            busy[d] = True
            _push(et, ek, 0, esize, finish[v], 2 * v + FINISH)
            esize += 1
    if done < n:
        nx = -1
    return start, finish, ready, xs[:max(nx, 0)], xd[:max(nx, 0)], xb[:max(nx, 0)], xe[:max(nx, 0)], nx
