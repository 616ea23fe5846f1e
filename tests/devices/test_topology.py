"""Routing equals a brute force over simple paths; generators give their documented shapes."""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.cost import resolve_cluster
from dnnpart.devices import Device, route_kernels
from dnnpart.devices.cluster import Link
from dnnpart.devices.routing import route, route_path
from dnnpart.devices.topology import (
    DGX1_NVLINK,
    GENERATORS,
    cluster_from_links,
    dgx1,
    generate,
    mesh2d,
    mesh3d,
    random_blk_1,
    random_blk_2,
    torus2d,
    torus3d,
    two_level,
    uniform_dist,
)
from dnnpart.errors import FormatError


@st.composite
def topologies(draw):
    d = draw(st.integers(1, 8))
    density = draw(st.sampled_from([0.25, 0.4, 0.6]))
    links = []
    for a, b in itertools.combinations(range(d), 2):
        for _ in range(draw(st.integers(0, 2)) if draw(st.floats(0, 1)) < density else 0):
            links.append((a, b, float(draw(st.integers(1, 3))), float(draw(st.integers(0, 2)))))
    return d, links


def brute_force(d, links):
    """Best (bandwidth, latency, hops) per pair over all simple paths, parallel links included."""
    adj = {v: [] for v in range(d)}
    for a, b, bw, lat in links:
        adj[a].append((b, bw, lat))
        adj[b].append((a, bw, lat))
    best = {}

    def dfs(s, v, seen, bott, lat, hops):
        key = (-bott, lat, hops)
        if v != s and (key < best.get((s, v), (math.inf,))):
            best[(s, v)] = key
        for w, bw, l2 in adj[v]:
            if w not in seen:
                seen.add(w)
                dfs(s, w, seen, min(bott, bw), lat + l2, hops + 1)
                seen.remove(w)

    for s in range(d):
        dfs(s, s, {s}, math.inf, 0.0, 0)
    return best


@settings(max_examples=600, deadline=None)
@given(topologies())
def test_routing_equals_brute_force_over_simple_paths(topo):
    d, links = topo
    a = [x[0] for x in links]
    b = [x[1] for x in links]
    bw, lat, hops = route(d, a, b, [x[2] for x in links], [x[3] for x in links])
    best = brute_force(d, links)
    for s, t in itertools.product(range(d), repeat=2):
        if s == t:
            assert bw[s, t] == math.inf and lat[s, t] == 0 and hops[s, t] == 0
        elif (s, t) in best:
            nb, nl, nh = best[(s, t)]
            assert (bw[s, t], lat[s, t], hops[s, t]) == (-nb, nl, nh), (s, t)
        else:
            assert bw[s, t] == 0 and hops[s, t] == -1
    for s, t in itertools.product(range(d), repeat=2):
        if s != t and (s, t) in best:  # the path itself carries the label
            path = route_path(links, d, s, t)
            at, bott, lat_sum = s, math.inf, 0.0
            for k in path:
                x = links[k]
                assert at in (x[0], x[1])
                at = x[1] if x[0] == at else x[0]
                bott, lat_sum = min(bott, x[2]), lat_sum + x[3]
            assert at == t and (bott, lat_sum, len(path)) == (bw[s, t], lat[s, t], hops[s, t])
    # the kernels' own source (``.py_func``) and the compiled kernels give the same
    # matrices: a compilation check (a small topology is routed by the Python source)
    twin = _route_uncompiled(d, a, b, [x[2] for x in links], [x[3] for x in links])
    for x, y in zip(twin, (bw, lat, hops), strict=True):
        np.testing.assert_array_equal(x, y)
    with compiled_kernels():
        jit = route(d, a, b, [x[2] for x in links], [x[3] for x in links])
    for x, y in zip(jit, (bw, lat, hops), strict=True):
        np.testing.assert_array_equal(x, y)


