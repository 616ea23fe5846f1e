"""Plan files: our versioned format (round trip), expert split files, validation errors."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dnnpart import Plan, Problem, Status
from dnnpart.devices import reference_cluster
from dnnpart.errors import FormatError
from dnnpart.graph import GraphBuilder
from dnnpart.io import parse_plan, plan_to_dict, read_plan, write_plan
from dnnpart.plan import SolveResult
from dnnpart.testing.strategies import DrawChooser, build_problem, random_assignment


def _problem(training: bool = False) -> Problem:
    """ids 10, 20, 30 (forward chain); with training, backward 31, 21, 11 colocated by class."""
    b = GraphBuilder()
    for i, v in enumerate((10, 20, 30)):
        b.add_node(v, cpu_time=5.0, acc_time=1.0, color_class=i)
    b.add_edge(10, 20, cost=0.5)
    b.add_edge(20, 30, cost=0.5)
    if training:
        for i, v in enumerate((11, 21, 31)):
            b.add_node(v, cpu_time=5.0, acc_time=2.0, is_backward=True, color_class=i)
        b.add_edge(30, 31, cost=0.0)
        b.add_edge(31, 21, cost=0.5)
        b.add_edge(21, 11, cost=0.5)
    return Problem(graph=b.build(),
                   cluster=reference_cluster(n_accelerators=2, n_cpus=1, memory_bytes=1e9),
                   name="tiny")


def _where(problem: Problem, plan: Plan) -> dict[int, str]:
    g, c = problem.graph, problem.cluster
    return {int(g.original_ids[v]): c.devices[int(plan.assignment[v])].name for v in range(g.n_nodes)}


def _ours(devices: list[dict]) -> dict:
    return {"format": "dnnpart.plan", "version": 1, "devices": devices}


# -- our format --------------------------------------------------------------------------------


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_round_trip_with_subgraphs(tmp_path: Path, data) -> None:
    c = DrawChooser(data.draw)
    problem = build_problem(c, max_nodes=7)
    a = random_assignment(c, problem)
    with_subgraphs = c.flag(0.6)
    sub = [c.integer(0, 3) for _ in a] if with_subgraphs else None
    plan = Plan(assignment=a, subgraph=sub)
    result = SolveResult(status=Status.FEASIBLE, plan=plan, objective=12.5, method="test",
                         wall_time_s=0.1, bound=10.0)
    path = tmp_path / "plan.json"
    write_plan(problem, plan, path, result)
    doc = json.loads(path.read_text())
    assert doc["format"] == "dnnpart.plan" and doc["version"] == 2
    assert [d["name"] for d in doc["cluster"]["devices"]] == [d.name for d in problem.cluster.devices]
    assert (doc["method"], doc["status"], doc["objective"], doc["bound"]) == ("test", "feasible", 12.5, 10.0)
    back = read_plan(path, problem)
    np.testing.assert_array_equal(back.assignment, plan.assignment)
    if sub is None:
        assert back.subgraph is None
        return
    assert back.subgraph is not None
    # per device, the same subgraphs in the same order (ordinals may be renumbered densely)
    for x in range(problem.cluster.n_devices):
        nodes = plan.device_nodes(x)
        if nodes.size == 0:
            continue
        want = np.unique(plan.subgraph[nodes], return_inverse=True)[1]
        got = np.unique(back.subgraph[nodes], return_inverse=True)[1]
        np.testing.assert_array_equal(got, want)


def test_plan_to_dict_uses_original_ids_and_device_names() -> None:
    p = _problem()
    a = np.empty(3, np.int64)
    a[p.graph.index_of([10, 20, 30])] = [0, 0, 2]
    d = plan_to_dict(p, Plan(assignment=a))
    assert [(x["name"], x["kind"], x["nodes"]) for x in d["devices"]] == [
        ("acc0", "accelerator", [10, 20]), ("acc1", "accelerator", []), ("cpu0", "cpu", [30])]
    assert d["problem"] == "tiny"


def test_infinite_objective_is_written_as_null(tmp_path: Path) -> None:
    p = _problem()
    plan = Plan(assignment=[0, 0, 0])
    result = SolveResult(status=Status.UNKNOWN, plan=plan, objective=math.inf, method="x",
                         wall_time_s=0.0)
    write_plan(p, plan, tmp_path / "p.json", result)
    assert json.loads((tmp_path / "p.json").read_text())["objective"] is None


def test_reads_our_format() -> None:
    p = _problem()
    plan = parse_plan(_ours([{"name": "cpu0", "nodes": [20]},
                             {"name": "acc1", "nodes": [10, 30], "subgraphs": [[30], [10]]}]), p)
    assert _where(p, plan) == {10: "acc1", 20: "cpu0", 30: "acc1"}
    sub = plan.subgraph
    assert sub is not None
    idx = p.graph.index_of([10, 30])
    assert sub[idx].tolist() == [1, 0]


@pytest.mark.parametrize(
    ("devices", "fragments"),
    [
        ([{"name": "acc0", "nodes": [10, 99]}, {"name": "acc1", "nodes": [20, 30]}],
         ["devices[0].nodes[1]", "99"]),
        ([{"name": "gpu7", "nodes": [10, 20, 30]}], ["devices[0].name", "gpu7"]),
        ([{"name": "acc0", "nodes": [10, 20]}, {"name": "acc1", "nodes": [20, 30]}],
         ["devices[1].nodes", "20", "twice"]),
        ([{"name": "acc0", "nodes": [10, 10, 20, 30]}], ["devices[0].nodes", "twice"]),
        ([{"name": "acc0", "nodes": [10, 20]}], ["not placed", "30"]),
        ([{"name": "acc0", "nodes": [10, "x", 30]}], ["devices[0].nodes[1]"]),
        ([{"name": "acc0", "nodes": 10}], ["devices[0].nodes"]),
        ([{"nodes": [10, 20, 30]}], ["devices[0].name"]),
        ([["acc0", [10, 20, 30]]], ["devices[0]"]),
        ([{"name": "acc0", "nodes": [10, 20, 30], "subgraphs": [[10], [77]]}],
         ["devices[0].subgraphs[1]", "77"]),
        ([{"name": "acc0", "nodes": [10, 20, 30], "subgraphs": [10, 20]}],
         ["devices[0].subgraphs[0]"]),
    ],
    ids=["unknown-node", "unknown-device", "placed-twice", "listed-twice", "unplaced",
         "id-text", "nodes-not-list", "name-missing", "device-not-object",
         "subgraph-unknown-node", "subgraph-not-list"],
)
def test_bad_plans_name_the_field(devices, fragments) -> None:
    with pytest.raises(FormatError) as info:
        parse_plan(_ours(devices), _problem())
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_unplaced_message_hints_at_fill_by_colocation() -> None:
    with pytest.raises(FormatError, match="fill-by-colocation"):
        parse_plan(_ours([{"name": "acc0", "nodes": [10]}]), _problem())


def test_subgraph_listing_a_node_of_another_device_is_refused() -> None:
    doc = _ours([{"name": "acc0", "nodes": [10, 20], "subgraphs": [[10], [30]]},
                 {"name": "acc1", "nodes": [30]}])
    with pytest.raises(FormatError, match=r"devices\[0\]\.subgraphs"):
        parse_plan(doc, _problem())


def test_subgraphs_must_cover_the_device_nodes() -> None:
    doc = _ours([{"name": "acc0", "nodes": [10, 20, 30], "subgraphs": [[20]]}])
    with pytest.raises(FormatError, match=r"devices\[0\]\.subgraphs"):
        parse_plan(doc, _problem())


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ({"format": "dnnpart.plan", "version": 4, "devices": []}, "version"),
        ({"format": "dnnpart.plan", "devices": []}, "version"),
        ({"format": "dnnpart.plan", "version": 1}, "devices"),
        ({"format": "something else"}, "not a plan"),
        ({"nodes": [1, 2]}, "not a plan"),
        ([1, 2, 3], "expected an object"),
    ],
)
def test_not_a_plan(doc, fragment: str) -> None:
    with pytest.raises(FormatError, match=fragment):
        parse_plan(doc, _problem())


def test_read_plan_file_errors(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        read_plan(tmp_path / "none.json", _problem())
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(FormatError, match="invalid JSON"):
        read_plan(tmp_path / "bad.json", _problem())


# -- expert format -----------------------------------------------------------------------------


def test_expert_format_maps_fpgas_then_cpus() -> None:
    p = _problem()
    doc = {"fpgas": [{"load": -1, "nodes": [20]}, {"load": -1, "nodes": [10]}],
           "cpus": [{"load": 0.0, "nodes": [30]}]}
    assert _where(p, parse_plan(doc, p)) == {10: "acc1", 20: "acc0", 30: "cpu0"}


def test_expert_format_extra_empty_devices_are_ignored() -> None:
    p = _problem()
    doc = {"fpgas": [{"nodes": [10, 20, 30]}, {"nodes": []}, {"nodes": []}], "cpus": [{"nodes": []}]}
    assert set(_where(p, parse_plan(doc, p)).values()) == {"acc0"}


@pytest.mark.parametrize(
    ("doc", "fragments"),
    [
        ({"fpgas": [{"nodes": [10]}, {"nodes": [20]}, {"nodes": [30]}]}, ["fpgas[2]", "2 accelerators"]),
        ({"fpgas": [{"nodes": [10, 20]}], "cpus": [{"nodes": [30]}, {"nodes": [40]}]}, ["cpus[1]"]),
        ({"fpgas": [{"nodes": [10, 20, 99]}]}, ["fpgas[0].nodes[2]", "99"]),
        ({"fpgas": [{"nodes": [10, 20]}], "cpus": [{"nodes": [20, 30]}]}, ["cpus[0].nodes", "twice"]),
        ({"fpgas": [{"nodes": [10]}]}, ["not placed"]),
        ({"fpgas": {"nodes": [10]}}, ["fpgas"]),
    ],
)
def test_bad_expert_files(doc, fragments) -> None:
    with pytest.raises(FormatError) as info:
        parse_plan(doc, _problem())
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


# -- fill by colocation -----------------------------------------------------------------------


def test_fill_by_colocation_places_backward_nodes_with_their_partners() -> None:
    p = _problem(training=True)
    doc = {"fpgas": [{"nodes": [10, 20]}, {"nodes": [30]}]}
    with pytest.raises(FormatError, match="not placed"):
        parse_plan(doc, p)
    plan = parse_plan(doc, p, fill_by_colocation=True)
    assert _where(p, plan) == {10: "acc0", 20: "acc0", 30: "acc1",
                               11: "acc0", 21: "acc0", 31: "acc1"}


def test_fill_by_colocation_keeps_explicit_placements_and_reports_the_rest() -> None:
    p = _problem(training=True)
    # 31 placed explicitly away from its class; 21's class (20) is not placed at all
    doc = {"fpgas": [{"nodes": [10]}, {"nodes": [30]}], "cpus": [{"nodes": [31]}]}
    with pytest.raises(FormatError, match=r"not placed.*(id 2[01]|\b2[01]\b)"):
        parse_plan(doc, p, fill_by_colocation=True)
    plan = parse_plan({"fpgas": [{"nodes": [10, 20]}, {"nodes": [30]}], "cpus": [{"nodes": [31]}]},
                      p, fill_by_colocation=True)
    assert _where(p, plan)[31] == "cpu0" and _where(p, plan)[11] == "acc0"


def test_published_expert_files_place_every_node(workloads_dir: Path) -> None:
    from dnnpart.io import read_problem

    experts = sorted((workloads_dir / "human-experts").glob("*_inference_expert.json"))
    assert len(experts) == 4
    for path in experts:
        name = path.name.replace("_expert", "")
        problem = read_problem(workloads_dir / "throughput" / "LayerGraphs" / name)
        plan = read_plan(path, problem)
        assert plan.n_nodes == problem.graph.n_nodes


# -- replicated stages (paper 1, appendix C.2) -------------------------------------------------


def test_round_trip_with_replicas(tmp_path: Path) -> None:
    p = Problem(graph=_problem().graph, name="tiny", cluster=reference_cluster(
        n_accelerators=3, n_cpus=1, memory_bytes=1e9))
    a = np.empty(3, np.int64)
    a[p.graph.index_of([10, 20, 30])] = [0, 0, 2]
    plan = Plan(assignment=a, replica_of=[0, 0, 2, 3])
    write_plan(p, plan, tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["version"] == 2
    assert doc["devices"][1] == {"name": "acc1", "kind": "accelerator", "nodes": [],
                                 "replica_of": "acc0"}
    assert "replica_of" not in doc["devices"][0]
    back = read_plan(tmp_path / "p.json", p)
    np.testing.assert_array_equal(back.assignment, plan.assignment)
    np.testing.assert_array_equal(back.replica_of, [0, 0, 2, 3])
    # without replication nothing is written, and nothing is read back
    write_plan(p, Plan(assignment=a, replica_of=[0, 1, 2, 3]), tmp_path / "q.json")
    assert read_plan(tmp_path / "q.json", p).replica_of is None


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"name": "acc1", "nodes": [10], "replica_of": "acc0"}, "devices[1].nodes: a replica"),
        ({"name": "acc1", "replica_of": "gpu9"}, "devices[1].replica_of: unknown device"),
        ({"name": "acc1", "replica_of": 3}, "devices[1].replica_of"),
        ({"name": "cpu0", "replica_of": "acc0"}, "devices[1].replica_of: 'acc0' is a accelerator"),
        ({"name": "acc1", "replica_of": "acc1"}, None),
    ],
)
def test_bad_replicas_name_the_field(entry: dict, fragment: str | None) -> None:
    p = _problem()
    doc = _ours([{"name": "acc0", "nodes": [10, 20, 30]}, entry])
    if fragment is None:   # a device naming itself is simply not a replica
        assert parse_plan(doc, p).replica_of.tolist() == [0, 1, 2]
        return
    with pytest.raises(FormatError, match=re.escape(fragment)):
        parse_plan(doc, p)


def test_a_replica_of_a_replica_is_refused() -> None:
    p = Problem(graph=_problem().graph, cluster=reference_cluster(
        n_accelerators=3, n_cpus=0, memory_bytes=1e9))
    doc = _ours([{"name": "acc0", "nodes": [10, 20, 30]}, {"name": "acc1", "replica_of": "acc0"},
                 {"name": "acc2", "replica_of": "acc1"}])
    with pytest.raises(FormatError, match="itself a replica"):
        parse_plan(doc, p)


def test_version_2_plans_keep_their_cluster_and_version_1_plans_still_read(tmp_path) -> None:
    from dnnpart.cost import resolve_cluster
    from dnnpart.io.plan_files import plan_cluster

    cluster = resolve_cluster("torus2d:x=2,y=2,bw=5e9,latency=1e-6").cluster
    graph = _problem().graph
    p = Problem(graph=graph, cluster=cluster)
    a = np.zeros(graph.n_nodes, np.int64)
    a[-1] = 3
    write_plan(p, Plan(assignment=a), tmp_path / "p.json")
    back = plan_cluster(tmp_path / "p.json")
    assert back is not None and [d.name for d in back.devices] == [d.name for d in cluster.devices]
    np.testing.assert_array_equal(back.bandwidth, cluster.bandwidth)
    np.testing.assert_array_equal(back.latency, cluster.latency)
    assert len(back.links) == len(cluster.links)
    doc = json.loads((tmp_path / "p.json").read_text())
    doc["version"] = 1
    del doc["cluster"]
    (tmp_path / "v1.json").write_text(json.dumps(doc))
    assert plan_cluster(tmp_path / "v1.json") is None
    np.testing.assert_array_equal(read_plan(tmp_path / "v1.json", p).assignment, a)


# -- pipeline copies and ring order (paper 4) --------------------------------------------------


def test_round_trip_with_pipeline_copies(tmp_path: Path) -> None:
    p = Problem(graph=_problem().graph, name="tiny", cluster=reference_cluster(
        n_accelerators=4, n_cpus=0, memory_bytes=1e9))
    a = np.empty(3, np.int64)
    a[p.graph.index_of([10, 20, 30])] = [1, 1, 0]
    # stage {10, 20} on acc1 (copy 1) and acc3 (copy 0); stage {30} on acc0 (copy 1), acc2 (0)
    plan = Plan(assignment=a, replica_of=[0, 1, 0, 1], pipeline_copy=[1, 1, 0, 0])
    assert plan.ring(1).tolist() == [3, 1] and plan.ring(2).tolist() == [2, 0]
    write_plan(p, plan, tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    assert [d.get("pipeline_copy") for d in doc["devices"]] == [1, 1, 0, 0]
    back = read_plan(tmp_path / "p.json", p)
    np.testing.assert_array_equal(back.pipeline_copy, plan.pipeline_copy)
    np.testing.assert_array_equal(back.replica_of, plan.replica_of)
    # files without copies read as device-index order
    for d in doc["devices"]:
        d.pop("pipeline_copy")
    assert parse_plan(doc, p).pipeline_copy is None


@pytest.mark.parametrize(
    ("copies", "fragment"),
    [([0, 0, None, None], "pipeline_copy missing"),
     ([0, 0, 0, 1], "must number its 2 copies 0..1, got [0, 0]"),
     ([0, 5, 1, 1], "must number its 2 copies 0..1"),
     (["x", 0, 1, 1], "devices[0].pipeline_copy")],
)
def test_bad_pipeline_copies_name_the_field(copies: list, fragment: str) -> None:
    p = Problem(graph=_problem().graph, cluster=reference_cluster(
        n_accelerators=4, n_cpus=0, memory_bytes=1e9))
    entries = [{"name": "acc0", "nodes": [10, 20]}, {"name": "acc1", "nodes": [30]},
               {"name": "acc2", "replica_of": "acc0"}, {"name": "acc3", "replica_of": "acc1"}]
    for e, c in zip(entries, copies, strict=True):
        if c is not None:
            e["pipeline_copy"] = c
    with pytest.raises(FormatError, match=re.escape(fragment)):
        parse_plan(_ours(entries), p)


def test_plan_refuses_bad_pipeline_copies() -> None:
    with pytest.raises(ValueError, match="needs replica_of"):
        Plan(assignment=[0], pipeline_copy=[0])
    with pytest.raises(ValueError, match=re.escape("0..1")):
        Plan(assignment=[0, 0], replica_of=[0, 0], pipeline_copy=[1, 1])
