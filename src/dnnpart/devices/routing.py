"""Routing: from an undirected link list to ``(d, d)`` bandwidth and latency matrices.

A cluster has ONE routing rule (``Cluster.routing``) that every solver and simulator uses
(``docs/topologies.md``); three rules exist, ``widest`` (the default), ``store-and-forward`` and ``direct``:

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

How (widest path): the lexicographic label (bottleneck, latency) is not isotone, so one
Dijkstra pass over it can be wrong (a narrower prefix with less latency can win after a narrow
link). Instead, per source, the links are switched on level by level in decreasing bandwidth
and a Dijkstra on (latency, hops) is kept up to date over the links switched on so far; a
device first reached at level ``B`` has bottleneck ``B`` (every path in that subgraph has
bottleneck ``>= B``, none can exceed it) and that subgraph's least latency and hops
(:mod:`dnnpart.devices.route_kernels`). A source ends once every device is reached, so a
complete graph of distinct bandwidths never looks at most of its slow links. Where every link
has the same latency the label is (bottleneck, hops) and symmetric, and all pairs are found
at once by joining components level by level (:func:`_widest_merges`). Store-and-forward is
one Dijkstra per source: with a heap, ``O(m log d)`` per source for ``m`` links, or on a dense
graph scanning arrays, ``O(d^2)`` (:func:`_saf`). Meshes and tori of equal links need no
search (:func:`route_grid`).

Structure: a complete topology whose devices fall into *blocks* with one link kind inside a
block and one per pair of blocks (``two-level``'s machines, ``random_blk_1/2``'s blocks) is
routed on a graph of two devices per block (:func:`route_blocks`): a best path never visits a
block twice (the link into the second visit's device leads from the same block as the first
one's, so skipping the loop is no worse and has fewer hops), so two representatives carry every
route.

Stopping: rows are routed in chunks of about :data:`CHUNK_WORK` link relaxations; between
chunks :func:`route` checks the stop flag (:mod:`dnnpart.interrupt`): Ctrl-C raises
``KeyboardInterrupt`` (exit 130), a passed time limit :class:`~dnnpart.errors.ProblemTooLargeError`
(exit 1), each naming how far routing got.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from dnnpart import interrupt
from dnnpart.devices import route_kernels as rk
from dnnpart.devices.links import LinkTable
from dnnpart.errors import ProblemTooLargeError, UsageError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


#: The routing rules a cluster may name (``Cluster.routing``); the first is the default.
ROUTING_RULES = ("widest", "store-and-forward", "direct")


def check_rule(rule: str) -> str:
    """``rule`` if it is a known routing rule, else ``ValueError`` naming the choices."""
    if rule not in ROUTING_RULES:
        raise UsageError(f"routing must be one of {list(ROUTING_RULES)}, got {rule!r}")
    return rule




#: Link relaxations routed between two checks of the stop flag (a few tens of milliseconds).
CHUNK_WORK = 2_000_000


def check_stop(done: int, total: int) -> None:
    """Stop routing when the stop flag is set: ``KeyboardInterrupt`` for Ctrl-C,
    :class:`~dnnpart.errors.ProblemTooLargeError` for a passed time limit.

    Examples
    --------
    >>> interrupt.reset(); check_stop(0, 4)   # no stop requested: returns
    >>> interrupt.request_stop(interrupt.TIME_LIMIT); check_stop(1, 4)
    Traceback (most recent call last):
    ...
    dnnpart.errors.ProblemTooLargeError: routing stopped at the time limit after 1 of 4 source devices
    >>> interrupt.reset()
    """
    if not interrupt.stop_requested():
        return
    if interrupt.stop_reason() == interrupt.TIME_LIMIT:
        raise ProblemTooLargeError(
            f"routing stopped at the time limit after {done:,} of {total:,} source devices")
    raise KeyboardInterrupt


def _arrays(a: npt.ArrayLike, b: npt.ArrayLike, bandwidth: npt.ArrayLike, latency: npt.ArrayLike
            ) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
    aa = np.asarray(a, dtype=np.int64).reshape(-1)
    bb = np.asarray(b, dtype=np.int64).reshape(-1)
    bw = np.asarray(bandwidth, dtype=np.float64).reshape(-1)
    la = np.asarray(latency, dtype=np.float64).reshape(-1)
    if not (aa.shape == bb.shape == bw.shape == la.shape):
        raise UsageError("route: a, b, bandwidth and latency need one entry per link each")
    keep = (bw > 0) & (aa != bb)  # a link of no bandwidth, or a loop, carries no route
    return aa[keep], bb[keep], bw[keep], la[keep]


def _levels(bw: FloatArray) -> tuple[IntArray, IntArray]:
    """Links by decreasing bandwidth (stable) and where each bandwidth level starts."""
    order = np.argsort(-bw, kind="stable").astype(np.int64)
    ranked = bw[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]]) if ranked.size else \
        np.zeros(0, np.int64)
    return order, np.r_[starts, ranked.size].astype(np.int64)


def _hop_tables(n: int, bw: float, lat: float, rule: str) -> tuple[FloatArray, FloatArray]:
    """Bandwidth and latency of an ``h``-hop path of equal links, ``h < n``: the sums formed
    from the source outwards, as a Dijkstra forms them."""
    inv = 0.0 if math.isinf(bw) else 1.0 / bw
    band_of, lat_of = np.empty(n), np.empty(n)
    t = la = 0.0
    for h in range(n):
        if rule == "widest":
            band_of[h] = bw
        else:
            band_of[h] = math.inf if t == 0 else 1.0 / t
        lat_of[h] = la
        t += inv
        la += lat
    return band_of, lat_of


def _equal(values: FloatArray) -> bool:
    """Whether every link has the same value (then a breadth-first search replaces the heap)."""
    return bool(values.size == 0 or np.all(values == values[0]))


#: Share of the ``d (d - 1) / 2`` device pairs joined by a link from which store-and-forward
#: scans arrays per source (``O(d^2)``) instead of keeping a heap (``O(m log d)``, whose reads
#: of the link weights jump about memory): a complete graph of 1,024 devices routes in about
#: a second instead of a minute.
DENSE_SHARE = 0.25


def _dense(n: int, m: int) -> bool:
    """Whether ``m`` links over ``n`` devices are dense enough for the scanning kernel."""
    return n >= 2 and m > 0 and m >= DENSE_SHARE * (n * (n - 1) / 2)


#: Largest routing work (``d (2 m + d)`` link relaxations) done by the kernels as plain Python
#: (about 0.1 s); above it they are compiled by numba (:func:`~dnnpart.devices.route_kernels.compiled`),
#: whose import and cache load take about a second.
PYTHON_WORK = 50_000


def _kernels(n: int, m: int) -> None:
    """Compile the kernels unless routing ``n`` devices and ``m`` links is small."""
    if n * (2 * m + n) > PYTHON_WORK:
        rk.compiled()


def _step(n: int, m: int) -> int:
    """Sources per chunk: about :data:`CHUNK_WORK` link relaxations."""
    return max(1, min(n, CHUNK_WORK // max(1, 2 * m + n)))


def _chunked(n: int, m: int, rows: Callable[[int, int, IntArray], None], hop: IntArray) -> None:
    """Call ``rows(s0, s1, hop)`` over all sources in chunks, checking the stop flag between.

    Compiled kernels release the GIL and write the rows of their own sources only, so chunks
    run on :func:`route_threads` threads; a chunk-sized ``hop`` (no hop matrix asked for) is
    scratch, one per thread."""
    step = _step(n, m)
    starts = range(0, n, step)
    threads = min(route_threads(), len(starts)) if n * (2 * m + n) > PYTHON_WORK else 1
    if threads <= 1:
        for s0 in starts:
            check_stop(s0, n)
            rows(s0, min(n, s0 + step), hop)
        check_stop(n, n)
        return
    full = hop.shape[0] == n
    scratch = [hop] + [hop if full else np.empty_like(hop) for _ in range(threads - 1)]
    queue = iter(starts)
    lock = threading.Lock()

    def work(mine: IntArray) -> None:
        while True:
            with lock:
                s0 = next(queue, None)
            if s0 is None:
                return
            check_stop(s0, n)
            rows(s0, min(n, s0 + step), mine)

    with ThreadPoolExecutor(threads) as pool:
        for done in [pool.submit(work, buf) for buf in scratch]:
            done.result()  # a stop request raised in a thread ends here
    check_stop(n, n)


def route_threads() -> int:
    """Threads that route at once: the CPUs this process may use, at most
    :data:`MAX_ROUTE_THREADS`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_ROUTE_THREADS))


