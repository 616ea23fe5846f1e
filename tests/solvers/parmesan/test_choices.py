"""Tests of the choices docs/parmesan.md documents where the paper is silent."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnpart.solvers.parmesan import PipelineStages, Topology, lower_bound_p2p, mapping_stage_times
from dnnpart.solvers.parmesan.cost import build_terms
from dnnpart.solvers.parmesan.opdag import MemoryModel, atomic_dag
from dnnpart.solvers.parmesan.partition_dp import partition_dp
from dnnpart.solvers.parmesan.phase1 import partition_ops
from dnnpart.solvers.parmesan.search import search_order
from dnnpart.testing.strategies import RngChooser, graph_from_dag, training_dag

from .instances import random_instance


def test_latency_once_per_transfer_and_per_ring_step() -> None:
    st = PipelineStages(compute=[0, 0], param_bytes=[8, 0], comm_bytes=[[0, 4], [0, 0]],
                        replicas=2)
    bw = np.full((4, 4), 2.0)
    lat = np.full((4, 4), 0.5)
    topo = Topology.from_matrices(bw, lat)
    dev = [[0, 1], [2, 3]]
    # Eq. 6: 0.5 + 4 / 2 on both ends of the one transfer per copy
    assert mapping_stage_times(st, topo, dev, "p2p").tolist() == [[2.5, 2.5], [2.5, 2.5]]
    # Eq. 7, R = 2: 2 (R - 1) steps of (0.5 + 8 / 2 / 2): 2 * 2.5 = 5 for stage 0, none for 1
    assert mapping_stage_times(st, topo, dev, "allreduce").tolist() == [[5.0, 0.0], [5.0, 0.0]]
    # the paper's full form adds both
    assert mapping_stage_times(st, topo, dev, "full").tolist() == [[7.5, 2.5], [7.5, 2.5]]


def test_eq8_assignment_equals_sorting_rule_without_latency() -> None:
    """Without latency the paper's sorting rule (largest M on the widest link) is what the
    exact assignment computes."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = int(rng.integers(2, 6))
        comm = np.triu(rng.uniform(0, 5, (s, s)), 1) * (rng.random((s, s)) < 0.7)
        st = PipelineStages(compute=np.zeros(s), param_bytes=np.zeros(s), comm_bytes=comm)
        bw = rng.uniform(1, 10, (s, s))
        bw = bw + bw.T
        topo = Topology.from_matrices(bw)
        best = 0.0
        for v in range(s):
            sizes = sorted([comm[v, t] + comm[t, v] for t in range(s)
                            if comm[v, t] > 0 or comm[t, v] > 0], reverse=True)
            if not sizes:
                continue
            per_d = []
            for d in range(s):
                widths = sorted([bw[d, e] for e in range(s) if e != d], reverse=True)
                per_d.append(sum(m / w for m, w in zip(sizes, widths, strict=False)))
            best = max(best, min(per_d))
        assert lower_bound_p2p(st, topo) == pytest.approx(best)


def test_search_order_completes_neighbourhoods() -> None:
    stages, _ = random_instance(11)
    for kind in ("p2p", "allreduce"):
        terms = build_terms(stages, kind)  # type: ignore[arg-type]
        order = search_order(terms, stages.n_devices).tolist()
        assert sorted(order) == list(range(stages.n_devices))
        nbr: dict[int, set[int]] = {v: set() for v in range(stages.n_devices)}
        for a, b in zip(terms.a.tolist(), terms.b.tolist(), strict=True):
            nbr[a].add(b)
            nbr[b].add(a)
        placed: set[int] = set()
        for v in order:
            # a vertex with a placed neighbour is chosen whenever one exists (connected
            # pieces are completed before a new one starts)
            frontier = {u for u in range(stages.n_devices) if u not in placed and nbr[u] & placed}
            if frontier:
                assert v in frontier
            placed.add(v)


