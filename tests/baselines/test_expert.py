"""The expert baseline scores a split file: paper 1's Expert column (Table 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.workloads import over_workloads

from dnnpart.errors import FormatError
from dnnpart.io import read_problem
from dnnpart.solvers import solve
from dnnpart.testing import chain_problem

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


@pytest.mark.parametrize(("model", "mode"), over_workloads(CASES, [f"{m}-{k}" for m, k in CASES]))
def test_expert_matches_published_column(workloads_dir: Path, model: str, mode: str) -> None:
    problem = read_problem(workloads_dir / "throughput" / "LayerGraphs" / f"{model}_{mode}.json")
    split = workloads_dir / "human-experts" / f"{model}_{mode}_expert.json"
    if not split.exists():  # training graphs without their own split: the inference one
        split = workloads_dir / "human-experts" / f"{model}_inference_expert.json"
    result = solve(problem, "expert", split=str(split))
    assert result.status.value == "feasible"
    assert result.objective == pytest.approx(PUBLISHED[(model, mode)], rel=0.005)


def test_split_is_required() -> None:
    with pytest.raises(ValueError, match="split=PATH"):
        solve(chain_problem([1.0, 2.0], n_accelerators=2), "expert")


def test_incomplete_split_names_the_unplaced_node(tmp_path: Path) -> None:
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"fpgas": [{"nodes": [0]}], "cpus": []}))
    with pytest.raises(FormatError, match="not placed"):
        solve(chain_problem([1.0, 2.0], n_accelerators=2), "expert", split=str(path))
