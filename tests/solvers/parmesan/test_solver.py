"""``parmesan`` and its baselines as registered methods of the ``pipeline`` objective."""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any

import numpy as np
import pytest

from dnnpart import Objective, evaluate
from dnnpart.devices.topology import two_level
from dnnpart.errors import UsageError
from dnnpart.plan import Status
from dnnpart.problem import Problem
from dnnpart.simulate import stages_from_plan
from dnnpart.solvers import solve
from dnnpart.solvers.parmesan import solver as parmesan_solver
from dnnpart.solvers.parmesan.baselines import cs_mapping
from dnnpart.solvers.parmesan.pairs import pipeline_pairs
from dnnpart.solvers.parmesan.phase1 import partition_ops, pipeline_stages
from dnnpart.solvers.parmesan.solver import memory_model, plan_from_mapping
from dnnpart.testing import chain_problem
from dnnpart.testing.strategies import seeded_pipeline_problems
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
    """Holds by construction (CS is one of the candidates the simulator chooses from); the
    test guards that construction."""
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
    """The search over every S * R <= D (pairs skipped by their compute bound included) keeps
    the best of the pairs solved one by one."""
    p = chain_problem([1.0, 3.0, 1.0, 2.0, 1.0, 1.0], n_accelerators=4).with_objective(PIPE)
    best = solve(p, "parmesan")
    pairs = pipeline_pairs(4, 6)
    assert len(pairs) == 8 and (3, 1) in pairs and (1, 3) in pairs
    each = [solve(p, "parmesan", stages=s, replicas=r).objective for s, r in pairs]
    assert best.objective == pytest.approx(min(each))
    assert best.stats["devices_used"] == best.stats["stages"] * best.stats["replicas"]


def test_compute_bound_never_exceeds_a_simulated_pair() -> None:
    """Every pair's simulated time is at least its compute bound (what the search prunes by)."""
    from dnnpart.solvers.parmesan.opdag import atomic_dag
    from dnnpart.solvers.parmesan.pairs import ComputeBound

    for problem in seeded_pipeline_problems(6, seed=11):
        _, atom = atomic_dag(problem.graph)
        bound = ComputeBound.of_problem(problem, problem.graph, atom)
        n_dev = len(problem.cluster.accelerators)
        for s_n, r_n in pipeline_pairs(n_dev, int(atom.max()) + 1):
            r = solve(problem, "parmesan", stages=s_n, replicas=r_n)
            if r.plan is not None:
                assert r.objective >= bound.of(s_n, r_n) * (1 - 1e-12), (s_n, r_n)


def test_plan_from_mapping_places_copy_zero_as_primary() -> None:
    p = chain_problem([1.0, 1.0, 1.0], n_accelerators=4)
    plan = plan_from_mapping(p, np.array([0, 0, 1]), np.array([[3, 0], [1, 2]]))
    assert plan.assignment.tolist() == [3, 3, 0]
    assert plan.replica_of.tolist() == [0, 3, 0, 3]
    assert plan.ring(3).tolist() == [3, 1] and plan.ring(0).tolist() == [0, 2]


