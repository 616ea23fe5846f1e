"""Numba kernels of the routing rules (:mod:`dnnpart.devices.routing`), one source at a time.

The caller routes sources in chunks and checks the stop flag between them, so a large
topology can be stopped by Ctrl-C or a time limit (:mod:`dnnpart.interrupt`).

* :func:`adjacency` -- CSR adjacency whose per-device entries follow a given link order.
* :func:`widest_rows` -- widest path, ties to the least summed latency, then the fewest hops.
  Per source, the links are switched on level by level in decreasing bandwidth; an indexed
  binary heap keeps the (latency, hops) labels of the subgraph switched on so far, and a
  device first reached at level ``B`` has bottleneck ``B`` and that subgraph's label (every
  path there has bottleneck ``>= B``, none can exceed it). The source stops once every device
  is reached: on a complete graph with distinct bandwidths, long before its slowest links.
* :func:`saf_rows` -- store-and-forward: one Dijkstra on ``(sum 1/B, latency, hops)``.

Both are ``O(m log d)`` per source (``m`` links), against the ``O(d^2)`` per source and per
bandwidth level of a dense scan.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

from dnnpart.interrupt import shield_numba_compiles

shield_numba_compiles()  # numba compilations are not cut by the stop backstop

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Hop count of a device not reached yet.
NO_HOPS = 1 << 60


@numba.njit(cache=True)
def adjacency(d: int, a: IntArray, b: IntArray, order: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """``(ptr, nbr, eid)``: device ``v``'s neighbours ``nbr[ptr[v]:ptr[v+1]]`` over links
    ``eid[...]``, listed in the order ``order`` gives the links."""
    m = a.shape[0]
    deg = np.zeros(d + 1, np.int64)
    for e in range(m):
        deg[a[e] + 1] += 1
        deg[b[e] + 1] += 1
    ptr = np.cumsum(deg)
    fill = ptr[:-1].copy()
    nbr = np.empty(2 * m, np.int64)
    eid = np.empty(2 * m, np.int64)
    for r in range(m):
        e = order[r]
        nbr[fill[a[e]]] = b[e]
        eid[fill[a[e]]] = e
        fill[a[e]] += 1
        nbr[fill[b[e]]] = a[e]
        eid[fill[b[e]]] = e
        fill[b[e]] += 1
    return ptr, nbr, eid


@numba.njit(cache=True, inline="always")
def _less(k1: FloatArray, k2: FloatArray, k3: IntArray, x: int, y: int) -> bool:
    if k1[x] != k1[y]:
        return bool(k1[x] < k1[y])
    if k2[x] != k2[y]:
        return bool(k2[x] < k2[y])
    return bool(k3[x] < k3[y])


@numba.njit(cache=True, inline="always")
def _sift_up(heap: IntArray, pos: IntArray, i: int, k1: FloatArray, k2: FloatArray,
             k3: IntArray) -> None:
    v = heap[i]
    while i > 0:
        p = (i - 1) >> 1
        if not _less(k1, k2, k3, v, heap[p]):
            break
        heap[i] = heap[p]
        pos[heap[i]] = i
        i = p
    heap[i] = v
    pos[v] = i


@numba.njit(cache=True, inline="always")
def _push(heap: IntArray, pos: IntArray, size: int, v: int, k1: FloatArray, k2: FloatArray,
          k3: IntArray) -> int:
    """Insert ``v`` or move it up after its key decreased; returns the new size."""
    if pos[v] < 0:
        heap[size] = v
        pos[v] = size
        size += 1
    _sift_up(heap, pos, pos[v], k1, k2, k3)
    return size


@numba.njit(cache=True, inline="always")
def _pop(heap: IntArray, pos: IntArray, size: int, k1: FloatArray, k2: FloatArray,
         k3: IntArray) -> int:
    """Remove the top (the caller read ``heap[0]``); returns the new size."""
    pos[heap[0]] = -1
    size -= 1
    if size == 0:
        return 0
    v = heap[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _less(k1, k2, k3, heap[c + 1], heap[c]):
            c += 1
        if not _less(k1, k2, k3, heap[c], v):
            break
        heap[i] = heap[c]
        pos[heap[i]] = i
        i = c
    heap[i] = v
    pos[v] = i
    return size


@numba.njit(cache=True, inline="always")
def _put(heap: IntArray, pos: IntArray, size: int, head: int, v: int, k1: FloatArray,
         k2: FloatArray, k3: IntArray, fifo: bool) -> int:
    """Queue ``v`` after its label decreased: a FIFO ring (equal links: labels follow the
    hop count, so first in is least) or the indexed heap; returns the new size."""
    if not fifo:
        return _push(heap, pos, size, v, k1, k2, k3)
    if pos[v] < 0:
        heap[(head + size) % heap.shape[0]] = v
        pos[v] = 1
        size += 1
    return size


@numba.njit(cache=True, inline="always")
def _take(heap: IntArray, pos: IntArray, size: int, head: int, k1: FloatArray, k2: FloatArray,
          k3: IntArray, fifo: bool) -> tuple[int, int, int]:
    """``(device, size, head)``: the next device to scan off the queue."""
    if not fifo:
        u = heap[0]
        return u, _pop(heap, pos, size, k1, k2, k3), head
    u = heap[head]
    pos[u] = -1
    return u, size - 1, (head + 1) % heap.shape[0]


@numba.njit(cache=True)
def widest_source(s: int, ptr: IntArray, nbr: IntArray, eid: IntArray, ea: IntArray,
                  eb: IntArray, ebw: FloatArray, elat: FloatArray, order: IntArray,
                  lstart: IntArray, stop_at: int, row_bw: FloatArray, row_lat: FloatArray,
                  row_hop: IntArray, parent: IntArray, fifo: bool) -> None:
    """Widest-path row of source ``s`` into ``row_*``; ``parent[v]``: the link into ``v``.

    ``order`` lists the links by decreasing bandwidth, ``lstart[k]:lstart[k+1]`` the links of
    the ``k``-th level. ``stop_at >= 0``: stop once that device is reached (a single path).
    Unreached devices keep bandwidth 0, latency ``inf`` and hops -1.
    """
    d = ptr.shape[0] - 1
    dist = np.full(d, math.inf)
    zero = np.zeros(d)
    hops = np.full(d, NO_HOPS, np.int64)
    act = np.zeros(d, np.int64)
    pos = np.full(d, -1, np.int64)
    heap = np.empty(d, np.int64)
    fresh = np.empty(d, np.int64)
    for v in range(d):
        row_bw[v] = 0.0
        row_lat[v] = math.inf
        row_hop[v] = -1
        parent[v] = -1
    dist[s] = 0.0
    hops[s] = 0
    row_bw[s] = math.inf
    row_lat[s] = 0.0
    row_hop[s] = 0
    reached = 1
    for k in range(lstart.shape[0] - 1):
        if reached == d or (stop_at >= 0 and row_hop[stop_at] >= 0):
            break
        size = 0
        head = 0
        nfresh = 0
        for r in range(lstart[k], lstart[k + 1]):
            e = order[r]
            act[ea[e]] += 1
            act[eb[e]] += 1
            for u, w in ((ea[e], eb[e]), (eb[e], ea[e])):
                if dist[u] == math.inf:
                    continue
                nd = dist[u] + elat[e]
                nh = hops[u] + 1
                if nd < dist[w] or (nd == dist[w] and nh < hops[w]):
                    if dist[w] == math.inf:
                        fresh[nfresh] = w
                        nfresh += 1
                    dist[w] = nd
                    hops[w] = nh
                    parent[w] = e
                    size = _put(heap, pos, size, head, w, dist, zero, hops, fifo)
        while size > 0:
            u, size, head = _take(heap, pos, size, head, dist, zero, hops, fifo)
            for j in range(ptr[u], ptr[u] + act[u]):
                w = nbr[j]
                e = eid[j]
                nd = dist[u] + elat[e]
                nh = hops[u] + 1
                if nd < dist[w] or (nd == dist[w] and nh < hops[w]):
                    if dist[w] == math.inf:
                        fresh[nfresh] = w
                        nfresh += 1
                    dist[w] = nd
                    hops[w] = nh
                    parent[w] = e
                    size = _put(heap, pos, size, head, w, dist, zero, hops, fifo)
        level = ebw[order[lstart[k]]]
        for i in range(nfresh):
            w = fresh[i]
            row_bw[w] = level
            row_lat[w] = dist[w]
            row_hop[w] = hops[w]
        reached += nfresh


@numba.njit(cache=True)
def widest_rows(s0: int, s1: int, ptr: IntArray, nbr: IntArray, eid: IntArray, ea: IntArray,
                eb: IntArray, ebw: FloatArray, elat: FloatArray, order: IntArray,
                lstart: IntArray, band: FloatArray, late: FloatArray, hop: IntArray,
                fifo: bool) -> None:
    """Rows ``s0..s1-1`` of the widest-path matrices (see :func:`widest_source`); ``hop``
    holds rows ``s0..`` from its first row on when it has fewer rows than ``band``."""
    parent = np.empty(ptr.shape[0] - 1, np.int64)
    base = 0 if hop.shape[0] == band.shape[0] else s0
    for s in range(s0, s1):
        widest_source(s, ptr, nbr, eid, ea, eb, ebw, elat, order, lstart, -1,
                      band[s], late[s], hop[s - base], parent, fifo)


@numba.njit(cache=True)
def saf_source(s: int, ptr: IntArray, nbr: IntArray, eid: IntArray, einv: FloatArray,
               elat: FloatArray, row_t: FloatArray, row_lat: FloatArray, row_hop: IntArray,
               parent: IntArray, fifo: bool) -> None:
    """Store-and-forward Dijkstra from ``s`` on ``(sum 1/B, latency, hops)``: the per-byte
    time, latency and hops of each device (``inf``, ``inf``, -1 unreached) and the link into
    it. ``fifo``: all links are equal, a breadth-first search gives the same labels."""
    d = ptr.shape[0] - 1
    hops = np.full(d, NO_HOPS, np.int64)
    pos = np.full(d, -1, np.int64)
    heap = np.empty(d, np.int64)
    for v in range(d):
        row_t[v] = math.inf
        row_lat[v] = math.inf
        parent[v] = -1
    row_t[s] = 0.0
    row_lat[s] = 0.0
    hops[s] = 0
    head = 0
    size = _put(heap, pos, 0, head, s, row_t, row_lat, hops, fifo)
    while size > 0:
        u, size, head = _take(heap, pos, size, head, row_t, row_lat, hops, fifo)
        for j in range(ptr[u], ptr[u + 1]):
            w = nbr[j]
            e = eid[j]
            nt = row_t[u] + einv[e]
            nl = row_lat[u] + elat[e]
            nh = hops[u] + 1
            if nt < row_t[w] or (nt == row_t[w] and (nl < row_lat[w] or
                                                      (nl == row_lat[w] and nh < hops[w]))):
                row_t[w] = nt
                row_lat[w] = nl
                hops[w] = nh
                parent[w] = e
                size = _put(heap, pos, size, head, w, row_t, row_lat, hops, fifo)
    for v in range(d):
        row_hop[v] = hops[v] if hops[v] != NO_HOPS else -1


@numba.njit(cache=True)
def saf_rows(s0: int, s1: int, ptr: IntArray, nbr: IntArray, eid: IntArray, einv: FloatArray,
             elat: FloatArray, band: FloatArray, late: FloatArray, hop: IntArray,
             fifo: bool) -> None:
    """Rows ``s0..s1-1`` of the store-and-forward matrices (``band`` = 1 / sum 1/B)."""
    d = ptr.shape[0] - 1
    parent = np.empty(d, np.int64)
    t = np.empty(d)
    base = 0 if hop.shape[0] == band.shape[0] else s0
    for s in range(s0, s1):
        saf_source(s, ptr, nbr, eid, einv, elat, t, late[s], hop[s - base], parent, fifo)
        for v in range(d):
            if t[v] == math.inf:
                band[s, v] = 0.0
            elif t[v] == 0.0:
                band[s, v] = math.inf
            else:
                band[s, v] = 1.0 / t[v]


@numba.njit(cache=True)
def uniform_rows(s0: int, s1: int, ptr: IntArray, nbr: IntArray, band_of_hops: FloatArray,
                 lat_of_hops: FloatArray, band: FloatArray, late: FloatArray,
                 hop: IntArray) -> None:
    """Rows ``s0..s1-1`` when every link is the same: a breadth-first search per source.

    Every path of ``h`` hops then has the same label, so the rules' labels are functions of
    the hop count (``band_of_hops[h]``, ``lat_of_hops[h]``, the sums a Dijkstra would form).
    """
    d = ptr.shape[0] - 1
    queue = np.empty(d, np.int64)
    base = 0 if hop.shape[0] == band.shape[0] else s0
    for s in range(s0, s1):
        h = hop[s - base]
        for v in range(d):
            h[v] = -1
        h[s] = 0
        queue[0] = s
        head = 0
        tail = 1
        while head < tail:
            u = queue[head]
            head += 1
            for j in range(ptr[u], ptr[u + 1]):
                w = nbr[j]
                if h[w] < 0:
                    h[w] = h[u] + 1
                    queue[tail] = w
                    tail += 1
        for v in range(d):
            if h[v] < 0:
                band[s, v] = 0.0
                late[s, v] = math.inf
            else:
                band[s, v] = band_of_hops[h[v]]
                late[s, v] = lat_of_hops[h[v]]
