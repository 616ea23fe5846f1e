"""Routing: from an undirected link list to ``(d, d)`` bandwidth and latency matrices.

A cluster has ONE routing rule (``Cluster.routing``) that every solver and simulator uses
(``docs/topologies.md``); two rules exist, ``widest`` (the default) and ``store-and-forward``:

**widest path** -- a transfer from ``i`` to ``j`` follows a simple path whose *bottleneck*
bandwidth (its slowest link) is the largest possible; among those, the path with the least
*summed latency*; among those, the one with the fewest hops. The matrices hold that path's
bottleneck bandwidth and summed latency (``inf`` / ``0`` on the diagonal).

**store-and-forward** -- a transfer follows the path with the least per-byte time
``sum_e 1/B_e`` (each hop receives the whole message before sending it on), ties to the least
summed latency, then the fewest hops; the matrices hold ``B = 1 / sum_e 1/B_e`` and the summed
latency. On a grid of equal links ``B = link / hops``: distant pairs are slower, which is how
paper 4's meshes and tori tell mappings apart (under widest path every pair of an equal-link
grid has the same bandwidth). All three keys are additive, so one Dijkstra per source is exact
(ties compare the floating-point sums as computed, from the source outwards).

**direct** -- no forwarding: a pair talks over its own link only (the widest of parallel
links, ties to the least latency); pairs without a link have no route, so only complete
topologies (``random_blk_1/2``, ``uniform_dist``, ``two-level``) are connected under it. Paper
4's random heterogeneous topologies are complete graphs whose per-pair bandwidths are drawn
to differ; ``direct`` keeps those differences (widest path would let most pairs detour over
the fastest links).

Why a two-step computation (widest path): the lexicographic label (bottleneck, latency) is not isotone, so one
Dijkstra pass over it can be wrong (a narrower prefix with less latency can win after a narrow
link). Instead, for a source ``s``: (1) a max-bottleneck Dijkstra gives every target's best
bottleneck ``B*``; (2) for each distinct ``B*``, a Dijkstra on (latency, hops) over the links of
bandwidth ``>= B*`` gives the least latency among the widest paths (every path in that subgraph
has bottleneck ``>= B*``, and none can exceed ``B*``). Both steps are dense ``O(d^2)`` per pass
in a numba kernel (:func:`route_kernel`, uncompiled source ``route_kernel.py_func``; the
tests' brute force over simple paths is its twin); a 512-device
3-D torus (one bandwidth level) routes in well under a second.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numba
import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.interrupt import shield_numba_compiles

shield_numba_compiles()  # numba compilations are not cut by the stop backstop

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@numba.njit(cache=True)
def _widest(s: int, ptr: IntArray, nbr: IntArray, bw: FloatArray, out: FloatArray) -> None:
    d = ptr.shape[0] - 1
    done = np.zeros(d, np.bool_)
    for v in range(d):
        out[v] = 0.0
    out[s] = math.inf
    for _ in range(d):
        u = -1
        best = 0.0
        for v in range(d):
            if not done[v] and out[v] > best:
                best = out[v]
                u = v
        if u < 0:
            break
        done[u] = True
        for e in range(ptr[u], ptr[u + 1]):
            w = nbr[e]
            cand = min(out[u], bw[e])
            if cand > out[w]:
                out[w] = cand


@numba.njit(cache=True)
def _shortest(s: int, ptr: IntArray, nbr: IntArray, bw: FloatArray, lat: FloatArray,
              threshold: float, dist: FloatArray, hops: IntArray) -> None:
    d = ptr.shape[0] - 1
    done = np.zeros(d, np.bool_)
    for v in range(d):
        dist[v] = math.inf
        hops[v] = 1 << 60
    dist[s] = 0.0
    hops[s] = 0
    for _ in range(d):
        u = -1
        for v in range(d):
            if done[v] or dist[v] == math.inf:
                continue
            if u < 0 or dist[v] < dist[u] or (dist[v] == dist[u] and hops[v] < hops[u]):
                u = v
        if u < 0:
            break
        done[u] = True
        for e in range(ptr[u], ptr[u + 1]):
            if bw[e] < threshold:
                continue
            w = nbr[e]
            nd = dist[u] + lat[e]
            nh = hops[u] + 1
            if nd < dist[w] or (nd == dist[w] and nh < hops[w]):
                dist[w] = nd
                hops[w] = nh


@numba.njit(cache=True)
def route_kernel(d: int, a: IntArray, b: IntArray, bw: FloatArray,
                 lat: FloatArray) -> tuple[FloatArray, FloatArray, IntArray]:
    """All-pairs widest path with the tie rule; returns (bandwidth, latency, hops).

    Unreachable pairs get bandwidth 0, latency ``inf`` and hops -1. Parallel links between
    the same two devices are alternatives (the rule picks among them like among paths).
    """
    m = a.shape[0]
    deg = np.zeros(d + 1, np.int64)
    for e in range(m):
        deg[a[e] + 1] += 1
        deg[b[e] + 1] += 1
    ptr = np.cumsum(deg)
    fill = ptr[:-1].copy()
    nbr = np.empty(2 * m, np.int64)
    ebw = np.empty(2 * m, np.float64)
    elat = np.empty(2 * m, np.float64)
    for e in range(m):
        for x, y in ((a[e], b[e]), (b[e], a[e])):
            k = fill[x]
            nbr[k] = y
            ebw[k] = bw[e]
            elat[k] = lat[e]
            fill[x] += 1
    band = np.zeros((d, d), np.float64)
    late = np.full((d, d), math.inf)
    hop = np.full((d, d), -1, np.int64)
    wide = np.empty(d, np.float64)
    dist = np.empty(d, np.float64)
    hcount = np.empty(d, np.int64)
    for s in range(d):
        _widest(s, ptr, nbr, ebw, wide)
        levels = np.unique(wide)
        for t in range(levels.shape[0]):
            level = levels[t]
            if level <= 0.0:
                continue
            _shortest(s, ptr, nbr, ebw, elat, level, dist, hcount)
            for v in range(d):
                if wide[v] == level:
                    band[s, v] = level
                    late[s, v] = dist[v]
                    hop[s, v] = hcount[v]
        band[s, s] = math.inf
        late[s, s] = 0.0
        hop[s, s] = 0
    return band, late, hop


#: The routing rules a cluster may name (``Cluster.routing``); the first is the default.
ROUTING_RULES = ("widest", "store-and-forward", "direct")


def check_rule(rule: str) -> str:
    """``rule`` if it is a known routing rule, else ``ValueError`` naming the choices."""
    if rule not in ROUTING_RULES:
        raise UsageError(f"routing must be one of {list(ROUTING_RULES)}, got {rule!r}")
    return rule


def _saf_tree(n: int, adj: list[list[tuple[int, int, float, float]]], s: int
              ) -> tuple[list[tuple[float, float, int]], list[tuple[int, int]]]:
    """Store-and-forward Dijkstra from ``s``: per device (sum 1/B, latency, hops), parent."""
    inf = (math.inf, math.inf, 0)
    best: list[tuple[float, float, int]] = [inf] * n
    parent: list[tuple[int, int]] = [(-1, -1)] * n
    best[s] = (0.0, 0.0, 0)
    heap: list[tuple[float, float, int, int]] = [(0.0, 0.0, 0, s)]
    done = [False] * n
    while heap:
        t, lat, hops, u = heapq.heappop(heap)
        if done[u]:
            continue
        done[u] = True
        for v, k, inv, lk in adj[u]:
            cand = (t + inv, lat + lk, hops + 1)
            if cand < best[v]:
                best[v] = cand
                parent[v] = (u, k)
                heapq.heappush(heap, (cand[0], cand[1], cand[2], v))
    return best, parent


def _saf_adjacency(n: int, aa: IntArray, bb: IntArray, bw: FloatArray, la: FloatArray
                   ) -> list[list[tuple[int, int, float, float]]]:
    adj: list[list[tuple[int, int, float, float]]] = [[] for _ in range(n)]
    for k, (u, v, w, lk) in enumerate(zip(aa.tolist(), bb.tolist(), bw.tolist(), la.tolist(),
                                          strict=True)):
        if w > 0 and u != v:
            inv = 0.0 if math.isinf(w) else 1.0 / w
            adj[u].append((v, k, inv, lk))
            adj[v].append((u, k, inv, lk))
    return adj


def _direct(n: int, aa: IntArray, bb: IntArray, bw: FloatArray, la: FloatArray
            ) -> tuple[FloatArray, FloatArray, IntArray]:
    band = np.zeros((n, n))
    late = np.zeros((n, n))
    hop = np.full((n, n), -1, np.int64)
    for u, v, w, lk in zip(aa.tolist(), bb.tolist(), bw.tolist(), la.tolist(), strict=True):
        if u == v or w <= 0:
            continue
        if w > band[u, v] or (w == band[u, v] and lk < late[u, v]):
            band[u, v] = band[v, u] = w
            late[u, v] = late[v, u] = lk
            hop[u, v] = hop[v, u] = 1
    np.fill_diagonal(band, math.inf)
    np.fill_diagonal(late, 0.0)
    np.fill_diagonal(hop, 0)
    return band, late, hop


def route(
    n_devices: int, a: npt.ArrayLike, b: npt.ArrayLike, bandwidth: npt.ArrayLike,
    latency: npt.ArrayLike, *, rule: str = "widest",
) -> tuple[FloatArray, FloatArray, IntArray]:
    """Bandwidth, latency and hop matrices of a link list under ``rule``.

    Examples
    --------
    >>> bw, lat, hops = route(3, [0, 1, 0], [1, 2, 2], [10.0, 10.0, 5.0], [1.0, 1.0, 0.5])
    >>> float(bw[0, 2]), float(lat[0, 2]), int(hops[0, 2])   # two 10-links beat the 5-link
    (10.0, 2.0, 2)
    >>> bw, lat, hops = route(3, [0, 1, 0], [1, 2, 2], [10.0, 10.0, 4.0], [1.0, 1.0, 0.5],
    ...                       rule="store-and-forward")
    >>> float(bw[0, 2]), float(bw[0, 1]), int(hops[0, 2])   # 1/10 + 1/10 = 1/5 beats 1/4
    (5.0, 10.0, 2)
    """
    aa = np.asarray(a, dtype=np.int64).reshape(-1)
    bb = np.asarray(b, dtype=np.int64).reshape(-1)
    bwa = np.asarray(bandwidth, dtype=np.float64).reshape(-1)
    la = np.asarray(latency, dtype=np.float64).reshape(-1)
    if check_rule(rule) == "widest":
        band, late, hop = route_kernel(int(n_devices), aa, bb, bwa, la)
        return band, late, hop
    n = int(n_devices)
    if rule == "direct":
        return _direct(n, aa, bb, bwa, la)
    adj = _saf_adjacency(n, aa, bb, bwa, la)
    band = np.zeros((n, n))
    late = np.zeros((n, n))
    hop = np.full((n, n), -1, np.int64)
    for s in range(n):
        best, _ = _saf_tree(n, adj, s)
        for v, (t, lat, h) in enumerate(best):
            if math.isfinite(t):
                band[s, v] = math.inf if t == 0 else 1.0 / t
                late[s, v] = lat
                hop[s, v] = h
    np.fill_diagonal(band, math.inf)
    np.fill_diagonal(late, 0.0)
    return band, late, hop


def unreachable_pair(bandwidth: FloatArray) -> tuple[int, int] | None:
    """First pair ``(i, j)`` with no route (bandwidth 0 off the diagonal), or ``None``."""
    bad = np.argwhere(bandwidth <= 0)
    return None if bad.size == 0 else (int(bad[0, 0]), int(bad[0, 1]))


def route_path(cluster_links: Sequence[tuple[int, int, float, float]], n_devices: int, a: int,
               b: int, level: float | None = None, *, rule: str = "widest") -> list[int]:
    """Indices of the links on the path the rule picks from ``a`` to ``b`` (in order).

    ``cluster_links`` are ``(a, b, bandwidth, latency)``. Among paths of the best bottleneck,
    least latency, then fewest hops, the first one found (deterministic). Used for link
    contention, which needs the physical links a transfer crosses. ``level``: the pair's
    widest bottleneck when known (a routed cluster's ``bandwidth[a, b]``), saving a routing.

    Examples
    --------
    >>> route_path([(0, 1, 10.0, 1.0), (1, 2, 10.0, 1.0), (0, 2, 5.0, 0.0)], 3, 0, 2)
    [0, 1]
    """
    if a == b:
        return []
    if check_rule(rule) == "direct":
        cands = [k for k, x in enumerate(cluster_links) if {x[0], x[1]} == {a, b} and x[2] > 0]
        if not cands:
            raise UsageError(f"no path from device {a} to device {b}")
        return [min(cands, key=lambda k: (-cluster_links[k][2], cluster_links[k][3], k))]
    if rule == "store-and-forward":
        arr = np.asarray([x[:4] for x in cluster_links], dtype=np.float64).reshape(-1, 4)
        saf_adj = _saf_adjacency(n_devices, arr[:, 0].astype(np.int64),
                                 arr[:, 1].astype(np.int64), arr[:, 2], arr[:, 3])
        saf_best, saf_parent = _saf_tree(n_devices, saf_adj, a)
        if not math.isfinite(saf_best[b][0]):
            raise UsageError(f"no path from device {a} to device {b}")
        saf: list[int] = []
        node = b
        while node != a:
            pu, pk = saf_parent[node]
            saf.append(pk)
            node = pu
        return saf[::-1]
    if level is None:
        bw, _, _ = route(n_devices, [x[0] for x in cluster_links], [x[1] for x in cluster_links],
                         [x[2] for x in cluster_links], [x[3] for x in cluster_links])
        level = float(bw[a, b])
    if level <= 0:
        raise UsageError(f"no path from device {a} to device {b}")
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n_devices)]
    for k, (u, v, w, _lat) in enumerate(cluster_links):
        if w >= level:
            adj[u].append((v, k))
            adj[v].append((u, k))
    best: dict[int, tuple[float, int]] = {a: (0.0, 0)}
    parent: dict[int, tuple[int, int]] = {}
    heap: list[tuple[float, int, int]] = [(0.0, 0, a)]
    done: set[int] = set()
    while heap:
        dist, hops, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        for v, k in adj[u]:
            cand = (dist + cluster_links[k][3], hops + 1)
            if v not in best or cand < best[v]:
                best[v] = cand
                parent[v] = (u, k)
                heapq.heappush(heap, (cand[0], cand[1], v))
    path: list[int] = []
    v = b
    while v != a:
        u, k = parent[v]
        path.append(k)
        v = u
    return path[::-1]
