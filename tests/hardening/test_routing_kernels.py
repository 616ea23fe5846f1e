"""Routing: the kernels against a naive twin, block routes against the full search, the stop
flag, and a 4,096-device mesh."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart import interrupt
from dnnpart.devices import routing
from dnnpart.devices.routing import route, route_blocks
from dnnpart.devices.topology import mesh2d
from dnnpart.errors import ProblemTooLargeError


def rk_module():
    from dnnpart.devices import route_kernels

    return route_kernels


def naive_saf(d, links):
    """Plain Dijkstra per source on (sum 1/B, latency, hops), written apart from the kernels."""
    adj = [[] for _ in range(d)]
    for a, b, bw, lat in links:
        adj[a].append((b, 1.0 / bw, lat))
        adj[b].append((a, 1.0 / bw, lat))
    out = {}
    for s in range(d):
        best = {s: (0.0, 0.0, 0)}
        heap = [(0.0, 0.0, 0, s)]
        while heap:
            t, lat, h, u = heapq.heappop(heap)
            if best[u] != (t, lat, h):
                continue
            for v, inv, lk in adj[u]:
                cand = (t + inv, lat + lk, h + 1)
                if v not in best or cand < best[v]:
                    best[v] = cand
                    heapq.heappush(heap, (*cand, v))
        out.update({(s, v): key for v, key in best.items()})
    return out


def naive_widest(d, links):
    """Per pair: the best bottleneck by trying every threshold, then a BFS-free Dijkstra on
    (latency, hops) over the links at or above it (no level-by-level reuse)."""
    out = {}
    levels = sorted({x[2] for x in links}, reverse=True)
    for s in range(d):
        for level in levels:
            adj = [[] for _ in range(d)]
            for a, b, bw, lat in links:
                if bw >= level:
                    adj[a].append((b, lat))
                    adj[b].append((a, lat))
            best = {s: (0.0, 0)}
            heap = [(0.0, 0, s)]
            while heap:
                dist, h, u = heapq.heappop(heap)
                if best[u] != (dist, h):
                    continue
                for v, lk in adj[u]:
                    cand = (dist + lk, h + 1)
                    if v not in best or cand < best[v]:
                        best[v] = cand
                        heapq.heappush(heap, (*cand, v))
            for v, (dist, h) in best.items():
                out.setdefault((s, v), (level, dist, h))
    return out


@st.composite
def topologies(draw):
    d = draw(st.integers(2, 9))
    one = draw(st.sampled_from([None, 0.0, 1.0]))  # one latency for every link, or mixed
    links = []
    for a, b in itertools.combinations(range(d), 2):
        if draw(st.booleans()):
            links.append((a, b, float(draw(st.sampled_from([1, 2, 4]))),
                          one if one is not None else float(draw(st.sampled_from([0, 0, 1, 2])))))
    return d, links


@st.composite
def dense_topologies(draw):
    """Most pairs linked (complete graphs too), one latency or several, bandwidths from a
    few values (ties) or drawn freely (sums that round)."""
    d = draw(st.integers(2, 9))
    keep = draw(st.sampled_from([1.0, 0.9, 0.6]))
    free = draw(st.booleans())
    one_latency = draw(st.booleans())
    lat0 = float(draw(st.sampled_from([0, 1, 3e-7])))
    links = []
    for a, b in itertools.combinations(range(d), 2):
        if keep == 1.0 or draw(st.floats(0, 1)) < keep:
            bw = draw(st.floats(1.0, 1e3)) if free else float(draw(st.sampled_from([1, 2, 3, 4])))
            lat = lat0 if one_latency else float(draw(st.sampled_from([0, 0, 1, 2, 0.1])))
            links.append((a, b, bw, lat))
    return d, links


@contextlib.contextmanager
def kernel_mode(kernels: str, compiled: bool):
    """Force the kernels: ``search`` (per source: heap Dijkstra, level-by-level widest
    search) or ``bulk`` (store-and-forward by scanning arrays, widest path by merging
    components where the links share one latency), compiled by numba or as Python."""
    saved = routing.DENSE_SHARE, routing.WIDEST_MERGES, routing.PYTHON_WORK
    routing.DENSE_SHARE = 0.0 if kernels == "bulk" else math.inf
    routing.WIDEST_MERGES = kernels == "bulk"
    routing.PYTHON_WORK = -1 if compiled else 1 << 62
    try:
        yield
    finally:
        routing.DENSE_SHARE, routing.WIDEST_MERGES, routing.PYTHON_WORK = saved


MODES = [(kernels, jit) for kernels in ("search", "bulk") for jit in (False, True)]
RULES = (("widest", naive_widest), ("store-and-forward", naive_saf))


def check_twins(d, links):
    cols = [list(c) for c in zip(*links, strict=True)] if links else [[], [], [], []]
    for (kernels, jit), (rule, twin) in itertools.product(MODES, RULES):
        with kernel_mode(kernels, jit):
            bw, lat, hops = route(d, *cols, rule=rule)
        want = twin(d, links)
        for s, t in itertools.product(range(d), repeat=2):
            if s == t:
                continue
            if (s, t) not in want:
                assert bw[s, t] == 0 and hops[s, t] == -1
                continue
            key = want[(s, t)]
            got_bw = bw[s, t] if rule == "widest" else 1.0 / bw[s, t]
            assert got_bw == pytest.approx(key[0], rel=1e-12)
            assert (lat[s, t], hops[s, t]) == (key[1], key[2]), (rule, kernels, jit, s, t)


@settings(max_examples=120, deadline=None)
@given(topologies())
def test_kernels_equal_their_naive_twins(topo):
    check_twins(*topo)


@settings(max_examples=80, deadline=None)
@given(dense_topologies())
def test_kernels_equal_their_naive_twins_on_dense_graphs(topo):
    check_twins(*topo)


@settings(max_examples=60, deadline=None)
@given(st.one_of(dense_topologies(), topologies()), st.booleans())
def test_the_kernels_of_a_rule_give_the_same_matrices(topo, parallel):
    """Bit for bit, parallel links (the scanning kernel declines them) and all."""
    d, links = topo
    if parallel and links:
        links = [*links, (links[0][0], links[0][1], links[0][2] * 2, links[0][3])]
    cols = [list(c) for c in zip(*links, strict=True)] if links else [[], [], [], []]
    for rule, _ in RULES:
        got = {}
        for mode in MODES:
            with kernel_mode(*mode):
                got[mode] = route(d, *cols, rule=rule)
        for mode in MODES[1:]:
            for x, y in zip(got[MODES[0]], got[mode], strict=True):
                np.testing.assert_array_equal(x, y, err_msg=f"{rule} {mode}")


@pytest.mark.parametrize(("rule", "kernel"), [("store-and-forward", "saf_dense_rows"),
                                               ("widest", "widest_merges")])
def test_a_complete_graph_of_one_latency_takes_the_bulk_kernels(monkeypatch, rule, kernel):
    """The bulk kernels are the ones taken there by default (the twins check their labels)."""
    calls = []
    real = getattr(rk_module(), kernel)
    monkeypatch.setattr(rk_module(), kernel, lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(routing, "PYTHON_WORK", 1 << 62)
    n = 12
    ii, jj = np.triu_indices(n, 1)
    route(n, ii, jj, np.arange(1.0, ii.size + 1), np.full(ii.size, 0.5), rule=rule)
    assert calls


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.data())
def test_block_routes_equal_the_full_search(k, size, data):
    """Structural routes of a complete block graph equal the search on all its links."""
    block = np.repeat(np.arange(k), size)
    vals = st.sampled_from([1.0, 2.0, 4.0])
    bw = np.array([[data.draw(vals) for _ in range(k)] for _ in range(k)])
    bw = np.triu(bw) + np.triu(bw, 1).T
    lat = np.array([[data.draw(st.sampled_from([0.0, 1.0])) for _ in range(k)] for _ in range(k)])
    lat = np.triu(lat) + np.triu(lat, 1).T
    n = block.size
    ii, jj = np.triu_indices(n, 1)
    for rule in ("widest", "store-and-forward", "direct"):
        full = route(n, ii, jj, bw[block[ii], block[jj]], lat[block[ii], block[jj]], rule=rule)
        fast = route_blocks(block, bw, lat, rule=rule)
        np.testing.assert_allclose(fast[0], full[0], rtol=1e-12)
        np.testing.assert_array_equal(fast[1], full[1])
        np.testing.assert_array_equal(fast[2], full[2])


def test_stop_flag_stops_routing_between_chunks(monkeypatch):
    monkeypatch.setattr(routing, "CHUNK_WORK", 1)  # one source per chunk
    interrupt.reset()
    interrupt.request_stop(interrupt.TIME_LIMIT)
    try:
        with pytest.raises(ProblemTooLargeError, match="time limit after 0 of 64"):
            mesh2d(x=8, y=8)
        interrupt.reset()
        interrupt.request_stop(interrupt.INTERRUPTED)
        with pytest.raises(KeyboardInterrupt):
            mesh2d(x=8, y=8, routing="store-and-forward")
    finally:
        interrupt.reset()


def test_map_time_limit_stops_a_large_topology_through_the_cli(tmp_path):
    """`map --time-limit` bounds the routing of a topology too: exit 1 in bounded time."""
    st_file = tmp_path / "st.json"
    st_file.write_text('{"compute": [1, 1], "param_bytes": [1e6, 1e6], '
                       '"comm_bytes": [[0, 1e6], [0, 0]], "replicas": 2}')
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "dnnpart", "map", str(st_file), "--cluster",
         "uniform_dist:n=1024,routing=store-and-forward", "--time-limit", "0.5"],
        capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().startswith("error:") and "time limit" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert took < 60


@pytest.mark.slow
def test_a_4096_device_mesh_routes():
    c = mesh2d(x=64, y=64, bw=2.0)
    assert c.n_devices == 4096
    off = ~np.eye(4096, dtype=bool)
    assert np.all(c.bandwidth[off] == 2.0)
    saf = mesh2d(x=64, y=64, bw=2.0, routing="store-and-forward")
    assert saf.bandwidth[0, 4095] == pytest.approx(2.0 / 126)  # 63 + 63 hops
    assert math.isinf(saf.bandwidth[7, 7])
