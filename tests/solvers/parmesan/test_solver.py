"""``parmesan`` and its baselines as registered methods of the ``pipeline`` objective."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart import Objective, evaluate
from dnnpart.devices.topology import two_level
from dnnpart.plan import Status
from dnnpart.problem import Problem
from dnnpart.simulate import stages_from_plan
from dnnpart.solvers import solve
from dnnpart.solvers.parmesan.solver import divisor_pairs, plan_from_mapping
from dnnpart.testing import chain_problem
from dnnpart.workflow.inputs import load_problem

PIPE = Objective(kind="pipeline", microbatches=4, schedule="1f1b", recompute=True)


@pytest.fixture(scope="module")
def resnet() -> Problem:
    return load_problem("zoo:resnet50-training", cluster=two_level(nodes=2, gpus=4),
                        objective=PIPE)


def test_plan_records_stages_copies_and_rings(resnet: Problem) -> None:
    r = solve(resnet, "parmesan", stages=4, replicas=2, time_limit=20)
    assert r.status is Status.FEASIBLE and r.bound is None
    plan = r.require_plan()
    ev = evaluate(resnet, plan)
    assert r.objective == ev.objective  # the simulated time per sample
    assert r.stats["stages"] == 4 and r.stats["replicas"] == 2
    # Eq. 5 figures beside it: the mapper's bound never exceeds its objective
    assert r.stats["eq5_bound"] <= r.stats["eq5_max_stage_time"] * (1 + 1e-9)
    stages, _ = stages_from_plan(resnet, plan)
    assert len(stages) == 4 and all(len(s.devices) == 2 for s in stages)
    # every accelerator in exactly one stage; each stage's devices in pipeline-copy order
    devs = sorted(d for s in stages for d in s.devices)
    assert devs == sorted(resnet.cluster.accelerators)
    for s in stages:
        assert [int(plan.pipeline_copy[d]) for d in s.devices] == [0, 1]


def test_our_mapping_never_loses_to_cs_on_the_same_partition(resnet: Problem) -> None:
    for s_n, r_n in ((2, 4), (8, 1)):
        ours = solve(resnet, "parmesan-norefine", stages=s_n, replicas=r_n, time_limit=10)
        cs = solve(resnet, "parmesan-norefine", stages=s_n, replicas=r_n, mapping="cs")
        assert ours.objective <= cs.objective * (1 + 1e-12)


def test_pipedream_with_fixed_stages_and_replicas(resnet: Problem) -> None:
    r = solve(resnet, "pipedream", stages=2, replicas=4)
    assert r.stats["mapping_pick"] == "cs" and r.stats["stages"] == 2
    assert r.objective == evaluate(resnet, r.require_plan()).objective
    # the contracted path's partition is among the op-level ones (Eq. 3 no better)
    exact = solve(resnet, "parmesan-noclust", stages=2, replicas=4, mapping="cs")
    assert exact.stats["eq3_max_stage_time"] <= r.stats["eq3_max_stage_time"] * (1 + 1e-9)


def test_searched_pairs_keep_the_best_simulated_time() -> None:
    p = chain_problem([1.0] * 6, n_accelerators=4).with_objective(PIPE)
    best = solve(p, "parmesan")
    each = [solve(p, "parmesan", stages=s, replicas=r).objective for s, r in divisor_pairs(4)]
    assert best.objective == pytest.approx(min(each))


def test_plan_from_mapping_places_copy_zero_as_primary() -> None:
    p = chain_problem([1.0, 1.0, 1.0], n_accelerators=4)
    plan = plan_from_mapping(p, np.array([0, 0, 1]), np.array([[3, 0], [1, 2]]))
    assert plan.assignment.tolist() == [3, 3, 0]
    assert plan.replica_of.tolist() == [0, 3, 0, 3]
    assert plan.ring(3).tolist() == [3, 1] and plan.ring(0).tolist() == [0, 2]


@pytest.mark.parametrize(("options", "fragment"), [
    ({"stages": 3, "replicas": 2}, "stages * replicas = 6"),
    ({"stages": 3}, "stages=3 does not divide"),
    ({"mapping": "best"}, "option mapping"),
    ({"instantiation": "eq9"}, "option instantiation"),
    ({"k": 0}, "option k"),
    ({"gap": 2.0}, "option gap"),
    ({"refine_steps": -1}, "option refine_steps"),
    ({"colour": 1}, "unknown option"),
])
def test_bad_options_name_the_option(options: dict, fragment: str) -> None:
    p = chain_problem([1.0] * 4, n_accelerators=4).with_objective(PIPE)
    with pytest.raises(ValueError, match=fragment.replace("*", r"\*")):
        solve(p, "parmesan", **options)


def test_too_few_ops_for_the_stages_is_infeasible() -> None:
    p = chain_problem([1.0, 1.0], n_accelerators=4).with_objective(PIPE)
    r = solve(p, "parmesan", stages=4, replicas=1)
    assert r.status is Status.INFEASIBLE and r.plan is None


def test_parmesan_never_simulates_slower_than_pipedream(resnet: Problem) -> None:
    for s_n, r_n in ((4, 2), (8, 1)):
        pd = solve(resnet, "pipedream", stages=s_n, replicas=r_n)
        ours = solve(resnet, "parmesan", stages=s_n, replicas=r_n, time_limit=10)
        assert ours.objective <= pd.objective * (1 + 1e-12)
