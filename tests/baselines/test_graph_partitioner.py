"""Balanced graph partitioning (METIS, Scotch): valid plans, memory violations reported."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tests.workloads import over_workloads

from dnnpart import Status, evaluate
from dnnpart.baselines.graph_partitioner import scotch_program
from dnnpart.baselines.partition_input import partition_input
from dnnpart.devices import reference_cluster
from dnnpart.errors import MissingDependencyError
from dnnpart.io import read_problem
from dnnpart.problem import Problem
from dnnpart.solvers import solve
from dnnpart.testing import chain_graph, chain_problem

GRAPHS = [f"LayerGraphs/{m}_{k}" for m in ("bert24", "resnet50", "inceptionv3", "gnmt")
          for k in ("inference", "training")]
GRAPHS += [f"OperatorGraphs/{s}" for s in ("bert_l-3_inference", "bert_l-6_inference",
                                           "bert_l-12_inference", "resnet50_inference",
                                           "bert_l-3_training", "resnet50_training")]
NO_SCOTCH = "Scotch's gpart is not on PATH: install the Debian package scotch (apt-get install scotch)"
TOOLS = over_workloads(["metis", pytest.param("scotch", marks=pytest.mark.skipif(
    scotch_program() is None, reason=NO_SCOTCH))])


@pytest.mark.parametrize("tool", TOOLS)
def test_valid_plans_on_the_workloads(workloads_dir: Path, tool: str) -> None:
    for name in GRAPHS:
        problem = read_problem(workloads_dir / "throughput" / f"{name}.json")
        result = solve(problem, "graph-partitioner", tool=tool)
        plan = result.require_plan()
        ev = evaluate(problem, plan)
        assert result.objective == ev.objective, name
        assert not any("colocation" in v for v in ev.violations), name
        assert set(plan.assignment.tolist()) <= set(problem.cluster.accelerators), name
        assert result.status is (Status.FEASIBLE if ev.feasible else Status.UNKNOWN), name


def test_memory_violation_is_reported_not_hidden() -> None:
    g = chain_graph(4, acc_time=1.0, memory_bytes=1.0)
    # balanced halves need 2 bytes each; the accelerators hold 1.5
    p = Problem(graph=g, cluster=reference_cluster(n_accelerators=2, n_cpus=1, memory_bytes=1.5))
    result = solve(p, "graph-partitioner")
    assert result.plan is not None
    assert result.status is Status.UNKNOWN
    assert "memory" in result.stats["violations"]


def test_parts_all_uses_the_cpus() -> None:
    p = chain_problem([1.0] * 6, n_accelerators=2)
    p = Problem(graph=p.graph, cluster=reference_cluster(n_accelerators=2, n_cpus=1, memory_bytes=1e9))
    plan = solve(p, "graph-partitioner", parts="all").require_plan()
    assert p.cluster.cpus[0] in plan.assignment.tolist()


def test_partition_input_weights() -> None:
    wg = partition_input(chain_problem([4.0, 1.0, 2.0], n_accelerators=2, cost=0.5))
    assert wg.vertex_weight.tolist() == [4.0, 1.0, 2.0]
    assert wg.xadj.tolist() == [0, 1, 3, 4]
    assert np.allclose(wg.edge_weight, 0.5)


def test_missing_pymetis_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(MissingDependencyError, match=r"dnnpart\[metis\]"):
        solve(chain_problem([1.0, 1.0], n_accelerators=2), "graph-partitioner")


def test_missing_gpart_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)
    with pytest.raises(MissingDependencyError, match="apt-get install scotch"):
        solve(chain_problem([1.0, 1.0], n_accelerators=2), "graph-partitioner", tool="scotch")


@pytest.mark.parametrize("bad", [{"tool": "kahip"}, {"parts": "some"}, {"colour": 1}])
def test_bad_options(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        solve(chain_problem([1.0, 1.0], n_accelerators=2), "graph-partitioner", **bad)