def test_ring_order_is_closed_before_the_next_ring() -> None:
    st = PipelineStages(compute=[0, 0], param_bytes=[5, 9], comm_bytes=np.zeros((2, 2)),
                        replicas=4)
    order = search_order(build_terms(st, "allreduce"), 8).tolist()
    # the heavier ring (stage 1: vertices 1, 3, 5, 7) first, all of it
    assert sorted(order[:4]) == [1, 3, 5, 7]


def test_memory_test_is_per_replica() -> None:
    """A stage whose parameters alone exceed one device cannot be saved by replicas (the
    paper's ``mem <= (d - d') DM`` would accept it)."""
    from dnnpart.graph.core import build_graph

    g = build_graph([0, 1], [0], [1], compute_time=[[1.0, 1.0], [1.0, 1.0]], edge_cost=[0.0],
                    memory_bytes=[0.0, 0.0], param_bytes=[10.0, 1.0])
    dag, _ = atomic_dag(g)
    mem = MemoryModel(device_memory=30.0, optimizer_states=2.0)  # op 0 needs 4 * 10 = 40
    assert math.isinf(partition_dp(dag, 1, 4, memory=mem).objective)
    assert math.isinf(partition_dp(dag, 2, 4, memory=mem).objective)
    ok = MemoryModel(device_memory=40.0)
    assert partition_dp(dag, 2, 4, memory=ok).objective == pytest.approx(0.5)


def test_in_flight_activations_follow_the_schedule() -> None:
    m = MemoryModel(micro_batches=4)
    assert [m.in_flight(j, 3) for j in range(3)] == [3, 2, 1]
    g = MemoryModel(micro_batches=4, schedule="gpipe")
    assert [g.in_flight(j, 3) for j in range(3)] == [4, 4, 4]
    r = MemoryModel(micro_batches=4, recompute=True)
    # recomputation keeps k stage inputs and one set of activations
    assert float(r.stage_memory(1.0, 10.0, 2.0, 0, 4)) == pytest.approx(4 + 4 * 2 + 10)


def test_training_graph_keeps_forward_and_backward_together() -> None:
    for seed in range(10):
        c = RngChooser(np.random.default_rng(seed))
        spec, backward, classes = training_dag(c, max_forward=4, orphan_prob=0.0)
        g = graph_from_dag(c, spec, unsupported_prob=0.0, backward=backward,
                           color_class=classes)
        res = partition_ops(g, 2, 2, k=None)
        if res.stage_of is None:
            continue
        for cls in set(g.color_class.tolist()) - {-1}:
            members = np.nonzero(g.color_class == cls)[0]
            assert len(set(res.stage_of[members].tolist())) == 1


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(ValueError, match="comm_bytes"):
        PipelineStages(compute=[1, 1], param_bytes=[0, 0], comm_bytes=[[1, 0], [0, 0]])
    with pytest.raises(ValueError, match="param_bytes"):
        PipelineStages(compute=[1, 1], param_bytes=[0, -1], comm_bytes=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="replicas"):
        PipelineStages(compute=[1], param_bytes=[0], comm_bytes=[[0]], replicas=0)
    with pytest.raises(ValueError, match="bandwidth"):
        Topology.from_matrices([[0, 1, 2]])
    with pytest.raises(ValueError, match="latency"):
        Topology.from_matrices([[0, 1], [1, 0]], [[0, np.nan], [0, 0]])
    from dnnpart.solvers.parmesan import map_stages

    st = PipelineStages(compute=[1, 1], param_bytes=[0, 0], comm_bytes=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="devices"):
        map_stages(st, Topology.from_matrices(np.ones((3, 3))))


def test_deterministic_cut_is_reproducible() -> None:
    from dnnpart.solvers.parmesan import map_stages

    stages, topo = random_instance(7)
    a = map_stages(stages, topo, instantiation="p2p", deterministic=True, node_limit=3)
    b = map_stages(stages, topo, instantiation="p2p", deterministic=True, node_limit=3)
    assert a.objective == b.objective and a.bound == b.bound and a.status == b.status
    assert (a.device_of is None and b.device_of is None) or np.array_equal(a.device_of,
                                                                          b.device_of)
