"""Plan files name their input files by absolute path and SHA-256: usable from any directory,
and refused in one line when a file changed since the plan was made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dnnpart.cli.main import main
from dnnpart.io.file_refs import sha256_of

GRAPH = {
    "maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1,
    "nodes": [{"id": i, "supportedOnFpga": 1, "cpuLatency": 10.0, "fpgaLatency": t, "size": 30.0}
              for i, t in enumerate([2.0, 3.0, 1.0, 4.0])],
    "edges": [{"sourceId": i, "destId": i + 1, "cost": 0.5} for i in range(3)],
}


@pytest.fixture()
def solved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    made = tmp_path / "made"
    made.mkdir()
    (made / "g.json").write_text(json.dumps(GRAPH))
    monkeypatch.chdir(made)
    assert main(["-q", "solve", "g.json", "-o", "plan.json"]) == 0  # relative paths, as people type them
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return made / "g.json", made / "plan.json"


def test_a_solved_plan_names_its_graph_by_absolute_path_and_hash(solved: tuple[Path, Path]) -> None:
    graph, plan = solved
    ref = json.loads(plan.read_text())["graph"]
    assert ref == {"path": str(graph.resolve()), "sha256": sha256_of(graph)}


def test_a_plan_used_from_another_directory_finds_its_graph(solved, capsys) -> None:
    _, plan = solved
    assert main(["export", str(plan), "--format", "placement-text", "-o", "lines.txt"]) == 0
    assert len(Path("lines.txt").read_text().splitlines()) == len(GRAPH["nodes"])


def test_a_changed_graph_is_refused_in_one_line(solved, capsys) -> None:
    graph, plan = solved
    graph.write_text(json.dumps({**GRAPH, "maxFPGAs": 3}))
    capsys.readouterr()
    assert main(["export", str(plan), "--format", "placement-text", "-o", "lines.txt"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "has changed since the plan was made" in err
    assert len(err.strip().splitlines()) == 1
    # evaluate takes the graph it is given (an inference split on a training graph is
    # legitimate) but says that it differs
    assert main(["evaluate", str(graph), str(plan)]) == 0
    assert "differs" in capsys.readouterr().err


def test_a_plan_moved_with_its_graph_finds_it_beside_itself(solved, tmp_path: Path, capsys) -> None:
    graph, plan = solved
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(plan, moved / "plan.json")
    shutil.copy(graph, moved / "g.json")
    graph.unlink()
    assert main(["export", str(moved / "plan.json"), "--format", "placement-text", "-o", "x.txt"]) == 0
    (moved / "g.json").unlink()
    capsys.readouterr()
    assert main(["export", str(moved / "plan.json"), "--format", "placement-text", "-o", "x.txt"]) == 2
    assert "not found" in capsys.readouterr().err


def test_model_plans_keep_their_cluster_file_by_path_and_hash(tmp_path: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("torch", reason="plan imports a torch model")
    monkeypatch.chdir(tmp_path)
    Path("c.json").write_text(json.dumps({"preset": "reference", "accelerators": 2, "memory_bytes": 1e9}))
    assert main(["-q", "plan", "module:dnnpart.frontends.models:shared_relu_resnet", "--input-shape",
                 "1,3,16,16", "--cluster", "c.json", "-o", "p.json"]) == 0
    block = json.loads(Path("p.json").read_text())["model"]
    assert block["cluster"] == str((tmp_path / "c.json").resolve())
    assert block["files"]["cluster"]["sha256"] == sha256_of("c.json")
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    args = ["export", "../p.json", "--format", "placement", "-o", "pl.json", "--trust-plan"]
    assert main(args) == 0
    (tmp_path / "c.json").write_text(json.dumps({"preset": "reference", "accelerators": 3}))
    capsys.readouterr()
    assert main(args) == 2
    assert "model.cluster" in capsys.readouterr().err
