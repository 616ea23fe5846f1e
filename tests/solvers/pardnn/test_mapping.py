"""LFLAM: the Eq. 1 choice equals brute force; conditions (a)-(c); loop bound; compilation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnpart.solvers.pardnn import kernels as k
from dnnpart.solvers.pardnn.mapping import (
    MappingState,
    eq1_inputs,
    lflam,
    lookahead_pass,
    max_passes,
    prepare,
)
from dnnpart.solvers.pardnn.oracles import random_costs
from dnnpart.solvers.pardnn.slicing import slice_graph


def random_state(rng: np.random.Generator) -> tuple[MappingState, int] | None:
    """A sliced graph with a random part of its secondaries mapped, and one unmapped secondary."""
    c = random_costs(rng, min_n=3, max_n=14, density=float(rng.uniform(0.15, 0.5)))
    kk = int(rng.integers(2, 5))
    s = slice_graph(c, kk)
    state = prepare(c, s)
    for cl in state.order:
        if rng.random() < 0.5:
            k.map_cluster(int(cl), int(rng.integers(0, kk)), s.cl_ptr, s.cl_nodes, state.device,
                          state.cl_device, state.rank, c.comp, state.dev_tree, state.unm_tree)
    left = [int(cl) for cl in state.order if state.cl_device[cl] < 0]
    if not left:
        return None
    return state, left[int(rng.integers(0, len(left)))]


def naive_span(state: MappingState, cl: int) -> tuple[float, float]:
    c, members = state.costs, state.slicing.members(cl)
    first, last = int(members[0]), int(members[-1])
    preds = c.pred_idx[c.pred_ptr[first]:c.pred_ptr[first + 1]]
    succs = c.succ_idx[c.succ_ptr[last]:c.succ_ptr[last + 1]]
    lo = max((state.tl_cl[p] + c.comp[p] for p in preds), default=0.0)
    hi = min((state.tl_cl[v] for v in succs), default=math.inf)
    return lo, hi


def meets_span(state: MappingState, lo: float, hi: float) -> list[int]:
    """Nodes whose expected run [tl_cl, tl_cl + comp) meets the span [lo, hi) (none if empty)."""
    if not lo < hi:
        return []
    tl, comp = state.tl_cl, state.costs.comp
    return [v for v in range(state.costs.n) if tl[v] < hi and tl[v] + comp[v] > lo]


def naive_eq1(state: MappingState, cl: int) -> int:
    """Eq. 1 from its definition, node by node and edge by edge."""
    c, kk = state.costs, state.slicing.k
    lo, hi = naive_span(state, cl)
    inside = set(state.slicing.members(cl).tolist())
    inside_span = meets_span(state, lo, hi)
    loads = [sum(c.comp[v] for v in inside_span if state.device[v] == q) for q in range(kk)]
    comm_with = [0.0] * kk
    src = c.edge_sources()
    for u, v, w in zip(src, c.succ_idx, c.comm, strict=True):
        if (u in inside) != (v in inside):
            other = int(v) if u in inside else int(u)
            if state.device[other] >= 0:
                comm_with[state.device[other]] += w
    scores = [loads[q] + sum(comm_with[r] for r in range(kk) if r != q) for q in range(kk)]
    return min(range(kk), key=lambda q: (scores[q], -comm_with[q], q))


def test_eq1_choice_equals_brute_force_on_1000_random_states() -> None:
    rng = np.random.default_rng(42)
    checked = 0
    while checked < 1000:
        drawn = random_state(rng)
        if drawn is None:
            continue
        state, cl = drawn
        loads, comm_with = eq1_inputs(state, cl)
        expected = naive_eq1(state, cl)
        assert k.eq1_choice(loads, comm_with) == expected
        assert k.eq1_choice.py_func(loads, comm_with) == expected
        checked += 1


def test_lookahead_maps_exactly_the_clusters_meeting_a_condition() -> None:
    """One pass against conditions (a)-(c) evaluated naively, cluster by cluster in order."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        drawn = random_state(rng)
        if drawn is None:
            continue
        state, _ = drawn
        c, s, kk = state.costs, state.slicing, state.slicing.k
        expected = state.device.copy()
        dev_before = state.device.copy()
        for cl in state.order:
            if state.cl_device[cl] >= 0:
                continue
            members = s.members(int(cl))
            inside = set(members.tolist())
            comm_with, total, unm = [0.0] * kk, 0.0, 0.0
            for u, v, w in zip(c.edge_sources(), c.succ_idx, c.comm, strict=True):
                if (u in inside) != (v in inside):
                    other = int(v) if u in inside else int(u)
                    total += w
                    if expected[other] >= 0:
                        comm_with[expected[other]] += w
                    else:
                        unm += w
            p = max(range(kk), key=lambda q: (comm_with[q], -q))
            cp = comm_with[p]
            if cp <= 0 or (not (unm == 0 and cp == total) and not (state.ccr >= 10 and cp > total / kk)):
                continue
            lo, hi = naive_span(state, int(cl))
            in_span = meets_span(state, lo, hi)
            loads = [sum(c.comp[v] for v in in_span if expected[v] == q) for q in range(kk)]
            free = max(0.0, sum(c.comp[v] for v in in_span if expected[v] < 0 and v not in inside))
            w = float(c.comp[members].sum())
            after = loads[p] + w
            need = sum(max(0.0, after - loads[q]) for q in range(kk) if q != p)
            other_max = max(loads[q] for q in range(kk) if q != p)
            if free >= need or after <= other_max or cp > w + loads[p] + free:
                expected[members] = p
        state.device[:] = dev_before
        lookahead_pass(state)
        np.testing.assert_array_equal(state.device, expected)