@pytest.mark.parametrize(("options", "fragment"), [
    ({"stages": 3, "replicas": 2}, "stages * replicas = 6 exceeds the 4"),
    ({"stages": 5}, "stages=5 exceeds the 4 accelerators"),
    ({"paper_only": True, "layer_seed": True}, "paper_only=true contradicts layer_seed=True"),
    ({"paper_only": True, "mapping": "cs"}, "paper_only=true contradicts mapping='cs'"),
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
    if "exceeds" in fragment or "contradicts" in fragment:  # ours, not the schema's check
        with pytest.raises(UsageError):
            solve(p, "parmesan", **options)


def test_too_few_ops_for_the_stages_is_infeasible() -> None:
    """Infeasible by counting: four stages need four ops (the space named is empty)."""
    p = chain_problem([1.0, 1.0], n_accelerators=4).with_objective(PIPE)
    r = solve(p, "parmesan", stages=4, replicas=1)
    assert r.status is Status.INFEASIBLE and r.plan is None and "needs 4 operators" in r.stats["why"]


def test_no_partition_within_memory_is_unknown_not_infeasible() -> None:
    """Phase 1 is a heuristic: when no pair fits, nothing is proven."""
    p = chain_problem([1.0, 1.0], n_accelerators=2, memory_bytes=1.0).with_objective(PIPE)
    big = p.graph.memory_bytes.copy()
    big[:] = 5.0  # every op's weights alone exceed every accelerator
    p = dataclasses.replace(p, graph=dataclasses.replace(p.graph, memory_bytes=big))
    for method in ("parmesan", "parmesan-noclust", "parmesan-norefine", "pipedream"):
        r = solve(p, method)
        assert r.status is Status.UNKNOWN and r.plan is None, method


def test_parmesan_never_simulates_slower_than_pipedream(resnet: Problem) -> None:
    """Holds by construction (PipeDream's partition with the CS mapping is among parmesan's
    candidates); the test guards that construction, it is no evidence for the paper's method."""
    for s_n, r_n in ((4, 2), (8, 1)):
        pd = solve(resnet, "pipedream", stages=s_n, replicas=r_n)
        ours = solve(resnet, "parmesan", stages=s_n, replicas=r_n, time_limit=10)
        assert ours.objective <= pd.objective * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_phase1_memory_is_the_simulators(seed: int) -> None:
    """The memory phase 1 charges a stage replica is what the simulator finds on its device:
    equal on copy 0 without recomputation, never below it with (the stashed inputs count one
    tensor per receiving op, the simulator one per stage) -- inference and training graphs,
    both schedules, every (S, R) that fits the graph."""
    checked = {False: 0, True: 0}
    for problem in (seeded_pipeline_problems(6, seed=500 + seed, training=True)
                    + seeded_pipeline_problems(6, seed=600 + seed, training=False)):
        n_dev = len(problem.cluster.accelerators)
        train = problem.graph.is_training
        for s_n, r_n in pipeline_pairs(n_dev, problem.graph.n_nodes):
            mem = memory_model(problem, 2.0, replicas=r_n, n_devices=s_n * r_n)
            part = partition_ops(problem.graph, s_n, s_n * r_n, replicas=r_n, k=None,
                                 memory=dataclasses.replace(mem, device_memory=math.inf),
                                 refine_steps=0)
            if part.atom_stage is None or part.stage_of is None:
                continue  # fewer atomic ops than stages
            st = pipeline_stages(part.dag, part.atom_stage, r_n, memory=mem)
            device_of = cs_mapping(st)
            ev = evaluate(problem, plan_from_mapping(problem, part.stage_of, device_of))
            assert st.memory_bytes is not None
            for s in range(s_n):
                model = float(st.memory_bytes[s])
                for r in range(r_n):
                    sim = float(ev.memory_bytes[device_of[r, s]])
                    assert sim <= model * (1 + 1e-9) + 1e-9, (s, r, sim, model)
                if not problem.objective.recompute:
                    assert float(ev.memory_bytes[device_of[0, s]]) == pytest.approx(model)
            checked[train] += 1
    assert checked[False] and checked[True]  # both kinds of graph met


_RUN_PARMESAN = parmesan_solver.run_parmesan


def _run_parmesan_kwargs(monkeypatch: pytest.MonkeyPatch, method: str, **options: Any) -> dict:
    """The full keyword set (defaults filled in) ``method`` hands to ``run_parmesan``."""
    seen: dict[str, Any] = {}
    real = _RUN_PARMESAN

    def spy(problem: Problem, **kwargs: Any) -> Any:
        bound = inspect.signature(real).bind(problem, **kwargs)
        bound.apply_defaults()
        seen.update(bound.arguments)
        seen.update(seen.pop("options", {}))
        return real(problem, **kwargs)

    monkeypatch.setattr(parmesan_solver, "run_parmesan", spy)
    p = chain_problem([1.0] * 4, n_accelerators=2).with_objective(PIPE)
    solve(p, method, **options)
    return {k: v for k, v in seen.items() if k not in ("problem", "method", "progress",
                                                          "time_limit")}


@pytest.mark.parametrize(("method", "key"), [("parmesan-noclust", "k"),
                                              ("parmesan-norefine", "refine_steps")])
@pytest.mark.parametrize("paper_only", [False, True])
def test_each_ablation_changes_one_option(monkeypatch: pytest.MonkeyPatch, method: str, key: str,
                                          paper_only: bool) -> None:
    """An ablation runs ``parmesan`` with exactly its one step switched off (the layer seed,
    or the paper-only flow, as ``parmesan`` has it)."""
    ours = _run_parmesan_kwargs(monkeypatch, "parmesan", paper_only=paper_only)
    ablated = _run_parmesan_kwargs(monkeypatch, method, paper_only=paper_only)
    assert {k for k in ours.keys() | ablated.keys() if ours.get(k) != ablated.get(k)} == {key}
    assert ours["layer_seed"] is not paper_only


def test_paper_only_is_one_candidate_and_the_default_names_its_pick(resnet: Problem) -> None:
    paper = solve(resnet, "parmesan", stages=4, replicas=2, paper_only=True, time_limit=10)
    assert paper.status is Status.FEASIBLE and paper.provenance == ""
    assert paper.stats["partition_from"] == "op level" and paper.stats["eq3_layer_level"] is None
    assert paper.stats["mapping_pick"] == f"parmesan-{paper.stats['rule_instantiation']}"
    # one partition, one mapping simulated for the pair
    assert paper.stats["tried"] == (f"S=4,R=2 (op level): {paper.stats['mapping_pick']} "
                                    f"{paper.objective:.6g}")
    ours = solve(resnet, "parmesan", stages=4, replicas=2, time_limit=10)
    words = {"op level": "op-level partition (clustering within the seed's stages",
             "layer path refined": "layer-level seed (PipeDream's partition)",
             "layer path": "layer-level seed (PipeDream's partition) as it is"}
    assert ours.provenance.startswith(words[ours.stats["partition_from"]])
    mapping = {"cs": "consecutive (CS) mapping", "p2p-first": "p2p-first mapping"}.get(
        ours.stats["mapping_pick"], "Parmesan's mapping under Eq.")
    assert mapping in ours.provenance and "(S=4, R=2)" in ours.provenance
    assert ours.to_dict()["provenance"] == ours.provenance


def test_cli_text_and_plan_file_say_which_candidate_won(capsys, tmp_path) -> None:
    import json

    from tests.cli.test_cli import run

    out_plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "solve", "zoo:bert-3-training", "--objective", "pipeline",
                         "--method", "parmesan", "--cluster", "two-level:nodes=2,gpus=2",
                         "--set", "stages=2", "--set", "replicas=2", "--time-limit", "20",
                         "--out", str(out_plan))
    assert code == 0, err
    stored = json.loads(out_plan.read_text())
    provenance = next(v for k, v in _walk(stored) if k == "provenance")
    assert provenance and provenance != "parmesan"
    assert f"plan from {provenance}" in " ".join(out.split())


def _walk(doc: Any) -> Any:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _walk(v)
