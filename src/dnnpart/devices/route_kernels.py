"""Numba kernels of the routing rules (:mod:`dnnpart.devices.routing`), one source at a time.

The kernels are plain Python until :func:`compiled` turns them into numba functions (the
caller does so unless the topology is small, so that small ones need no numba import).

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
* :func:`saf_dense_rows` -- the same labels on a dense graph: a Dijkstra that scans arrays
  instead of keeping a heap.
* :func:`uniform_rows` -- every link the same: a breadth-first search per source.

The heap kernels are ``O(m log d)`` per source (``m`` links), against the ``O(d^2)`` per
source and per bandwidth level of a dense scan; the scanning one is ``O(d^2)`` per source,
and reads the weights in order (the heap's reads jump about memory, which dominates on a
complete graph).
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Hop count of a device not reached yet.
NO_HOPS = 1 << 60


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


def _less(k1: FloatArray, k2: FloatArray, k3: IntArray, x: int, y: int) -> bool:
    if k1[x] != k1[y]:
        return bool(k1[x] < k1[y])
    if k2[x] != k2[y]:
        return bool(k2[x] < k2[y])
    return bool(k3[x] < k3[y])


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


def _push(heap: IntArray, pos: IntArray, size: int, v: int, k1: FloatArray, k2: FloatArray,
          k3: IntArray) -> int:
    """Insert ``v`` or move it up after its key decreased; returns the new size."""
    if pos[v] < 0:
        heap[size] = v
        pos[v] = size
        size += 1
    _sift_up(heap, pos, pos[v], k1, k2, k3)
    return size


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


def _take(heap: IntArray, pos: IntArray, size: int, head: int, k1: FloatArray, k2: FloatArray,
          k3: IntArray, fifo: bool) -> tuple[int, int, int]:
    """``(device, size, head)``: the next device to scan off the queue."""
    if not fifo:
        u = heap[0]
        return u, _pop(heap, pos, size, k1, k2, k3), head
    u = heap[head]
    pos[u] = -1
    return u, size - 1, (head + 1) % heap.shape[0]


def _relax(u: int, w: int, e: int, elat: FloatArray, dist: FloatArray, hops: IntArray,
           parent: IntArray, fresh: IntArray, nfresh: int, heap: IntArray, pos: IntArray,
           size: int, head: int, zero: FloatArray, fifo: bool) -> tuple[int, int]:
    """Widest path's relaxation of link ``e`` from ``u`` to ``w`` on (latency, hops): the new
    heap size and count of devices first reached at this level."""
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
    return size, nfresh


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
                size, nfresh = _relax(u, w, e, elat, dist, hops, parent, fresh, nfresh, heap,
                                      pos, size, head, zero, fifo)
        while size > 0:
            u, size, head = _take(heap, pos, size, head, dist, zero, hops, fifo)
            for j in range(ptr[u], ptr[u] + act[u]):
                size, nfresh = _relax(u, nbr[j], eid[j], elat, dist, hops, parent, fresh,
                                      nfresh, heap, pos, size, head, zero, fifo)
        level = ebw[order[lstart[k]]]
        for i in range(nfresh):
            w = fresh[i]
            row_bw[w] = level
            row_lat[w] = dist[w]
            row_hop[w] = hops[w]
        reached += nfresh


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


def dense_weights(d: int, a: IntArray, b: IntArray, einv: FloatArray, elat: FloatArray,
                  with_lat: bool) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_], bool]:
    """``(inv, lat, has, simple)``: ``(d, d)`` per-pair link weights of a graph for
    :func:`saf_dense_rows` (``lat`` empty unless ``with_lat``); ``simple`` is False when two
    links join the same pair (the matrices cannot stand for them: the caller keeps the heap
    kernel)."""
    inv = np.zeros((d, d))
    lat = np.zeros((d, d) if with_lat else (0, 0))
    has = np.zeros((d, d), np.bool_)
    for e in range(a.shape[0]):
        u = a[e]
        w = b[e]
        if has[u, w]:
            return inv, lat, has, False
        has[u, w] = True
        has[w, u] = True
        inv[u, w] = inv[w, u] = einv[e]
        if with_lat:
            lat[u, w] = lat[w, u] = elat[e]
    return inv, lat, has, True


def saf_dense_rows(s0: int, s1: int, inv: FloatArray, lat: FloatArray,
                   has: npt.NDArray[np.bool_], lat_of_hops: FloatArray, band: FloatArray,
                   late: FloatArray, hop: IntArray) -> None:
    """Rows ``s0..s1-1`` of the store-and-forward matrices of a dense graph: per source, a
    Dijkstra without a heap, ``O(d^2)``: one pass over the devices in index order (reads that
    stream through the weight rows) relaxes the links of the device just settled and finds
    the next one to settle.

    ``has[u, w]``: a link joins ``u`` and ``w`` (an empty ``has``: every pair, a complete
    graph). A non-empty ``lat_of_hops``: every link has the same latency, and a path of ``h``
    hops has latency ``lat_of_hops[h]`` (``lat`` is not read).

    The same labels as :func:`saf_rows`: every link adds a hop, so a label grows strictly
    along a link and the labels are the one solution of the Bellman equations (the sums
    formed from the source outwards), whichever of two equal labels is settled first. With
    one latency the latency grows with the hops, so ``(time, hops)`` orders like
    ``(time, latency, hops)``.
    """
    d = inv.shape[0]
    complete = has.shape[0] == 0
    by_hops = lat_of_hops.shape[0] > 0
    t = np.empty(d)
    hops = np.empty(d, np.int64)
    done = np.empty(d, np.bool_)
    base = 0 if hop.shape[0] == band.shape[0] else s0
    for s in range(s0, s1):
        row_l = late[s]
        for v in range(d):
            t[v] = math.inf
            row_l[v] = math.inf
            hops[v] = NO_HOPS
            done[v] = False
        t[s] = 0.0
        row_l[s] = 0.0
        hops[s] = 0
        u = s
        while u >= 0:
            x = u  # settled now: relax its links, and find the next to settle
            done[x] = True
            tu = t[x]
            lu = row_l[x]
            nh = hops[x] + 1
            inv_u = inv[x]
            u = -1
            if by_hops:
                for w in range(d):
                    if done[w]:
                        continue
                    if complete or has[x, w]:
                        nt = tu + inv_u[w]
                        if nt < t[w] or (nt == t[w] and nh < hops[w]):
                            t[w] = nt
                            hops[w] = nh
                    if hops[w] != NO_HOPS and (u < 0 or t[w] < t[u] or
                                               (t[w] == t[u] and hops[w] < hops[u])):
                        u = w
            else:
                lat_u = lat[x]
                for w in range(d):
                    if done[w]:
                        continue
                    if complete or has[x, w]:
                        nt = tu + inv_u[w]
                        nl = lu + lat_u[w]
                        if nt < t[w] or (nt == t[w] and (nl < row_l[w] or
                                                         (nl == row_l[w] and nh < hops[w]))):
                            t[w] = nt
                            row_l[w] = nl
                            hops[w] = nh
                    if hops[w] != NO_HOPS and (u < 0 or t[w] < t[u] or (
                            t[w] == t[u] and (row_l[w] < row_l[u] or
                                              (row_l[w] == row_l[u] and hops[w] < hops[u])))):
                        u = w
        row_h = hop[s - base]
        for v in range(d):
            row_h[v] = hops[v] if hops[v] != NO_HOPS else -1
            if by_hops and hops[v] != NO_HOPS:
                row_l[v] = lat_of_hops[hops[v]]
            if t[v] == math.inf:
                band[s, v] = 0.0
            elif t[v] == 0.0:
                band[s, v] = math.inf
            else:
                band[s, v] = 1.0 / t[v]



def _find(uf: IntArray, x: int) -> int:
    """Root of ``x`` in the union-find forest ``uf`` (path halving)."""
    while uf[x] != x:
        uf[x] = uf[uf[x]]
        x = uf[x]
    return x


def widest_merges(k: int, budget: int, ptr: IntArray, nbr: IntArray, eid: IntArray,
                  ea: IntArray, eb: IntArray, ebw: FloatArray, order: IntArray,
                  lstart: IntArray, lat_of_hops: FloatArray, state: IntArray,
                  band: FloatArray, late: FloatArray, hop: IntArray) -> int:
    """Widest-path matrices of a graph whose links share one latency, from level ``k`` on,
    until about ``budget`` link visits are done; returns the next level (all levels done:
    ``lstart.shape[0] - 1``). Symmetric, all pairs at once.

    With one latency a path's label is its bottleneck, then its hops (its latency grows
    with them: ``lat_of_hops``). Links are switched on level by level in decreasing
    bandwidth (the order of ``order``; ``ptr``/``nbr``/``eid`` list each device's links in
    that order, so its switched-on links are a prefix). Two devices first joined at level
    ``B`` (their components merge) have bottleneck ``B`` and, as hops, their breadth-first
    distance over the links switched on: one search from each device of every merging part
    but the largest finds them (a device is outside the largest part at most ``log2 d``
    times). ``state`` holds the union of components between calls: rows ``act``, ``comp``
    (each device's part), ``nxt`` (the next member of its part), ``head``, ``size``, ``uf``,
    ``big``, ``mark``, ``dist``, ``queue``, ``touched``, and ``[11, 0]`` the number of parts.
    ``band``, ``late`` and ``hop`` start as 0, ``inf`` and -1; ``hop`` is written when it has
    a row per device.
    """
    d = ptr.shape[0] - 1
    act, comp, nxt, head, size, uf, big, mark, dist, queue, touched = (
        state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7],
        state[8], state[9], state[10])
    full_hop = hop.shape[0] == d
    n_levels = lstart.shape[0] - 1
    work = 0
    while k < n_levels and state[11, 0] > 1 and work < budget:
        level = ebw[order[lstart[k]]]
        n_touched = 0
        for r in range(lstart[k], lstart[k + 1]):  # switch the level on, union its parts
            e = order[r]
            act[ea[e]] += 1
            act[eb[e]] += 1
            ca = comp[ea[e]]
            cb = comp[eb[e]]
            if ca == cb:
                continue
            for c in (ca, cb):
                if mark[c] == 0:
                    mark[c] = 1
                    touched[n_touched] = c
                    n_touched += 1
            ra = _find(uf, ca)
            rb = _find(uf, cb)
            if ra != rb:
                uf[ra] = rb
        work += lstart[k + 1] - lstart[k]
        for i in range(n_touched):  # the largest part of each merged component
            c = touched[i]
            g = _find(uf, c)
            if big[g] < 0 or size[c] > size[big[g]]:
                big[g] = c
        for i in range(n_touched):  # searches from the other parts' devices
            c = touched[i]
            if big[_find(uf, c)] == c:
                continue
            x = head[c]
            while x >= 0:
                dist[x] = 0
                queue[0] = x
                q_head = 0
                q_tail = 1
                while q_head < q_tail:
                    u = queue[q_head]
                    q_head += 1
                    for j in range(ptr[u], ptr[u] + act[u]):
                        w = nbr[j]
                        if dist[w] < 0:
                            dist[w] = dist[u] + 1
                            queue[q_tail] = w
                            q_tail += 1
                    work += act[u]
                for q in range(1, q_tail):
                    y = queue[q]
                    if comp[y] != c:  # another part: first joined now
                        h = dist[y]
                        band[x, y] = level
                        band[y, x] = level
                        late[x, y] = lat_of_hops[h]
                        late[y, x] = lat_of_hops[h]
                        if full_hop:
                            hop[x, y] = h
                            hop[y, x] = h
                for q in range(q_tail):
                    dist[queue[q]] = -1
                x = nxt[x]
        for i in range(n_touched):  # the other parts join the largest
            c = touched[i]
            g = _find(uf, c)
            into = big[g]
            if into != c:
                x = head[c]
                last = x
                while x >= 0:
                    comp[x] = into
                    last = x
                    x = nxt[x]
                nxt[last] = head[into]
                head[into] = head[c]
                size[into] += size[c]
                state[11, 0] -= 1
        for i in range(n_touched):
            c = touched[i]
            big[c] = -1
            mark[c] = 0
            uf[c] = c
        k += 1
    return n_levels if state[11, 0] <= 1 else k

#: The kernels, in the order :func:`compiled` wraps them; the helpers are inlined.
KERNELS = ("adjacency", "_less", "_sift_up", "_push", "_pop", "_put", "_take", "_relax",
           "widest_source", "widest_rows", "saf_source", "saf_rows", "uniform_rows", "dense_weights",
           "saf_dense_rows", "_find", "widest_merges")
_INLINE = frozenset({"_less", "_sift_up", "_push", "_pop", "_put", "_take", "_relax", "_find"})
_compiling = threading.Lock()
_state = {"compiled": False}


def compiled() -> None:
    """Make every kernel of this module a numba function (compiled, or loaded from numba's
    cache), once per process.

    Until then they are the plain Python functions: a small topology is routed without
    importing numba (about a second of start-up). Each kernel's module-level name is
    replaced, so the kernels calling one another (resolved by name when numba compiles
    them) call the compiled ones; the labels are the same either way (the same float64
    operations in the same order).

    Examples
    --------
    >>> from dnnpart.devices import route_kernels as rk
    >>> rk.compiled(); type(rk.adjacency).__name__
    'CPUDispatcher'
    """
    with _compiling:
        if _state["compiled"]:
            return
        import numba

        from dnnpart.interrupt import shield_numba_compiles

        shield_numba_compiles()  # numba compilations are not cut by the stop backstop
        module = sys.modules[__name__]
        for name in KERNELS:
            # nogil: routing runs chunks of sources on threads (routing._chunked)
            jit = numba.njit(cache=True, nogil=True, inline="always" if name in _INLINE else "never")
            setattr(module, name, jit(getattr(module, name)))
        _state["compiled"] = True