@contextlib.contextmanager
def compiled_kernels():
    """Route with the numba kernels whatever the size (``PYTHON_WORK``: below it, Python)."""
    from dnnpart.devices import routing

    saved = routing.PYTHON_WORK
    routing.PYTHON_WORK = -1
    try:
        yield
    finally:
        routing.PYTHON_WORK = saved


def _route_uncompiled(d, a, b, bw, lat):
    """``route``'s widest matrices from the kernels' Python source (no numba)."""
    from dnnpart.devices.routing import _levels

    aa, bb = np.array(a, np.int64).reshape(-1), np.array(b, np.int64).reshape(-1)
    bwa, la = np.array(bw, float).reshape(-1), np.array(lat, float).reshape(-1)
    order, lstart = _levels(bwa)
    py = {name: getattr(getattr(route_kernels, name), "py_func", getattr(route_kernels, name))
          for name in ("adjacency", "widest_source")}
    ptr, nbr, eid = py["adjacency"](d, aa, bb, order)
    band, late = np.zeros((d, d)), np.full((d, d), math.inf)
    hop = np.full((d, d), -1, np.int64)
    parent = np.empty(d, np.int64)
    for s in range(d):
        py["widest_source"](s, ptr, nbr, eid, aa, bb, bwa, la, order, lstart, -1,
                                            band[s], late[s], hop[s], parent, False)
    return band, late, hop


def test_widest_path_prefers_bottleneck_then_latency_then_hops():
    # 0-1-2 at bandwidth 10 (latency 1 + 1) beats the direct 5-link; a 3-hop path with the
    # same bottleneck and latency loses on hops.
    bw, lat, hops = route(4, [0, 1, 0, 0, 3], [1, 2, 2, 3, 2], [10, 10, 5, 10, 10], [1, 1, 0, 0.5, 1.5])
    assert (bw[0, 2], lat[0, 2], hops[0, 2]) == (10, 2, 2)


def test_disconnected_topology_is_refused_naming_two_devices():
    devs = [Device(name=f"gpu{i}", kind="accelerator") for i in range(4)]
    with pytest.raises(ValueError, match="gpu0 cannot reach gpu2"):
        cluster_from_links(devs, [Link(a=0, b=1, bandwidth=1.0), Link(a=2, b=3, bandwidth=1.0)])


def _degrees(c):
    deg = np.zeros(c.n_devices, np.int64)
    for x in c.links:
        deg[x.a] += 1
        deg[x.b] += 1
    return deg


@pytest.mark.parametrize(("dims", "torus"), [((3, 4), False), ((4, 4), True), ((2, 5), True),
                                              ((1, 6), False)])
def test_2d_grids_have_their_degrees(dims, torus):
    x, y = dims
    c = (torus2d if torus else mesh2d)(x=x, y=y, bw=7.0)
    deg = _degrees(c).reshape(x, y)
    expect = np.zeros((x, y), np.int64)
    for i, j in itertools.product(range(x), range(y)):
        for k, n in ((i, x), (j, y)):
            if torus:
                expect[i, j] += min(n - 1, 2)
            else:
                expect[i, j] += (k > 0) + (k < n - 1)
    np.testing.assert_array_equal(deg, expect)
    assert {x.bandwidth for x in c.links} == {7.0}
    assert len({(min(x.a, x.b), max(x.a, x.b)) for x in c.links}) == len(c.links)  # no duplicates


def test_3d_grids_have_their_degrees_and_hop_distances():
    t = torus3d(x=3, y=3, z=4)
    assert set(_degrees(t).tolist()) == {6}
    m = mesh3d(x=3, y=3, z=3)
    assert sorted(set(_degrees(m).tolist())) == [3, 4, 5, 6]
    assert _degrees(m)[13] == 6  # the centre
    # uniform bandwidth, zero latency: the routed bandwidth is the link bandwidth everywhere
    assert np.all(t.bandwidth[~np.eye(36, dtype=bool)] == 25e9)


