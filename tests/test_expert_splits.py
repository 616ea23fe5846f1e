"""Paper 1's human-expert splits evaluate to the published Expert TPS (Table 1), within 0.5%.

Inference: the inference split on the inference layer graph. Training: the training split
where one exists (BERT-24, GNMT), otherwise the inference split with each backward node
following its forward node through ``colorClass`` (``fill_by_colocation``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.workloads import over_workloads

from dnnpart import evaluate
from dnnpart.cli.main import main
from dnnpart.io import read_plan, read_problem

# paper 1, Table 1, "Expert" column (time per sample)
PUBLISHED = {
    ("bert24", "inference"): 20.08,
    ("resnet50", "inference"): 43.92,
    ("inceptionv3", "inference"): 102.48,
    ("gnmt", "inference"): 46.21,
    ("bert24", "training"): 49.40,
    ("resnet50", "training"): 112.11,
    ("inceptionv3", "training"): 213.65,
    ("gnmt", "training"): 137.15,
}
CASES = sorted(PUBLISHED)


def _inputs(workloads: Path, model: str, mode: str) -> tuple[Path, Path, bool]:
    graph = workloads / "throughput" / "LayerGraphs" / f"{model}_{mode}.json"
    split = workloads / "human-experts" / f"{model}_{mode}_expert.json"
    fill = False
    if not split.exists():
        assert mode == "training", f"missing expert file {split}"
        split = workloads / "human-experts" / f"{model}_inference_expert.json"
        fill = True
    return graph, split, fill


@pytest.mark.parametrize(("model", "mode"), over_workloads(CASES, [f"{m}-{k}" for m, k in CASES]))
def test_expert_split_api(workloads_dir: Path, model: str, mode: str) -> None:
    graph, split, fill = _inputs(workloads_dir, model, mode)
    problem = read_problem(graph)
    plan = read_plan(split, problem, fill_by_colocation=fill)
    ev = evaluate(problem, plan)
    assert ev.feasible, ev.violations
    assert ev.objective == pytest.approx(PUBLISHED[(model, mode)], rel=0.005)


@pytest.mark.parametrize(("model", "mode"), over_workloads(CASES, [f"{m}-{k}" for m, k in CASES]))
def test_expert_split_cli(workloads_dir: Path, capsys, model: str, mode: str) -> None:
    graph, split, fill = _inputs(workloads_dir, model, mode)
    argv = ["evaluate", str(graph), str(split), "--json"] + (["--fill-by-colocation"] if fill else [])
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    d = json.loads(captured.out)
    assert d["feasible"] is True
    assert d["objective"] == pytest.approx(PUBLISHED[(model, mode)], rel=0.005)


def test_training_split_without_fill_names_the_unplaced_nodes(workloads_dir: Path, capsys) -> None:
    graph, split, fill = _inputs(workloads_dir, "resnet50", "training")
    assert fill
    code = main(["evaluate", str(graph), str(split)])
    err = capsys.readouterr().err
    assert code == 2 and "not placed" in " ".join(err.split()) and "Traceback" not in err
