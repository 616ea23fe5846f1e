"""PARDNN plans through the CLI: placement-text export, ``run`` refusing them, heuristic I's report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli.test_cli import run

GRAPH = "zoo:resnet18-training"


@pytest.fixture()
def pardnn_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    plan = str(tmp_path / "plan.json")
    code, _, _ = run(capsys, "-q", "solve", GRAPH, "--objective", "makespan", "-m", "pardnn",
                     "--cluster", "4xV100", "-o", plan)
    assert code == 0
    return plan


def test_placement_text_names_every_node_with_its_plan_device(capsys, tmp_path, pardnn_plan):
    from dnnpart.io import read_plan
    from dnnpart.workflow import load_problem

    out = tmp_path / "placement.txt"
    code, _, _ = run(capsys, "export", pardnn_plan, "--format", "placement-text", "--graph", GRAPH,
                     "-o", str(out))
    assert code == 0
    from dnnpart.io.plan_files import plan_cluster

    problem = load_problem(GRAPH, cluster=plan_cluster(pardnn_plan))
    plan = read_plan(pardnn_plan, problem)
    lines = out.read_text().splitlines()
    assert len(lines) == problem.graph.n_nodes
    names = [d.name for d in problem.cluster.devices]
    by_name = dict(line.split(" ") for line in lines)
    assert len(by_name) == problem.graph.n_nodes  # every line names one node
    for v in range(problem.graph.n_nodes):
        assert by_name[problem.graph.names[v]] == names[plan.assignment[v]]


def test_placement_text_without_graph_or_model_is_one_error_line(capsys, tmp_path, pardnn_plan):
    data = json.loads(Path(pardnn_plan).read_text())
    del data["graph"]  # a plan written elsewhere (or before plans named their graph)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    code, _, err = run(capsys, "export", str(bare), "--format", "placement-text", "-o",
                       str(tmp_path / "x.txt"))
    assert code == 2 and err.strip().startswith("error:") and "--graph" in err
    assert len(err.strip().splitlines()) == 1


def test_placement_text_follows_the_graph_a_solve_plan_names(capsys, tmp_path, pardnn_plan):
    code, _, err = run(capsys, "export", pardnn_plan, "--format", "placement-text", "-o",
                       str(tmp_path / "x.txt"))
    from dnnpart.workflow import load_problem

    assert code == 0, err
    assert len((tmp_path / "x.txt").read_text().splitlines()) == load_problem(GRAPH).graph.n_nodes


def test_run_refuses_an_op_level_plan_with_the_reason(capsys, pardnn_plan):
    code, _, err = run(capsys, "run", pardnn_plan)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "pardnn" in err and "op-level" in err


def test_solve_text_reports_heuristic_one(capsys, tmp_path):
    from dnnpart.cost.clusters import resolve_cluster
    from dnnpart.io.cluster_file import cluster_to_dict

    data = cluster_to_dict(resolve_cluster("4xV100").cluster)
    for dev in data["devices"]:
        dev["memory_bytes"] = 1e5  # nothing fits: heuristic I must fail and say where
    path = tmp_path / "tight.json"
    path.write_text(json.dumps(data))
    plan = tmp_path / "plan.json"
    code, out, err = run(capsys, "solve", GRAPH, "--objective", "makespan", "-m", "pardnn",
                         "--cluster", str(path), "--set", "memory_heuristic=1", "-o", str(plan))
    assert code == 1  # the plan violates memory: no feasible plan
    assert "memory heuristic I failed:" in out and "overflows by" in out and "bytes at t=" in out
    # why, naming the binding constraint; and no plan that `run` would refuse
    why = [line for line in (out + err).splitlines() if line.startswith("why:")]
    assert len(why) == 1 and "needs" in why[0] and "largest accelerator has 0.1 MB" in why[0]
    assert not plan.exists() and "next: dnnpart run" not in out + err
    assert f"no plan written to {plan}" in " ".join((out + err).split())
    code, out, _ = run(capsys, "-q", "solve", GRAPH, "--objective", "makespan", "-m", "pardnn",
                       "--cluster", str(path), "--json")
    assert code == 1 and json.loads(out)["why"] == why[0].removeprefix("why: ")


def _tight_cluster(tmp_path: Path, memory_bytes: float) -> Path:
    from dnnpart.cost.clusters import resolve_cluster
    from dnnpart.io.cluster_file import cluster_to_dict

    data = cluster_to_dict(resolve_cluster("2xA100").cluster)
    for dev in data["devices"]:
        dev["memory_bytes"] = memory_bytes
    path = tmp_path / "tight.json"
    path.write_text(json.dumps(data))
    return path


def test_plan_under_a_memory_cap_nothing_meets_says_why_and_writes_no_plan(capsys, tmp_path):
    pytest.importorskip("torch", reason="plan imports a torch model")
    model = ["module:dnnpart.frontends.models:shared_relu_resnet", "--input-shape", "1,3,16,16"]
    plan = tmp_path / "plan.json"
    cluster = str(_tight_cluster(tmp_path, 100.0))
    code, out, err = run(capsys, "plan", *model, "--objective", "makespan", "--cluster", cluster,
                         "-o", str(plan))
    text = " ".join((out + err).split())
    assert code == 1 and not plan.exists()
    assert "why:" in text and "the largest accelerator has" in text
    assert "next: dnnpart run" not in text and f"no plan written to {plan}" in text


def test_provenance_reaches_the_text_and_the_plan_file(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    code, out, _ = run(capsys, "solve", GRAPH, "--objective", "makespan", "-m", "pardnn",
                       "--cluster", "4xV100", "-o", str(plan))
    stored = json.loads(plan.read_text())["provenance"]
    assert code == 0 and stored.split(",")[0].split(";")[0] in (
        "pardnn", "pardnn-lc-slicing", "pardnn-slicing-glb", "cp-heuristic")
    assert f"plan from {stored}" in " ".join(out.split())