#: Most threads routing at once (each holds a chunk of rows in flight).
MAX_ROUTE_THREADS = 8


def route(
    n_devices: int, a: npt.ArrayLike, b: npt.ArrayLike, bandwidth: npt.ArrayLike,
    latency: npt.ArrayLike, *, rule: str = "widest", hops: bool = True,
) -> tuple[FloatArray, FloatArray, IntArray]:
    """Bandwidth, latency and hop matrices of a link list under ``rule``.

    Unreachable pairs get bandwidth 0 and hops -1. ``hops=False``: no hop matrix (an empty
    one is returned), which saves ``8 d^2`` bytes. Parallel links between the same two
    devices are alternatives (the rule picks among them like among paths). Checks the stop
    flag between chunks of sources (:func:`check_stop`).

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
    n = int(n_devices)
    aa, bb, bwa, la = _arrays(a, b, bandwidth, latency)
    if check_rule(rule) == "direct":
        return _direct(n, aa, bb, bwa, la)
    band = np.empty((n, n))  # the kernels write every entry of each row
    late = np.empty((n, n))
    m = aa.size
    hop = np.empty((n, n) if hops else (_step(n, m), n), np.int64)
    _kernels(n, m)
    if m and _equal(bwa) and _equal(la):  # one kind of link (grids, tori): breadth-first
        ptr, nbr, _ = rk.adjacency(n, aa, bb, np.arange(m, dtype=np.int64))
        band_of, lat_of = _hop_tables(n, float(bwa[0]), float(la[0]), rule)
        _chunked(n, m, lambda s0, s1, h: rk.uniform_rows(s0, s1, ptr, nbr, band_of, lat_of,
                                                          band, late, h), hop)
    elif rule == "widest":
        order, lstart = _levels(bwa)
        ptr, nbr, eid = rk.adjacency(n, aa, bb, order)
        if WIDEST_MERGES and m and _equal(la):
            _widest_merges(n, ptr, nbr, eid, aa, bb, bwa, float(la[0]), order, lstart, band,
                           late, hop)
        else:
            fifo = _equal(la)
            _chunked(n, m, lambda s0, s1, h: rk.widest_rows(s0, s1, ptr, nbr, eid, aa, bb, bwa,
                                                             la, order, lstart, band, late, h,
                                                             fifo), hop)
    else:
        _saf(n, aa, bb, bwa, la, band, late, hop)
    np.fill_diagonal(band, math.inf)
    np.fill_diagonal(late, 0.0)
    if not hops:
        return band, late, np.zeros((0, 0), np.int64)
    np.fill_diagonal(hop, 0)
    return band, late, hop


#: Widest path over links of one latency by merging components (:func:`_widest_merges`);
#: False: the per-source search for every topology (tests compare the two).
WIDEST_MERGES = True


def _widest_merges(n: int, ptr: IntArray, nbr: IntArray, eid: IntArray, aa: IntArray,
                   bb: IntArray, bwa: FloatArray, lat: float, order: IntArray, lstart: IntArray,
                   band: FloatArray, late: FloatArray, hop: IntArray) -> None:
    """Widest-path matrices when every link has latency ``lat``: all pairs at once, by the
    components the links join level by level
    (:func:`~dnnpart.devices.route_kernels.widest_merges`), the same labels as the
    per-source search. On a complete graph of distinct bandwidths the devices are all joined
    after a few thousand of its links, so the rest are never looked at; checks the stop flag
    between chunks of levels."""
    band.fill(0.0)
    late.fill(math.inf)
    hop.fill(-1)
    state = np.empty((12, n), np.int64)
    state[0] = 0  # act
    state[1] = np.arange(n)  # comp
    state[2] = -1  # nxt
    state[3] = np.arange(n)  # head
    state[4] = 1  # size
    state[5] = np.arange(n)  # uf
    state[6] = -1  # big
    state[7] = 0  # mark
    state[8] = -1  # dist
    state[11, 0] = n
    _, lat_of = _hop_tables(n, 1.0, lat, "widest")
    n_levels = lstart.size - 1
    k = 0
    while k < n_levels:
        check_stop(0, n)
        k = rk.widest_merges(k, CHUNK_WORK, ptr, nbr, eid, aa, bb, bwa, order, lstart, lat_of,
                             state, band, late, hop)
    check_stop(n, n)


def _saf(n: int, aa: IntArray, bb: IntArray, bwa: FloatArray, la: FloatArray,
         band: FloatArray, late: FloatArray, hop: IntArray) -> None:
    """Store-and-forward rows: the scanning kernel on a dense graph without parallel links,
    else the heap kernel (the same labels: :func:`~dnnpart.devices.route_kernels.saf_dense_rows`)."""
    m = aa.size
    with np.errstate(divide="ignore"):
        inv = np.where(np.isinf(bwa), 0.0, 1.0 / bwa)
    if _dense(n, m):
        one_latency = _equal(la)
        winv, wlat, has, simple = rk.dense_weights(n, aa, bb, inv, la, not one_latency)
        if simple:  # a scan per source beats the heap's scattered reads of link weights
            if m == n * (n - 1) // 2:
                has = np.zeros((0, 0), np.bool_)  # every pair linked: nothing to look up
            lat_of = (_hop_tables(n, 1.0, float(la[0]), "widest")[1] if one_latency
                      else np.zeros(0))
            _chunked(n, n * n // 2, lambda s0, s1, h: rk.saf_dense_rows(
                s0, s1, winv, wlat, has, lat_of, band, late, h), hop)
            return
        del winv, wlat, has
    ptr, nbr, eid = rk.adjacency(n, aa, bb, np.arange(m, dtype=np.int64))
    fifo = _equal(la) and _equal(inv)
    _chunked(n, m, lambda s0, s1, h: rk.saf_rows(s0, s1, ptr, nbr, eid, inv, la, band, late, h,
                                                  fifo), hop)


def _direct(n: int, aa: IntArray, bb: IntArray, bw: FloatArray, la: FloatArray
            ) -> tuple[FloatArray, FloatArray, IntArray]:
    band = np.zeros((n, n))
    late = np.full((n, n), math.inf)
    hop = np.full((n, n), -1, np.int64)
    # per pair, the widest link, ties to the least latency: write the best last
    best = np.lexsort((-la, bw))
    for u, v in ((aa[best], bb[best]), (bb[best], aa[best])):
        band[u, v] = bw[best]
        late[u, v] = la[best]
        hop[u, v] = 1
    np.fill_diagonal(band, math.inf)
    np.fill_diagonal(late, 0.0)
    np.fill_diagonal(hop, 0)
    return band, late, hop


def route_blocks(block: npt.ArrayLike, bandwidth: npt.ArrayLike, latency: npt.ArrayLike, *,
                 rule: str = "widest") -> tuple[FloatArray, FloatArray, IntArray]:
    """Matrices of a complete topology whose links depend only on the devices' blocks.

    ``block[i]`` is device ``i``'s block; a link between blocks ``x != y`` has
    ``bandwidth[x, y]`` and ``latency[x, y]``, one inside block ``x`` ``bandwidth[x, x]`` and
    ``latency[x, x]``. Routed on two representatives per block (module doc), the same
    matrices as :func:`route` on the full link list, in ``O(d^2)`` for the result.

    Examples
    --------
    >>> bw, lat, hops = route_blocks([0, 0, 1, 1], [[1.0, 4.0], [4.0, 1.0]], [[0, 0], [0, 0]])
    >>> bw.tolist()[0], hops.tolist()[0]     # inside a block: over the other block's 4-links
    ([inf, 4.0, 4.0, 4.0], [0, 2, 1, 1])
    """
    blk = np.asarray(block, dtype=np.int64).reshape(-1)
    bw = np.asarray(bandwidth, dtype=np.float64)
    la = np.asarray(latency, dtype=np.float64)
    k = bw.shape[0]
    if bw.shape != (k, k) or la.shape != (k, k) or (blk.size and not 0 <= blk.min() <= blk.max() < k):
        raise UsageError(f"route_blocks: expected (k, k) matrices and blocks in [0, {k})")
    size = np.bincount(blk, minlength=k)
    rep0 = np.arange(k, dtype=np.int64)
    twin = np.flatnonzero(size >= 2)
    rep1 = np.full(k, -1, np.int64)
    rep1[twin] = k + np.arange(twin.size)
    of = np.r_[np.arange(k), twin]  # block of each representative
    n = of.size
    ii, jj = np.triu_indices(n, 1)
    ii, jj = ii.astype(np.int64), jj.astype(np.int64)
    small_bw, small_lat, small_hop = route(n, ii, jj, bw[of[ii], of[jj]], la[of[ii], of[jj]],
                                           rule=rule)
    inner = rep1[blk]
    same = blk[:, None] == blk[None, :]
    out: list[npt.NDArray[np.generic]] = []
    for mat in (small_bw, small_lat, small_hop):
        full = mat[np.ix_(rep0[blk], rep0[blk])]
        within = mat[rep0[blk], np.where(inner >= 0, inner, rep0[blk])]  # per device's block
        full[same] = np.broadcast_to(within[:, None], full.shape)[same]
        out.append(full)
    band = out[0].astype(np.float64, copy=False)
    late = out[1].astype(np.float64, copy=False)
    hop = out[2].astype(np.int64, copy=False)
    np.fill_diagonal(band, math.inf)
    np.fill_diagonal(late, 0.0)
    np.fill_diagonal(hop, 0)
    return band, late, hop


def route_grid(dims: Sequence[int], wrap: bool, bandwidth: float, latency: float, *,
               rule: str = "widest") -> tuple[FloatArray, FloatArray]:
    """Bandwidth and latency matrices of a mesh (``wrap=False``) or torus of equal links.

    Every link being the same, a pair's label is that of a path of as many hops as the
    pair's distance on the grid: the sum over the axes of the coordinate differences (on a
    torus, the shorter way round). The same matrices as :func:`route` on the grid's links
    (the labels of :func:`_hop_tables`), built a block of rows at a time with numpy: no
    search, no numba. Device ``i`` has the row-major coordinates of ``i`` in ``dims``.

    Examples
    --------
    >>> bw, lat = route_grid((2, 3), False, 4.0, 1.0, rule="store-and-forward")
    >>> bw[0].tolist(), lat[0].tolist()      # device 5 is 1 + 2 hops from device 0
    ([inf, 4.0, 2.0, 4.0, 2.0, 1.3333333333333333], [0.0, 1.0, 2.0, 1.0, 2.0, 3.0])
    """
    shape = tuple(int(k) for k in dims)
    n = math.prod(shape)
    if check_rule(rule) == "direct" or n < 2:
        raise UsageError("route_grid: a rule that forwards, and at least two devices")
    band_of, lat_of = _hop_tables(n, float(bandwidth), float(latency), rule)
    coords = np.indices(shape).reshape(len(shape), n).astype(np.int32)
    tables = []  # per axis, the hops between two coordinates
    for k in shape:
        diff = np.abs(np.arange(k, dtype=np.int32)[:, None] - np.arange(k, dtype=np.int32))
        tables.append(np.minimum(diff, k - diff) if wrap else diff)
    band = np.empty((n, n))
    late = np.empty((n, n))
    step = _step(n, n // 2)  # about CHUNK_WORK entries a block
    for r0 in range(0, n, step):
        check_stop(r0, n)
        r1 = min(n, r0 + step)
        hops = np.zeros((r1 - r0, n), np.int32)
        for axis, table in enumerate(tables):
            hops += table[coords[axis, r0:r1, None], coords[axis]]
        band[r0:r1] = band_of[hops]
        late[r0:r1] = lat_of[hops]
    check_stop(n, n)
    np.fill_diagonal(band, math.inf)
    np.fill_diagonal(late, 0.0)
    return band, late


def unreachable_pair(bandwidth: FloatArray) -> tuple[int, int] | None:
    """First pair ``(i, j)`` with no route (bandwidth 0 off the diagonal), or ``None``."""
    bad = np.argwhere(bandwidth <= 0)
    return None if bad.size == 0 else (int(bad[0, 0]), int(bad[0, 1]))


def route_path(cluster_links: Sequence[tuple[int, int, float, float]] | LinkTable,
               n_devices: int, a: int, b: int, level: float | None = None, *,
               rule: str = "widest") -> list[int]:
    """Indices of the links on the path the rule picks from ``a`` to ``b`` (in order).

    ``cluster_links`` are ``(a, b, bandwidth, latency)``, or a cluster's
    :class:`~dnnpart.devices.links.LinkTable` (read as arrays, no objects made). The path
    carries the label of the rule's matrices (best bottleneck, least latency, then fewest
    hops for ``widest``); among equal ones, the first the Dijkstra finds (deterministic).
    Used for link contention, which needs the physical links a transfer crosses. ``level``
    is accepted for compatibility (the pair's widest bottleneck); the search finds it itself.

    Examples
    --------
    >>> route_path([(0, 1, 10.0, 1.0), (1, 2, 10.0, 1.0), (0, 2, 5.0, 0.0)], 3, 0, 2)
    [0, 1]
    """
    if a == b:
        return []
    if isinstance(cluster_links, LinkTable):  # its arrays: no Link objects
        cols = (cluster_links.a, cluster_links.b, cluster_links.bandwidth, cluster_links.latency)
    else:
        arr = np.asarray([x[:4] for x in cluster_links], dtype=np.float64).reshape(-1, 4)
        cols = (arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2], arr[:, 3])
    ids = np.arange(cols[0].size)
    aa, bb = cols[0], cols[1]
    keep = (cols[2] > 0) & (aa != bb)
    ids, aa, bb, bw, la = ids[keep], aa[keep], bb[keep], cols[2][keep], cols[3][keep]
    if check_rule(rule) == "direct":
        cands = np.flatnonzero(((aa == a) & (bb == b)) | ((aa == b) & (bb == a)))
        if not cands.size:
            raise UsageError(f"no path from device {a} to device {b}")
        best = cands[np.lexsort((cands, la[cands], -bw[cands]))[0]]  # widest, least latency
        return [int(ids[best])]
    n = int(n_devices)
    _kernels(n, ids.size)
    parent = np.empty(n, np.int64)
    rb, rl, rh = np.empty(n), np.empty(n), np.empty(n, np.int64)
    if rule == "store-and-forward":
        with np.errstate(divide="ignore"):
            inv = np.where(np.isinf(bw), 0.0, 1.0 / bw)
        ptr, nbr, eid = rk.adjacency(n, aa, bb, np.arange(ids.size, dtype=np.int64))
        rk.saf_source(a, ptr, nbr, eid, inv, la, rb, rl, rh, parent, _equal(la) and _equal(inv))
    else:
        order, lstart = _levels(bw)
        ptr, nbr, eid = rk.adjacency(n, aa, bb, order)
        rk.widest_source(a, ptr, nbr, eid, aa, bb, bw, la, order, lstart, b, rb, rl, rh, parent,
                         _equal(la))
    if rh[b] < 0:
        raise UsageError(f"no path from device {a} to device {b}")
    path: list[int] = []
    node = b
    while node != a:
        e = int(parent[node])
        path.append(int(ids[e]))
        node = int(bb[e]) if int(aa[e]) == node else int(aa[e])
    return path[::-1]