def test_dgx1_has_six_nvlink_bricks_per_gpu_and_pcie_elsewhere():
    c = dgx1()
    bricks = np.zeros(8, np.int64)
    for (i, j), k in DGX1_NVLINK.items():
        bricks[i] += k
        bricks[j] += k
    assert bricks.tolist() == [6] * 8
    off = c.bandwidth[~np.eye(8, dtype=bool)]
    values, counts = np.unique(off, return_counts=True)
    # 16 NVLink pairs (8 double, 8 single), 12 PCIe pairs; each counted twice in the matrix
    assert dict(zip((values / 1e9).tolist(), (counts // 2).tolist(), strict=True)) == {
        15.75: 12, 24.0: 8, 48.0: 8}
    routed = dgx1(routed=1)  # routed, double links 0-3-2-1-5 beat PCIe
    assert routed.bandwidth[0, 5] == 48e9 and routed.latency[0, 5] == 0


def test_two_level_keeps_groups_and_matrix_of_the_preset():
    from dnnpart.devices import two_level_cluster

    c = two_level(nodes=3, gpus=2, intra=9.0, inter=2.0)
    ref = two_level_cluster(n_groups=3, accelerators_per_group=2, memory_bytes=math.inf,
                            intra_bandwidth=9.0, inter_bandwidth=2.0)
    np.testing.assert_array_equal(c.bandwidth, ref.bandwidth)
    np.testing.assert_array_equal(c.group, ref.group)
    assert set(_degrees(c).tolist()) == {5}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_generators_bandwidth_counts(seed):
    n, blocks = 12, 3
    c1 = random_blk_1(n=n, blocks=blocks, intra=5.0, inter=1.0, seed=seed)
    intra = sum(x.bandwidth == 5.0 for x in c1.links)
    assert intra == blocks * math.comb(n // blocks, 2)
    assert len(c1.links) == math.comb(n, 2) and set(_degrees(c1).tolist()) == {n - 1}
    c2 = random_blk_2(n=n, blocks=blocks, seed=seed)
    assert len({x.bandwidth for x in c2.links}) == blocks + math.comb(blocks, 2)
    c3 = uniform_dist(n=n, lo=1.0, hi=2.0, seed=seed)
    bws = [x.bandwidth for x in c3.links]
    assert len(set(bws)) == math.comb(n, 2) and 1.0 <= min(bws) and max(bws) <= 2.0
    # same seed, same topology; another seed, another one
    assert [x.bandwidth for x in uniform_dist(n=n, lo=1.0, hi=2.0, seed=seed).links] == bws
    assert [x.bandwidth for x in uniform_dist(n=n, lo=1.0, hi=2.0, seed=seed + 7).links] != bws


def test_shorthand_adds_cpus_only_when_asked():
    assert resolve_cluster("4xA100").cluster.kinds() == ("accelerator",) * 4
    c = resolve_cluster("4xA100+1cpu").cluster
    assert c.kinds() == ("accelerator",) * 4 + ("cpu",) and c.devices[-1].name == "cpu0"
    assert resolve_cluster("2xA100+2cpus").cluster.n_cpus == 2


@pytest.mark.parametrize(("spec", "fragment"), [
    ("torus3d:x=8,y=8", None),
    ("torus3d:x=2,y=2,w=3", "unknown parameter 'w'"),
    ("mesh2d:x=two", "not a number"),
    ("mesh2d:x=1.5", "must be an integer"),
    ("mesh2d:x=0,y=3", r"parameter x must be an integer in \[1, 4096\]"),
    ("mesh2d:x", "expected GENERATOR:key=value"),
    ("mesh2d:x=2,x=3", "given twice"),
    ("torus3d:x=100,y=100,z=100", "exceed the limit"),
    ("random_blk_1:n=10,blocks=3", "divide n=10"),
    ("uniform_dist:n=4,lo=5,hi=1", "lo <= hi"),
    ("uniform_dist:n=4,lo=nan", "parameter lo must be a finite number > 0"),
    ("100000xA100", "exceed the limit"),
    ("nosuch:a=1", "neither an existing cluster file"),
])
def test_bad_cluster_specs_are_refused_naming_the_problem(spec, fragment):
    if fragment is None:
        assert resolve_cluster(spec).cluster.n_devices == 8 * 8 * 4
        return
    with pytest.raises(FormatError, match=fragment):
        resolve_cluster(spec)


def test_every_generator_builds_with_its_defaults():
    for name in GENERATORS:
        c = generate(name, {})
        assert c.n_devices >= 1 and c.links


def test_cluster_files_with_links_are_routed_and_matrices_used_as_given():
    from dnnpart.io import parse_cluster

    devices = [{"name": "g", "count": 3, "kind": "accelerator"}]
    links = [{"a": "g0", "b": "g1", "bandwidth": "4e9", "latency": 1e-6},
             {"a": "g1", "b": "g2", "bandwidth": 2e9}]
    c = parse_cluster({"devices": devices, "links": links})
    assert c.bandwidth[0, 2] == 2e9 and c.latency[0, 2] == 1e-6 and len(c.links) == 2
    given = [[math.inf, 1, 1], [1, math.inf, 1], [1, 1, math.inf]]
    c = parse_cluster({"devices": devices, "links": links, "bandwidth": given})
    assert c.bandwidth[0, 2] == 1 and len(c.links) == 2  # the matrix wins, links kept
    c = parse_cluster({"preset": "torus2d", "x": 3, "y": 3})
    assert c.n_devices == 9 and len(c.links) == 18


@pytest.mark.parametrize(("links", "fragment"), [
    ([{"a": "g0", "b": "gX", "bandwidth": 1}], r"links\[0\]\.b: unknown device 'gX'"),
    ([{"a": "g0", "b": "g0", "bandwidth": 1}], "two distinct devices"),
    ([{"a": "g0", "b": "g1", "bandwidth": 0}], r"links\[0\]\.bandwidth"),
    ([{"a": "g0", "b": "g1", "bandwidth": 1, "latency": -1}], r"links\[0\]\.latency"),
    ([{"a": "g0", "b": "g1", "bandwidth": 1}], "g0 cannot reach g2"),
    ("nope", "links"),
])
def test_bad_link_lists_are_refused_naming_the_field(links, fragment):
    from dnnpart.io import parse_cluster

    with pytest.raises(FormatError, match=fragment):
        parse_cluster({"devices": [{"name": "g", "count": 3, "kind": "accelerator"}], "links": links})


def brute_force_saf(d, links):
    """Least (sum 1/B, latency, hops) per pair over all simple paths (store-and-forward)."""
    adj = {v: [] for v in range(d)}
    for a, b, bw, lat in links:
        adj[a].append((b, bw, lat))
        adj[b].append((a, bw, lat))
    best = {}

    def dfs(s, v, seen, t, lat, hops):
        key = (t, lat, hops)
        if v != s and key < best.get((s, v), (math.inf,)):
            best[(s, v)] = key
        for w, bw, l2 in adj[v]:
            if w not in seen:
                seen.add(w)
                dfs(s, w, seen, t + 1.0 / bw, lat + l2, hops + 1)
                seen.remove(w)

    for s in range(d):
        dfs(s, s, {s}, 0.0, 0.0, 0)
    return best


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_store_and_forward_equals_brute_force_over_simple_paths(topo):
    """The second routing rule: least per-byte time sum 1/B_e, then latency, then hops; the
    matrices hold 1 / sum 1/B_e, and route_path returns a path carrying that label."""
    d, links = topo
    # dyadic bandwidths (1, 2, 4) keep every sum of 1/B exact, so ties are real ties
    links = [(a, b, {1.0: 1.0, 2.0: 2.0, 3.0: 4.0}[bw], lat) for a, b, bw, lat in links]
    rule = "store-and-forward"
    bw, lat, hops = route(d, [x[0] for x in links], [x[1] for x in links],
                          [x[2] for x in links], [x[3] for x in links], rule=rule)
    best = brute_force_saf(d, links)
    for s, t in itertools.product(range(d), repeat=2):
        if s == t:
            assert bw[s, t] == math.inf and lat[s, t] == 0 and hops[s, t] == 0
        elif (s, t) in best:
            nt, nl, nh = best[(s, t)]
            assert bw[s, t] == pytest.approx(1.0 / nt, rel=1e-12)
            assert (lat[s, t], hops[s, t]) == (nl, nh), (s, t)
            path = route_path(links, d, s, t, rule=rule)
            assert len(path) == nh
            assert sum(1.0 / links[k][2] for k in path) == pytest.approx(nt, rel=1e-12)
        else:
            assert bw[s, t] == 0 and hops[s, t] == -1


def test_store_and_forward_grids_slow_down_with_distance():
    """Equal-link grids: widest path gives every pair the link's bandwidth, store-and-forward
    the link's over the hop count (the setting of paper 4's Table 2)."""
    wide = resolve_cluster("torus2d:x=4,y=4,bw=8").cluster
    saf = resolve_cluster("torus2d:x=4,y=4,bw=8,routing=store-and-forward").cluster
    off = ~np.eye(16, dtype=bool)
    assert set(wide.bandwidth[off].tolist()) == {8.0}
    assert sorted(set(saf.bandwidth[off].tolist())) == [8 / 4, 8 / 3, 8 / 2, 8.0]
    assert saf.routing == "store-and-forward" and wide.routing == "widest"
    with pytest.raises(ValueError, match="routing must be one of"):
        resolve_cluster("mesh2d:x=2,y=2,routing=shortest")


def test_direct_routing_keeps_each_pairs_own_link():
    """The third rule: no forwarding, so a complete topology keeps its drawn bandwidths and a
    grid (non-adjacent pairs without a link) is refused as disconnected."""
    c = resolve_cluster("uniform_dist:n=6,seed=3,routing=direct").cluster
    for x in c.links:
        assert c.bandwidth[x.a, x.b] == c.bandwidth[x.b, x.a] == x.bandwidth
        assert route_path([(y.a, y.b, y.bandwidth, y.latency) for y in c.links], 6, x.a, x.b,
                          rule="direct") == [c.links.index(x)]
    widest = resolve_cluster("uniform_dist:n=6,seed=3").cluster
    assert np.all(widest.bandwidth >= c.bandwidth) and np.any(widest.bandwidth > c.bandwidth)
    with pytest.raises(ValueError, match="disconnected"):
        resolve_cluster("mesh2d:x=3,y=3,routing=direct")


def test_dgx1_machines_on_a_network_and_dgx2():
    """Parmesan's systems: DGX-1 machines whose GPUs keep the cube-mesh inside and meet over
    the network outside, each machine one group (a hierarchy); PARDNN's DGX-2: 16 GPUs, one
    NVSwitch rate between every pair."""
    one = generate("dgx1", {})
    c = generate("dgx1", {"nodes": "3", "inter": "5e9", "inter_latency": "1e-5"})
    assert c.n_devices == 24 and c.group.tolist() == [i // 8 for i in range(24)]
    assert c.is_hierarchical and not one.is_hierarchical
    for m in range(3):
        inside = slice(8 * m, 8 * m + 8)
        assert np.array_equal(c.bandwidth[inside, inside], one.bandwidth)
    across = c.group[:, None] != c.group[None, :]
    assert np.all(c.bandwidth[across] == 5e9) and np.all(c.latency[across] == 1e-5)
    assert len(c.links) == 3 * len(one.links) + (24 * 23 // 2 - 3 * 28)
    routed = generate("dgx1", {"nodes": "2", "routed": "1"})
    assert routed.routed and routed.n_devices == 16
    with pytest.raises(FormatError, match="devices exceed"):
        resolve_cluster("dgx1:nodes=600")
    d = generate("dgx2", {})
    off = ~np.eye(16, dtype=bool)
    assert d.n_devices == 16 and np.all(d.bandwidth[off] == 150e9)
    assert all(dev.memory_bytes == 32e9 for dev in d.devices) and len(d.links) == 120
