"""Phase-2 mapping: exact against a vectorised brute force, bounds, Fig. 2, options."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnpart.plan import Status
from dnnpart.solvers.parmesan import (
    PipelineStages,
    Topology,
    choose_instantiation,
    cs_mapping,
    lower_bound,
    map_stages,
    mapping_stage_times,
    max_stage_time,
    p2p_first_mapping,
    total_p2p_time,
)
from dnnpart.solvers.parmesan.kernels import STATUS_FOUND, STATUS_INFEASIBLE
from dnnpart.solvers.parmesan.search import build_search_space, feasible

from .brute import all_objectives, brute_force_mapping
from .instances import random_instance

EPS = 1e-3
N_FAST = 30  # per instantiation in the default run
N_ALL = 200  # per instantiation in total (the rest is -m slow)
SEEDS = [pytest.param(i, marks=pytest.mark.slow) if i >= N_FAST else i for i in range(N_ALL)]


def _check_against_brute(seed: int, kind: str) -> None:
    stages, topo = random_instance(seed)
    opt, _ = brute_force_mapping(stages, topo, kind)  # type: ignore[arg-type]
    res = map_stages(stages, topo, instantiation=kind)  # type: ignore[arg-type]
    lb = lower_bound(stages, topo, kind)  # type: ignore[arg-type]
    if not math.isfinite(opt):
        assert res.status == Status.INFEASIBLE and res.device_of is None
        return
    assert lb <= opt * (1 + 1e-12) + 1e-12  # Eq. 8 / 9 never exceed the optimum
    strong = lower_bound(stages, topo, kind, matching=True)  # type: ignore[arg-type]
    assert lb <= strong <= opt * (1 + 1e-12) + 1e-12
    assert res.status == Status.OPTIMAL
    assert res.device_of is not None
    # the reported objective is the evaluator's value of the returned mapping
    assert res.objective == pytest.approx(max_stage_time(stages, topo, res.device_of, kind))
    assert opt - 1e-9 <= res.objective <= opt * (1 + EPS) + 1e-12
    assert res.bound <= opt + 1e-9


@pytest.mark.parametrize("seed", SEEDS)
def test_eq6_mapping_equals_brute_force(seed: int) -> None:
    _check_against_brute(seed, "p2p")


@pytest.mark.parametrize("seed", SEEDS)
def test_eq7_mapping_equals_brute_force(seed: int) -> None:
    _check_against_brute(seed, "allreduce")


def test_brute_force_agrees_with_the_loop_evaluator() -> None:
    for seed in range(5):
        stages, topo = random_instance(seed, max_devices=6)
        for kind in ("p2p", "allreduce"):
            vals, perms = all_objectives(stages, topo, kind)  # type: ignore[arg-type]
            for i in range(0, len(perms), max(1, len(perms) // 7)):
                m = perms[i].reshape(stages.replicas, stages.n_stages)
                assert vals[i] == pytest.approx(max_stage_time(stages, topo, m, kind))


def _fig2() -> tuple[PipelineStages, Topology]:
    comm = np.zeros((4, 4))
    comm[0, 1], comm[1, 2], comm[2, 3] = 1.0, 3.0, 1.0
    stages = PipelineStages(compute=np.zeros(4), param_bytes=np.zeros(4), comm_bytes=comm)
    intra, inter = 100.0, 10.0
    bw = np.full((4, 4), inter)
    bw[:2, :2] = intra
    bw[2:, 2:] = intra
    return stages, Topology.from_matrices(bw)


def test_fig2_hierarchy() -> None:
    """Paper, Fig. 2: 2 nodes x 2 devices (intra 100, inter 10 bytes/s), chain with boundary
    sizes 1, 3, 1 bytes and no compute: CS gives 0.31 s / 0.32 s, the optimum 0.13 s / 0.23 s."""
    stages, topo = _fig2()
    assert choose_instantiation(stages) == "p2p"
    res = map_stages(stages, topo)
    assert res.device_of is not None and res.status == Status.OPTIMAL
    dev = res.device_of[0]
    assert dev[1] // 2 == dev[2] // 2  # s1 and s2 co-located on one node
    assert res.objective == pytest.approx(0.13)
    cs = cs_mapping(stages)
    assert max_stage_time(stages, topo, cs, "p2p") == pytest.approx(0.31)
    assert total_p2p_time(stages, topo, res.device_of) == pytest.approx(0.23)
    assert total_p2p_time(stages, topo, cs) == pytest.approx(0.32)
    assert total_p2p_time(stages, topo, cs) / total_p2p_time(stages, topo, res.device_of) \
        == pytest.approx(1.39, abs=0.01)


def test_kernel_compiles_like_its_source() -> None:
    """The compiled kernel and its own source run as Python (``.py_func``: a compilation
    check) answer alike at the optimum and just below; every target in ``test_dfs_twin``."""
    for seed in range(6):
        stages, topo = random_instance(seed, max_devices=6)
        for kind in ("p2p", "allreduce"):
            space = build_search_space(stages, topo, kind)  # type: ignore[arg-type]
            opt, _ = brute_force_mapping(stages, topo, kind)  # type: ignore[arg-type]
            if not math.isfinite(opt):
                continue
            for t in (opt * 0.999, opt):
                a = feasible(space, t)
                b = feasible(space, t, python=True)
                assert a[0] == b[0]
                assert a[0] == (STATUS_FOUND if t >= opt else STATUS_INFEASIBLE)
                if a[1] is not None and b[1] is not None:
                    assert np.array_equal(a[1], b[1])


def test_symmetry_breaking_keeps_the_optimum() -> None:
    for seed in range(40):
        stages, topo = random_instance(seed, max_devices=8)
        if stages.replicas == 1:
            continue
        for kind in ("p2p", "allreduce"):
            a = map_stages(stages, topo, instantiation=kind)  # type: ignore[arg-type]
            b = map_stages(stages, topo, instantiation=kind, symmetry=False)  # type: ignore[arg-type]
            if math.isfinite(a.objective) or math.isfinite(b.objective):
                assert a.objective == pytest.approx(b.objective, rel=2 * EPS)


def test_threads_give_the_same_answer() -> None:
    stages, topo = random_instance(3)
    for kind in ("p2p", "allreduce"):
        one = map_stages(stages, topo, instantiation=kind, threads=1)  # type: ignore[arg-type]
        two = map_stages(stages, topo, instantiation=kind, threads=2, deterministic=True)  # type: ignore[arg-type]
        assert one.status == two.status
        assert one.objective == pytest.approx(two.objective, rel=2 * EPS)


def test_cut_search_reports_an_interval_holding_the_optimum() -> None:
    for seed in range(20):
        stages, topo = random_instance(seed)
        opt, _ = brute_force_mapping(stages, topo, "p2p")
        if not math.isfinite(opt):
            continue
        res = map_stages(stages, topo, instantiation="p2p", deterministic=True, node_limit=2)
        assert res.bound <= opt + 1e-9 <= res.objective + 2e-9
        if res.status == Status.FEASIBLE:
            assert res.gap == pytest.approx((res.objective - res.bound) / res.objective)


def test_no_route_is_infeasible() -> None:
    stages = PipelineStages(compute=[1, 1], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]])
    res = map_stages(stages, Topology.from_matrices(np.zeros((2, 2))))
    assert res.status == Status.INFEASIBLE and res.device_of is None


def test_instantiation_rule_and_rings() -> None:
    stages = PipelineStages(compute=[0, 0], param_bytes=[6, 6], comm_bytes=[[0, 5], [0, 0]],
                            replicas=2)
    # all-reduce bytes 2*(2-1)/2*(6+6) = 12 > 5
    assert choose_instantiation(stages) == "allreduce"
    light = PipelineStages(compute=[0, 0], param_bytes=[2, 2], comm_bytes=[[0, 5], [0, 0]],
                           replicas=2)
    assert choose_instantiation(light) == "p2p"
    rng = np.random.default_rng(0)
    bw = rng.uniform(1, 10, (4, 4))
    bw = bw + bw.T
    res = map_stages(stages, Topology.from_matrices(bw))
    assert res.instantiation == "allreduce" and res.rings is not None
    assert res.device_of is not None
    assert np.array_equal(res.rings, res.device_of.T)
    times = mapping_stage_times(stages, Topology.from_matrices(bw), res.device_of, "allreduce")
    assert np.allclose(times[0], times[1])  # one ring time per stage, shared by its replicas


def test_baselines_are_bijections() -> None:
    stages = PipelineStages(compute=[0] * 3, param_bytes=[0] * 3, comm_bytes=np.zeros((3, 3)),
                            replicas=2)
    for m in (cs_mapping(stages), p2p_first_mapping(stages)):
        assert sorted(m.reshape(-1).tolist()) == list(range(6))
    assert cs_mapping(stages)[:, 0].tolist() == [0, 1]  # replicas of a stage together
    assert p2p_first_mapping(stages)[0].tolist() == [0, 1, 2]  # a copy on consecutive devices


def test_fig2_on_the_two_level_generator() -> None:
    """The same figures on the topologies layer's ``two-level`` generator (routed matrices)."""
    from dnnpart.devices.topology import two_level

    stages, _ = _fig2()
    topo = Topology.from_cluster(two_level(nodes=2, gpus=2, intra=100.0, inter=10.0))
    res = map_stages(stages, topo)
    assert res.objective == pytest.approx(0.13)
    assert max_stage_time(stages, topo, cs_mapping(stages), "p2p") == pytest.approx(0.31)
