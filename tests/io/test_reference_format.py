"""The dnn-partitioning JSON format: validation with field paths, defaults, round trips."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from tests.workloads import over_workloads

from dnnpart.errors import FormatError
from dnnpart.graph import NO_CLASS
from dnnpart.io import parse_problem, read_problem, write_problem
from dnnpart.testing.strategies import problems

BASE = {
    "maxSizePerFPGA": 1000.0,
    "maxFPGAs": 2,
    "maxCPUs": 1,
    "nodes": [
        {"id": 1, "supportedOnFpga": True, "cpuLatency": 5.0, "fpgaLatency": 1.0,
         "isBackwardNode": False, "colorClass": 3, "size": 10.0, "name": "conv"},
        {"id": 2, "supportedOnFpga": 1, "cpuLatency": 6.0, "fpgaLatency": 2.0,
         "isBackwardNode": 0, "size": 20.0},
        {"id": 3, "supportedOnFpga": 0, "cpuLatency": 7.0, "fpgaLatency": 3.0},
    ],
    "edges": [
        {"sourceId": 1, "destId": 2, "cost": 0.5},
        {"sourceId": 2, "destId": 3, "cost": 0.25},
    ],
}


def _doc(**changes) -> dict:
    doc = copy.deepcopy(BASE)
    doc.update(changes)
    return doc


def _write(tmp_path: Path, doc, name: str = "g.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _node(doc: dict, i: int, **fields) -> dict:
    doc["nodes"][i].update(fields)
    return doc


def _fails(tmp_path: Path, doc, *fragments: str) -> str:
    with pytest.raises(FormatError) as info:
        read_problem(_write(tmp_path, doc))
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert "\n" not in message
    return message


def test_reads_a_valid_file(tmp_path: Path) -> None:
    p = read_problem(_write(tmp_path, BASE))
    g = p.graph
    assert (g.n_nodes, g.n_edges) == (3, 2)
    assert g.original_ids.tolist() == [1, 2, 3]
    assert g.names == ("conv", "2", "3")
    assert g.time_on("cpu").tolist() == [5, 6, 7]
    assert g.time_on("accelerator").tolist() == [1, 2, math.inf]  # node 3 is unsupported
    assert g.memory_bytes.tolist() == [10, 20, 0]  # missing size -> 0
    assert g.color_class.tolist() == [3, NO_CLASS, NO_CLASS]  # missing colorClass -> none
    assert g.is_backward.tolist() == [False, False, False]  # missing isBackwardNode -> false
    assert g.edge_cost.tolist() == [0.5, 0.25]
    c = p.cluster
    assert (c.n_accelerators, c.n_cpus) == (2, 1)
    assert [d.memory_bytes for d in c.devices if d.is_accelerator] == [1000, 1000]
    assert p.name == "g"


def test_bool_and_integer_flags_are_both_accepted(tmp_path: Path) -> None:
    doc = _doc()
    _node(doc, 0, supportedOnFpga=1, isBackwardNode=True)
    _node(doc, 1, supportedOnFpga=True, isBackwardNode=1)
    _node(doc, 2, supportedOnFpga=False, isBackwardNode=0)
    g = read_problem(_write(tmp_path, doc)).graph
    assert g.is_backward.tolist() == [True, True, False]
    assert np.isfinite(g.time_on("accelerator")).tolist() == [True, True, False]


def test_unsupported_node_needs_no_accelerator_time(tmp_path: Path) -> None:
    doc = _doc()
    del doc["nodes"][2]["fpgaLatency"]
    assert read_problem(_write(tmp_path, doc)).graph.time_on("accelerator")[2] == math.inf


def test_missing_supported_flag_defaults_to_supported(tmp_path: Path) -> None:
    doc = _doc()
    del doc["nodes"][0]["supportedOnFpga"]
    assert read_problem(_write(tmp_path, doc)).graph.time_on("accelerator")[0] == 1.0


def test_file_without_cluster_needs_one(tmp_path: Path) -> None:
    doc = {"nodes": BASE["nodes"], "edges": BASE["edges"]}
    _fails(tmp_path, doc, "cluster")


@pytest.mark.parametrize(
    ("mutate", "fragments"),
    [
        (lambda d: _node(d, 1, cpuLatency="abc"), ["nodes[1].cpuLatency", '"abc"']),
        (lambda d: _node(d, 0, fpgaLatency=-1), ["nodes[0].fpgaLatency", "-1"]),
        (lambda d: _node(d, 1, size=-5), ["nodes[1].size"]),
        (lambda d: _node(d, 1, size="big"), ["nodes[1].size"]),
        (lambda d: _node(d, 2, cpuLatency=None), ["nodes[2].cpuLatency"]),
        (lambda d: _node(d, 1, cpuLatency=True), ["nodes[1].cpuLatency"]),
        (lambda d: _node(d, 0, supportedOnFpga=2), ["nodes[0].supportedOnFpga"]),
        (lambda d: _node(d, 0, supportedOnFpga="yes"), ["nodes[0].supportedOnFpga"]),
        (lambda d: _node(d, 1, isBackwardNode="no"), ["nodes[1].isBackwardNode"]),
        (lambda d: _node(d, 1, id="x"), ["nodes[1].id"]),
        (lambda d: _node(d, 1, id=1.5), ["nodes[1].id"]),
        (lambda d: _node(d, 2, colorClass="red"), ["nodes[2].colorClass"]),
        (lambda d: d["nodes"][1].pop("cpuLatency"), ["nodes[1].cpuLatency", "missing"]),
        (lambda d: d["nodes"][0].pop("fpgaLatency"), ["nodes[0].fpgaLatency", "missing"]),
        (lambda d: d["nodes"][1].pop("id"), ["nodes[1].id", "missing"]),
        (lambda d: d["edges"][1].pop("cost"), ["edges[1].cost", "missing"]),
        (lambda d: d["edges"][0].update(cost=-0.5), ["edges[0].cost"]),
        (lambda d: d["edges"][0].update(cost="abc"), ["edges[0].cost", '"abc"']),
        (lambda d: d["edges"][1].update(destId=99), ["edges[1].destId", "99"]),
        (lambda d: d["edges"][0].update(sourceId=42), ["edges[0].sourceId", "42"]),
        (lambda d: d["edges"][0].pop("sourceId"), ["edges[0].sourceId"]),
        (lambda d: _node(d, 2, id=1), ["nodes[2].id", "duplicate", "1"]),
        (lambda d: d.update(maxFPGAs=-1), ["maxFPGAs"]),
        (lambda d: d.update(maxCPUs=-2), ["maxCPUs"]),
        (lambda d: d.update(maxFPGAs="six"), ["maxFPGAs"]),
        (lambda d: d.update(maxSizePerFPGA=-1), ["maxSizePerFPGA"]),
        (lambda d: d.update(maxFPGAs=0, maxCPUs=0), ["maxFPGAs"]),
        (lambda d: d.update(nodes=[]), ["nodes"]),
        (lambda d: d.pop("nodes"), ["nodes", "missing"]),
        (lambda d: d.update(nodes={"id": 1}), ["nodes"]),
        (lambda d: d.update(edges="none"), ["edges"]),
        (lambda d: d["nodes"].__setitem__(1, 7), ["nodes[1]"]),
        (lambda d: d["edges"].__setitem__(0, [1, 2]), ["edges[0]"]),
    ],
    ids=[
        "cpu-abc", "fpga-negative", "size-negative", "size-text", "cpu-null", "cpu-bool",
        "supported-2", "supported-text", "backward-text", "id-text", "id-fraction",
        "color-text", "missing-cpu", "missing-fpga-when-supported", "missing-id",
        "missing-edge-cost", "edge-cost-negative", "edge-cost-abc", "unknown-dest",
        "unknown-source", "missing-source", "duplicate-id", "maxFPGAs-negative",
        "maxCPUs-negative", "maxFPGAs-text", "memory-negative", "no-devices", "empty-nodes",
        "missing-nodes", "nodes-not-list", "edges-not-list", "node-not-object",
        "edge-not-object",
    ],
)
def test_bad_fields_name_their_path(tmp_path: Path, mutate, fragments) -> None:
    doc = _doc()
    mutate(doc)
    _fails(tmp_path, doc, *fragments)


def test_nan_costs_are_refused(tmp_path: Path) -> None:
    # Python's json writes and reads the non-standard NaN literal; it must not get through
    doc = _node(_doc(), 1, cpuLatency=math.nan)
    _fails(tmp_path, json.dumps(doc), "nodes[1].cpuLatency")
    doc = _doc()
    doc["edges"][0]["cost"] = math.nan
    _fails(tmp_path, json.dumps(doc), "edges[0].cost")
    with pytest.raises(FormatError, match=r"nodes\[0\]\.fpgaLatency"):
        parse_problem(_node(_doc(), 0, fpgaLatency=math.nan))


def test_infinite_times_are_refused(tmp_path: Path) -> None:
    _fails(tmp_path, json.dumps(_node(_doc(), 0, cpuLatency=math.inf)), "nodes[0].cpuLatency")


def test_cycle_names_a_node_on_it(tmp_path: Path) -> None:
    doc = _doc()
    doc["edges"].append({"sourceId": 3, "destId": 2, "cost": 0.0})
    message = _fails(tmp_path, doc, "cycle")
    assert "id 2" in message or "id 3" in message


def test_self_loop_is_refused(tmp_path: Path) -> None:
    doc = _doc()
    doc["edges"].append({"sourceId": 2, "destId": 2, "cost": 0.0})
    _fails(tmp_path, doc, "2")


def test_duplicate_edge_is_refused(tmp_path: Path) -> None:
    doc = _doc()
    doc["edges"].append({"sourceId": 1, "destId": 2, "cost": 0.5})
    _fails(tmp_path, doc, "duplicate edge 1 -> 2")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("{not json", "invalid JSON"), ("", "invalid JSON"), ("[1, 2]", "expected an object"),
     ('"nodes"', "expected an object")],
)
def test_malformed_documents(tmp_path: Path, text: str, fragment: str) -> None:
    message = _fails(tmp_path, text, fragment)
    if "JSON" in fragment:
        assert "g.json" in message and "line" in message


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        read_problem(tmp_path / "absent.json")
    with pytest.raises(FormatError, match="directory"):
        read_problem(tmp_path)


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_bytes(b"\xff\xfe\x00garbage\x80")
    with pytest.raises(FormatError):
        read_problem(path)


# -- round trip ------------------------------------------------------------------------------


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(problems(heterogeneous_prob=0.0))
def test_write_then_read_preserves_everything(tmp_path: Path, problem) -> None:
    path = tmp_path / "round.json"
    write_problem(problem, path)
    back = read_problem(path)
    g, h = problem.graph, back.graph
    assert h.original_ids.tolist() == g.original_ids.tolist()
    assert h.names == g.names
    np.testing.assert_array_equal(h.compute_time, g.compute_time)
    np.testing.assert_array_equal(h.memory_bytes, g.memory_bytes)
    np.testing.assert_array_equal(h.is_backward, g.is_backward)
    np.testing.assert_array_equal(h.color_class, g.color_class)
    np.testing.assert_array_equal(h.layer_id, g.layer_id)
    np.testing.assert_array_equal(h.succ_ptr, g.succ_ptr)
    np.testing.assert_array_equal(h.succ_idx, g.succ_idx)
    np.testing.assert_array_equal(h.edge_cost, g.edge_cost)
    c, d = problem.cluster, back.cluster
    assert (d.n_accelerators, d.n_cpus) == (c.n_accelerators, c.n_cpus)
    for x, y in zip(c.devices, d.devices, strict=True):
        assert (x.name, x.kind) == (y.name, y.kind)
        if math.isinf(x.memory_bytes):  # strict JSON has no inf: a huge number stands in
            assert y.memory_bytes >= 1e300
        else:
            assert y.memory_bytes == x.memory_bytes
    # the written file is strict JSON (no NaN/Infinity literals)
    json.loads(path.read_text(), parse_constant=lambda s: pytest.fail(f"non-strict JSON {s}"))


def test_round_trip_of_published_workload(tmp_path: Path, workloads_dir: Path) -> None:
    src = workloads_dir / "throughput" / "LayerGraphs" / "gnmt_training.json"
    p = read_problem(src)
    write_problem(p, tmp_path / "copy.json")
    q = read_problem(tmp_path / "copy.json")
    np.testing.assert_array_equal(p.graph.compute_time, q.graph.compute_time)
    np.testing.assert_array_equal(p.graph.edge_cost, q.graph.edge_cost)
    np.testing.assert_array_equal(p.graph.color_class, q.graph.color_class)
    assert p.graph.names == q.graph.names


# -- the published workloads -----------------------------------------------------------------

# paper 1, Table 1 ("nodes" column) and section 6 (3 accelerators for BERT-3/6, else 6)
PUBLISHED = {
    "OperatorGraphs/bert_l-3_inference.json": (235, 3),
    "OperatorGraphs/bert_l-6_inference.json": (418, 3),
    "OperatorGraphs/bert_l-12_inference.json": (783, 6),
    "OperatorGraphs/resnet50_inference.json": (604, 6),
    "OperatorGraphs/bert_l-3_training.json": (600, 3),
    "OperatorGraphs/resnet50_training.json": (1243, 6),
    "LayerGraphs/bert24_inference.json": (32, 6),
    "LayerGraphs/resnet50_inference.json": (177, 6),
    "LayerGraphs/inceptionv3_inference.json": (326, 6),
    "LayerGraphs/gnmt_inference.json": (96, 6),
    "LayerGraphs/bert24_training.json": (64, 6),
    "LayerGraphs/resnet50_training.json": (354, 6),
    "LayerGraphs/inceptionv3_training.json": (652, 6),
    "LayerGraphs/gnmt_training.json": (192, 6),
}


@pytest.mark.parametrize("name", over_workloads(sorted(PUBLISHED)))
def test_published_workloads_read_with_their_sizes(workloads_dir: Path, name: str) -> None:
    p = read_problem(workloads_dir / "throughput" / name)
    n_nodes, k = PUBLISHED[name]
    assert p.graph.n_nodes == n_nodes
    assert p.cluster.n_accelerators == k
    assert all(d.memory_bytes == pytest.approx(16 * 2**30, rel=0.01)
               for d in p.cluster.devices if d.is_accelerator)  # 16 GB of DRAM each
    assert p.graph.is_training == ("training" in name)