def test_loop_runs_at_most_ceil_log2_v_passes() -> None:
    assert [max_passes(n) for n in (1, 2, 3, 16, 17, 200_000)] == [1, 1, 2, 4, 5, 18]
    rng = np.random.default_rng(3)
    for _ in range(100):
        c = random_costs(rng, max_n=20)
        _, info = lflam(c, slice_graph(c, 2))
        assert 1 <= info["lookahead_passes"] <= max_passes(c.n)


def test_every_node_mapped_and_primaries_stay_on_their_device() -> None:
    rng = np.random.default_rng(9)
    for _ in range(200):
        c = random_costs(rng, max_n=20)
        kk = int(rng.integers(1, 5))
        s = slice_graph(c, kk)
        device, _ = lflam(c, s)
        assert np.all((device >= 0) & (device < kk))
        for j in range(kk):
            assert np.all(device[s.members(j)] == j)
        for cl in range(kk, s.n_clusters):
            assert len(set(device[s.members(cl)].tolist())) == 1  # clusters are never split


def test_mapping_kernels_compile_like_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compilation check: the mapping pass with every kernel replaced by its own source
    (``.py_func``) maps alike; the naive checks above test what it maps."""
    rng = np.random.default_rng(13)
    cases = [random_costs(rng, max_n=25) for _ in range(30)]
    fast = [lflam(c, slice_graph(c, 3))[0] for c in cases]
    for name in dir(k):
        obj = getattr(k, name)
        if hasattr(obj, "py_func"):
            monkeypatch.setattr(k, name, obj.py_func)
    for c, f in zip(cases, fast, strict=True):
        np.testing.assert_array_equal(lflam(c, slice_graph(c, 3))[0], f)


def test_lflam_takes_a_slicing_with_fewer_clusters_than_devices() -> None:
    """Linear clustering of a chain is one cluster; mapped onto 2 or 3 devices, it is primary 0."""
    from dnnpart.solvers.pardnn.baselines.linear_clustering import linear_clusters
    from dnnpart.solvers.pardnn.inputs import Costs
    from dnnpart.solvers.pardnn.mapping import lflam
    from dnnpart.solvers.pardnn.slicing import Slicing

    chain = Costs.from_edges(4, [0, 1, 2], [1, 2, 3], comp=[1.0] * 4, comm=[1.0] * 3)
    cluster, ptr, nodes, _ = linear_clusters(chain)
    assert len(ptr) - 1 == 1
    for n_devices in (2, 3):
        device, _ = lflam(chain, Slicing(cluster=cluster, cl_ptr=ptr, cl_nodes=nodes, k=n_devices))
        assert device.tolist() == [0, 0, 0, 0]
    # pinned nodes are in no cluster: the clusters' node list is shorter than the graph
    fixed = np.array([-1, -1, -1, 1])
    cluster, ptr, nodes, _ = linear_clusters(chain, free=fixed < 0)
    device, _ = lflam(chain, Slicing(cluster=cluster, cl_ptr=ptr, cl_nodes=nodes, k=2), fixed)
    assert device.tolist() == [0, 0, 0, 1]
