"""The op emulator equals a naive twin; its memory tracker equals Eq. 2 recomputed by brute force.

The twin below is written from the semantics in ``docs/simulate.md`` alone: rounds at each
time (finish what ended, then let every idle device take its best ready op), no heaps, no
event queue; Eq. 2 is evaluated term by term at every event time.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.devices import Device
from dnnpart.devices.cluster import Link
from dnnpart.devices.routing import route_path
from dnnpart.devices.topology import cluster_from_links
from dnnpart.graph.core import CONTROL, NORMAL, RESIDUAL, build_graph
from dnnpart.simulate import emulate_makespan, emulate_ops, tensor_bytes, track_memory
from dnnpart.simulate.op_kernels import emulate_kernel


@st.composite
def cases(draw):
    n = draw(st.integers(1, 9))
    d = draw(st.integers(1, 4))
    edges = [(u, v) for u, v in itertools.combinations(range(n), 2) if draw(st.booleans())
             and draw(st.integers(0, 2)) == 0]
    acc = [float(draw(st.integers(0, 4))) for _ in range(n)]
    cls = [draw(st.sampled_from([NORMAL, NORMAL, NORMAL, RESIDUAL, CONTROL, 2])) for _ in range(n)]
    param = [float(draw(st.integers(0, 5))) for _ in range(n)]
    out = [float(draw(st.integers(0, 6))) for _ in range(n)]
    ebytes = [math.nan if draw(st.booleans()) else float(draw(st.integers(0, 8))) for _ in edges]
    ids = draw(st.permutations(range(n)))  # original ids not in topological order
    g = build_graph(
        [ids[i] for i in range(n)], [ids[u] for u, _ in edges], [ids[v] for _, v in edges],
        compute_time=[[10 * t, t] for t in acc], edge_cost=[0.0] * len(edges),
        edge_bytes=ebytes, memory_bytes=[0.0] * n,
        memory_class=cls, param_bytes=param, output_bytes=out,
    )
    devices = [Device(name=f"g{i}", kind="accelerator", speed=draw(st.sampled_from([1.0, 2.0])))
               for i in range(d)]
    links = [Link(a=i, b=i + 1, bandwidth=float(draw(st.sampled_from([1, 2, 4]))),
                  latency=float(draw(st.integers(0, 1)))) for i in range(d - 1)]
    links += [Link(a=a, b=b, bandwidth=float(draw(st.sampled_from([1, 2, 4]))),
                   latency=float(draw(st.integers(0, 1))))
              for a, b in itertools.combinations(range(d), 2) if draw(st.integers(0, 3)) == 0]
    cluster = cluster_from_links(devices, links, time_unit_s=1.0)
    a = [draw(st.integers(0, d - 1)) for _ in range(n)]
    return g, cluster, np.array(a, np.int64), draw(st.booleans())


def links_on_path(c, u, v):
    """Directed physical links of the routed path from u to v (the routing rule's path)."""
    out, at = [], u
    for k in route_path([(x.a, x.b, x.bandwidth, x.latency) for x in c.links], c.n_devices, u, v):
        x = c.links[k]
        out.append((k, at))  # link k entered from `at`
        at = x.b if x.a == at else x.a
    return out


def naive_emulation(g, c, a, contention):
    """Start and finish of every op by rounds over time, from the documented semantics."""
    n = g.n_nodes
    dur = [g.compute_time[v, 1] / c.devices[a[v]].speed for v in range(n)]
    nbytes = {}
    for u in range(n):
        for e in range(g.succ_ptr[u], g.succ_ptr[u + 1]):
            b = g.edge_bytes[e]
            if math.isnan(b):
                b = g.node_output_bytes()[u]
            if g.memory_classes()[u] == CONTROL:
                b = 0.0
            key = (u, int(a[g.succ_idx[e]]))
            nbytes[key] = max(nbytes.get(key, 0.0), b)
    start, finish, arrive = {}, {}, {}
    processed = set()
    running = [None] * c.n_devices
    channel = {}
    t = 0.0
    while len(processed) < n:
        changed = True
        while changed:
            changed = False
            for v in sorted(u for u in start if finish[u] <= t and u not in processed):
                processed.add(v)
                running[a[v]] = None
                changed = True
                seen = []
                for w in g.successors(v).tolist():
                    dv = int(a[w])
                    if dv != a[v] and dv not in seen:
                        seen.append(dv)
                for dv in seen:
                    go = t
                    held = links_on_path(c, int(a[v]), dv) if contention else []
                    for res in held:
                        go = max(go, channel.get(res, -math.inf))
                    arrive[(v, dv)] = go + c.latency[a[v], dv] + nbytes[(v, dv)] / c.bandwidth[a[v], dv]
                    for res in held:
                        channel[res] = arrive[(v, dv)]
            for dev in range(c.n_devices):
                if running[dev] is not None:
                    continue
                best = None
                for v in range(n):
                    if a[v] != dev or v in start:
                        continue
                    preds = g.predecessors(v).tolist()
                    if any(u not in processed for u in preds):
                        continue
                    r = max([0.0] + [finish[u] if a[u] == dev else arrive[(u, dev)] for u in preds])
                    if r <= t and (best is None or (r, v) < best):
                        best = (r, v)
                if best is not None:
                    v = best[1]
                    start[v], finish[v] = t, t + dur[v]
                    running[dev] = v
                    changed = True
        future = [finish[v] for v in start if v not in processed]
        for v in range(n):
            preds = g.predecessors(v).tolist()
            if v not in start and all(u in processed for u in preds):
                future.append(max([0.0] + [finish[u] if a[u] == a[v] else arrive[(u, int(a[v]))]
                                           for u in preds]))
        future = [x for x in future if x > t]
        if not future:
            break
        t = min(future)
    return np.array([start[v] for v in range(n)]), np.array([finish[v] for v in range(n)])


def mem_of(g, v):
    cls = g.memory_classes()[v]
    if cls == RESIDUAL:
        return g.node_param_bytes()[v]
    return g.node_output_bytes()[v] if cls == NORMAL else 0.0


def eq2(g, a, st_, ft, pe, t):
    """Paper 2, Eq. 2 at time t on device pe (each tensor counted once)."""
    cls = g.memory_classes()
    total = sum(mem_of(g, v) for v in range(g.n_nodes) if a[v] == pe and cls[v] == RESIDUAL)
    counted = set()
    for v in range(g.n_nodes):
        if a[v] == pe and cls[v] == NORMAL and st_[v] <= t <= ft[v]:
            counted.add(v)
        if not (a[v] == pe and cls[v] == RESIDUAL) and ft[v] <= t and any(
                a[u] == pe and st_[u] >= t for u in g.successors(v).tolist()):
            counted.add(v)
    return total + sum(mem_of(g, v) for v in counted)


@settings(max_examples=520, deadline=None)
@given(cases())
def test_emulator_equals_naive_twin_and_memory_equals_eq2(case):
    g, c, a, contention = case
    s = emulate_ops(g, c, a, contention=contention)
    st_, ft = naive_emulation(g, c, a, contention)
    np.testing.assert_array_equal(s.start, st_)
    np.testing.assert_array_equal(s.finish, ft)
    assert s.makespan == (ft.max() if g.n_nodes else 0.0)
    times = sorted(set(st_.tolist()) | set(ft.tolist()) | {0.0})
    for pe in range(c.n_devices):
        values = [eq2(g, a, st_, ft, pe, t) for t in times]
        assert s.peak_memory[pe] == max(values)
        curve = s.memory[pe]
        assert [curve.value(t) for t in times] == values
        assert curve.peak == max(values)
    # the fast path agrees
    mk, peaks = emulate_makespan(g, c, a, contention=contention)
    assert mk == s.makespan and np.array_equal(peaks, s.peak_memory)


@settings(max_examples=25, deadline=None)
@given(cases())
def test_emulate_kernel_compiles_like_its_source(case):
    """A compilation check against the kernel's own source (``.py_func``); correctness:
    :func:`test_emulator_equals_naive_twin_and_memory_equals_eq2`."""
    g, c, a, contention = case
    from dnnpart.pricing.loads import node_times
    from dnnpart.simulate import transfer_bytes
    from dnnpart.simulate.ops import contention_resources

    args = (g.succ_ptr.astype(np.int64), g.succ_idx.astype(np.int64),
            g.in_degree().astype(np.int64), a, node_times(g, c, a), transfer_bytes(g),
            c.n_devices, c.bandwidth.copy(), c.latency.copy(), 1.0, contention,
            *contention_resources(g, c, a))
    for x, y in zip(emulate_kernel(*args), emulate_kernel.py_func(*args), strict=True):
        np.testing.assert_array_equal(x, y)


def test_fifo_picks_least_ready_time_then_id():
    # 0 -> 2 (remote, slow link), 1 alone: on device 1 op 1 is ready at 0, op 2 at 1 + 4
    g = build_graph([0, 1, 2], [0], [2], compute_time=[[1, 1], [1, 1], [1, 1]], edge_cost=[0.0],
                    edge_bytes=[4.0], memory_bytes=[0.0] * 3)
    c = cluster_from_links([Device(name=f"g{i}", kind="accelerator") for i in range(2)],
                           [Link(a=0, b=1, bandwidth=1.0)], time_unit_s=1.0)
    s = emulate_ops(g, c, [0, 1, 1])
    assert s.start.tolist() == [0.0, 0.0, 5.0] and s.makespan == 6.0


def test_one_transfer_per_tensor_and_destination_and_contention_serialises():
    # 0 feeds 1, 2 on device 1 (one transfer) and 3 on device 1 via another tensor
    g = build_graph([0, 1, 2, 3, 4], [0, 0, 3], [1, 2, 4], compute_time=[[0, 0]] * 5,
                    edge_cost=[0.0] * 3, edge_bytes=[2.0, 3.0, 2.0], memory_bytes=[0.0] * 5)
    c = cluster_from_links([Device(name=f"g{i}", kind="accelerator") for i in range(2)],
                           [Link(a=0, b=1, bandwidth=1.0)], time_unit_s=1.0)
    ix = g.index_of([0, 1, 2, 3, 4])
    a = np.zeros(5, np.int64)
    a[ix] = [0, 1, 1, 0, 1]
    free = emulate_ops(g, c, a)
    assert g.original_ids[free.transfers[0]].tolist() == [0, 3]  # tensors 0 and 3, once each
    assert free.start[ix[[1, 2, 4]]].tolist() == [3.0, 3.0, 2.0]  # 3 bytes for tensor 0
    busy = emulate_ops(g, c, a, contention=True)
    assert busy.start[ix[[1, 2, 4]]].tolist() == [3.0, 3.0, 5.0]  # tensor 3 waits for the link


def test_contention_is_per_physical_link_of_the_routed_path():
    # line g0 - g1 - g2: g0->g2 and g1->g2 share link 1-2; g0->g1 and g2->g1 share nothing
    # with each other in the same direction
    g = build_graph([0, 1, 2, 3], [0, 1], [2, 3], compute_time=[[0, 0]] * 4,
                    edge_cost=[0.0] * 2, edge_bytes=[4.0, 4.0], memory_bytes=[0.0] * 4)
    c = cluster_from_links([Device(name=f"g{i}", kind="accelerator") for i in range(3)],
                           [Link(a=0, b=1, bandwidth=1.0), Link(a=1, b=2, bandwidth=1.0)],
                           time_unit_s=1.0)
    ix = g.index_of([0, 1, 2, 3])
    a = np.zeros(4, np.int64)
    a[ix] = [0, 1, 2, 2]  # 0 (g0) -> 2 (g2) and 1 (g1) -> 3 (g2)
    free = emulate_ops(g, c, a)
    assert free.start[ix[[2, 3]]].tolist() == [4.0, 4.0]
    busy = emulate_ops(g, c, a, contention=True)
    assert sorted(busy.start[ix[[2, 3]]].tolist()) == [4.0, 8.0]  # link 1-2 is shared
    a[ix] = [0, 2, 1, 1]  # g0 -> g1 and g2 -> g1: different links, no waiting
    assert emulate_ops(g, c, a, contention=True).start[ix[[2, 3]]].tolist() == [4.0, 4.0]


def test_timeline_covers_ops_and_transfers():
    g = build_graph([0, 1], [0], [1], compute_time=[[1, 1], [1, 2]], edge_cost=[0.0],
                    edge_bytes=[1.0], memory_bytes=[0.0, 0.0])
    c = cluster_from_links([Device(name=f"g{i}", kind="accelerator") for i in range(2)],
                           [Link(a=0, b=1, bandwidth=1.0)], time_unit_s=1.0)
    tl = emulate_ops(g, c, [0, 1]).timeline()
    assert tl.resources == ("g0", "g1", "g0->g1")
    assert tl.kind == ("compute", "compute", "transfer")
    assert tl.start.tolist() == [0.0, 2.0, 1.0] and tl.makespan == 4.0


def test_bad_assignments_are_refused():
    g = build_graph([0], [], [], compute_time=[[1, math.inf]], edge_cost=[])
    c = cluster_from_links([Device(name="g0", kind="accelerator")], [], time_unit_s=1.0)
    with pytest.raises(ValueError, match="cannot run on g0"):
        emulate_ops(g, c, [0])
    with pytest.raises(ValueError, match="cluster has 1 devices"):
        emulate_ops(g, c, [3])


def test_track_memory_without_curves_gives_the_same_peaks():
    g = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1, 1]] * 3, edge_cost=[0.0, 0.0],
                    memory_bytes=[5.0, 6.0, 7.0])
    start, finish = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    peaks, _ = track_memory(g, [0, 0, 0], start, finish, 1, curves=False)
    assert peaks.tolist() == [13.0]  # 6 and 7 at t=2 (5 freed when 1 started, at t=1: 5+6)


@settings(max_examples=60, deadline=None)
@given(cases())
def test_memory_sweep_compiles_like_its_source(case):
    """A compilation check against the kernel's own source (``.py_func``); correctness:
    :func:`test_emulator_equals_naive_twin_and_memory_equals_eq2` (Eq. 2 by brute force)."""
    g, c, a, contention = case
    from dnnpart.simulate.memory_kernels import memory_sweep

    s = emulate_ops(g, c, a, contention=contention, memory=False)
    times = np.concatenate((s.start, s.finish))
    _, rank = np.unique(times, return_inverse=True)
    n = g.n_nodes
    args = (g.succ_ptr.astype(np.int64), g.succ_idx.astype(np.int64), np.asarray(a, np.int64),
            tensor_bytes(g), g.memory_classes() == NORMAL, rank[:n].astype(np.int64),
            rank[n:].astype(np.int64), int(rank.max(initial=-1)) + 1, c.n_devices)
    for x, y in zip(memory_sweep(*args), memory_sweep.py_func(*args), strict=True):
        np.testing.assert_array_equal(x, y)
