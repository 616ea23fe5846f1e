"""Replicated stages in the evaluator (paper 1, appendix C.2).

A stage on ``r`` devices: each device's load is the stage's load on it divided by ``r``, with
the all-reduce ``(r - 1) * W / (r * B)`` added (overlap "none") or max-ed (C.1) for training
graphs; each replica holds the whole stage in memory.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnpart import Objective, Plan, Problem, evaluate
from dnnpart.devices import reference_cluster, two_level_cluster
from dnnpart.graph.training import add_backward_pass
from dnnpart.testing import chain_graph
from dnnpart.testing.strategies import DrawChooser, build_problem, random_assignment


def _random_replicas(draw: st.DrawFn, problem: Problem, assignment: np.ndarray) -> list[int]:
    kinds = problem.cluster.kinds()
    used = sorted(set(assignment.tolist()))
    out = []
    for j in range(problem.cluster.n_devices):
        options = [j] if j in used else [j] + [p for p in used if kinds[p] == kinds[j]]
        out.append(draw(st.sampled_from(options)))
    return out


@given(st.data())
def test_identity_replication_changes_nothing(data: st.DataObject) -> None:
    c = DrawChooser(data.draw)
    problem = build_problem(c, heterogeneous_prob=0.3, random_objective=True)
    a = np.asarray(random_assignment(c, problem), np.int32)
    plain = evaluate(problem, Plan(assignment=a))
    same = evaluate(problem, Plan(assignment=a, replica_of=np.arange(problem.cluster.n_devices)))
    assert same.objective == plain.objective
    np.testing.assert_array_equal(same.load, plain.load)
    np.testing.assert_array_equal(same.memory_bytes, plain.memory_bytes)
    assert same.violations == plain.violations


@given(st.data(), st.sampled_from([1e3, 1e4, 1e9]))
def test_each_replica_runs_its_share_of_the_stage(data: st.DataObject, bandwidth: float) -> None:
    c = DrawChooser(data.draw)
    base = build_problem(c, heterogeneous_prob=0.5, random_objective=True)
    # the same devices (speeds, host links) with a slow uniform link between them
    d = base.cluster.n_devices
    links = np.full((d, d), bandwidth)
    np.fill_diagonal(links, math.inf)
    cluster = type(base.cluster)(devices=base.cluster.devices,
                                 host_link_scale=base.cluster.host_link_scale, bandwidth=links)
    problem = Problem(graph=base.graph, cluster=cluster, objective=base.objective)
    a = np.asarray(random_assignment(c, problem), np.int32)
    replica_of = _random_replicas(data.draw, problem, a)
    ev = evaluate(problem, Plan(assignment=a, replica_of=replica_of))
    plain = evaluate(problem, Plan(assignment=a))
    counts = np.bincount(replica_of, minlength=d)
    for j in range(d):
        p = replica_of[j]
        r = counts[p]
        if r == 1:
            assert ev.load[j] == plain.load[j]
            continue
        # the stage alone on device j, scored by the plain evaluator
        alone = evaluate(problem, Plan(assignment=np.where(a == p, j, a)))
        w = problem.graph.memory_bytes[a == p].sum()
        sync = (r - 1) * w / (r * bandwidth) / cluster.time_unit_s if problem.graph.is_training else 0.0
        share = alone.load[j] / r
        expected = share + sync if problem.objective.overlap == "none" else max(share, sync)
        assert ev.load[j] == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert ev.memory_bytes[j] == plain.memory_bytes[p]
    if problem.objective.training == "pipedream" or not problem.graph.is_training:
        assert ev.objective == pytest.approx(ev.load.max(), rel=1e-12)


def _training(memory: float = 1e6, overlap: str = "none", training: str = "pipedream") -> Problem:
    g = add_backward_pass(chain_graph(2, acc_time=[6.0, 1.0], memory_bytes=memory),
                          backward_factor=1.0)
    c = reference_cluster(n_accelerators=3, n_cpus=1, memory_bytes=1e7, host_bandwidth=2e9)
    return Problem(graph=g, cluster=c, objective=Objective(overlap=overlap, training=training))


def _stage0_on_two(problem: Problem) -> Plan:
    # forward 0 and backward 0 (ids 0 and 3) on acc0 with acc1 as its replica; node 1 on acc2
    return Plan(assignment=[0, 2, 2, 0], replica_of=[0, 0, 2, 3])


def test_share_plus_allreduce() -> None:
    p = _training()
    ev = evaluate(p, _stage0_on_two(p))
    # stage {0, 0'}: 12 compute, W = 2 MB, B = 1 GB/s -> share 6 + 1/2 * 2e6 / 1e9 s = 1 ms
    assert ev.load.tolist() == pytest.approx([7.0, 7.0, 2.0, 0.0])
    assert ev.allreduce.tolist() == pytest.approx([1.0, 1.0, 0.0, 0.0])
    assert ev.objective == pytest.approx(7.0)
    assert ev.memory_bytes.tolist() == [2e6, 2e6, 2e6, 0.0]
    assert ev.to_dict(p)["devices"][1]["allreduce"] == pytest.approx(1.0)


def test_overlap_takes_the_larger_term() -> None:
    p = _training(memory=1e7, overlap="compute-comm")   # sync 10 ms > share 6 ms
    assert evaluate(p, _stage0_on_two(p)).objective == pytest.approx(10.0)


def test_gpipe_puts_the_allreduce_on_the_backward_part() -> None:
    p = _training(training="gpipe")
    ev = evaluate(p, _stage0_on_two(p))
    assert ev.forward_load[0] == pytest.approx(3.0)
    assert ev.backward_load[0] == pytest.approx(4.0)
    assert ev.objective == pytest.approx(3.0 + 4.0)


def test_inference_replicas_need_no_sync() -> None:
    p = Problem(graph=chain_graph(2, acc_time=[6.0, 1.0], memory_bytes=1e9),
                cluster=reference_cluster(n_accelerators=3, n_cpus=0, memory_bytes=1e10))
    ev = evaluate(p, Plan(assignment=[0, 2], replica_of=[0, 0, 2]))
    assert ev.load.tolist() == [3.0, 3.0, 1.0]


def test_each_replica_needs_the_stage_memory() -> None:
    p = _training(memory=3e6)   # stage 6 MB, whole graph 12 MB, capacity 10 MB
    ev = evaluate(p, Plan(assignment=[0, 2, 2, 0], replica_of=[0, 0, 2, 3]))
    assert ev.feasible
    big = Problem(graph=p.graph, cluster=reference_cluster(
        n_accelerators=3, n_cpus=1, memory_bytes=5e6, host_bandwidth=2e9))
    ev = evaluate(big, Plan(assignment=[0, 2, 2, 0], replica_of=[0, 0, 2, 3]))
    assert not ev.feasible
    assert any("acc1: memory" in v for v in ev.violations)


def test_the_slowest_link_between_replicas_counts() -> None:
    g = add_backward_pass(chain_graph(1, acc_time=[4.0], memory_bytes=1e6), backward_factor=1.0)
    c = two_level_cluster(n_groups=2, accelerators_per_group=2, memory_bytes=1e9,
                          intra_bandwidth=1e10, inter_bandwidth=1e9)
    p = Problem(graph=g, cluster=c)
    inside = evaluate(p, Plan(assignment=[0, 0], replica_of=[0, 0, 2, 3]))
    across = evaluate(p, Plan(assignment=[0, 0], replica_of=[0, 1, 0, 3]))
    assert inside.objective == pytest.approx(4.0 + 0.5 * 2e6 / 1e10 * 1e3)
    assert across.objective == pytest.approx(4.0 + 0.5 * 2e6 / 1e9 * 1e3)


def test_a_slower_replica_sets_the_pace() -> None:
    from dnnpart.devices import ACCELERATOR, Cluster, Device

    devices = (Device(name="fast", kind=ACCELERATOR, speed=2.0),
               Device(name="slow", kind=ACCELERATOR, speed=1.0))
    p = Problem(graph=chain_graph(1, acc_time=[4.0]), cluster=Cluster(devices=devices))
    ev = evaluate(p, Plan(assignment=[0], replica_of=[0, 0]))
    assert ev.load.tolist() == [1.0, 2.0]


def test_malformed_replication_is_refused() -> None:
    p = _training()
    with pytest.raises(ValueError, match="also assigned nodes"):
        Plan(assignment=[0, 1, 1, 0], replica_of=[0, 0, 2, 3])
    with pytest.raises(ValueError, match="not at another replica"):
        Plan(assignment=[0, 0, 0, 0], replica_of=[0, 0, 1, 3])
    with pytest.raises(ValueError, match="entries"):
        evaluate(p, Plan(assignment=[0, 0, 0, 0], replica_of=[0, 0, 2]))
    with pytest.raises(ValueError, match="same kind"):
        evaluate(p, Plan(assignment=[0, 0, 0, 0], replica_of=[0, 1, 2, 0]))
    with pytest.raises(ValueError, match="latency"):
        evaluate(p.with_objective(Objective(kind="latency")), _stage0_on_two(p))
