"""Phase-2 schema (memory classes, sizes, pins, forward_of, module paths, layer attributes)
round-trips through the native .npz and our JSON, and version-1 files still load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.errors import FormatError
from dnnpart.graph import MEMORY_CLASSES, NO_FORWARD, NO_PIN, Graph, LayerAttrs, build_graph
from dnnpart.io.dnn_partitioning import parse_graph, problem_to_dict
from dnnpart.io.native import load_graph, save_graph
from dnnpart.problem import Problem
from dnnpart.testing import chain_graph
from dnnpart.testing.strategies import graphs

ARRAYS = ("memory_class", "param_bytes", "output_bytes", "pin", "forward_of")


@st.composite
def phase2_graphs(draw: Any) -> Graph:
    """A random graph with every phase-2 array (or some of them) filled at random."""
    base = draw(graphs(min_nodes=1, max_nodes=8))
    n = base.n_nodes
    ints = st.integers
    keep = draw(st.lists(st.booleans(), min_size=7, max_size=7))
    shape = st.lists(ints(0, 9), max_size=4).map(tuple)
    extra: dict[str, Any] = {
        "memory_class": draw(st.lists(ints(0, len(MEMORY_CLASSES) - 1), min_size=n, max_size=n)),
        "param_bytes": draw(st.lists(st.floats(0, 1e9), min_size=n, max_size=n)),
        "output_bytes": draw(st.lists(st.floats(0, 1e9), min_size=n, max_size=n)),
        "pin": draw(st.lists(ints(NO_PIN, 1), min_size=n, max_size=n)),
        "forward_of": [
            int(base.original_ids[i]) if i >= 0 else NO_FORWARD
            for i in draw(st.lists(ints(-1, n - 1), min_size=n, max_size=n))
        ],
        "module_paths": draw(st.lists(st.text(max_size=6), min_size=n, max_size=n)),
        "layer_attrs": LayerAttrs(
            kind=tuple(draw(st.lists(st.sampled_from(["", "conv", "linear"]), min_size=n, max_size=n))),
            output_shape=tuple(draw(st.lists(shape, min_size=n, max_size=n))),
            kernel=tuple(draw(st.lists(shape, min_size=n, max_size=n))),
            stride=tuple(draw(st.lists(shape, min_size=n, max_size=n))),
            padding=tuple(draw(st.lists(shape, min_size=n, max_size=n))),
        ),
    }
    chosen = {k: v for (k, v), on in zip(extra.items(), keep, strict=True) if on}
    src = base.original_ids[base.edge_sources()]
    dst = base.original_ids[base.succ_idx]
    return build_graph(
        base.original_ids, src, dst, compute_time=base.compute_time, edge_cost=base.edge_cost,
        memory_bytes=base.memory_bytes, edge_bytes=base.edge_bytes, is_backward=base.is_backward,
        color_class=base.color_class, layer_id=base.layer_id, names=base.names,
        op_types=base.op_types, **chosen,
    )


def assert_same_phase2(a: Graph, b: Graph) -> None:
    assert a.original_ids.tolist() == b.original_ids.tolist()
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and x.tolist() == y.tolist(), name
    assert a.module_paths == b.module_paths
    assert a.layer_attrs == b.layer_attrs


@settings(max_examples=40, deadline=None)
@given(phase2_graphs())
def test_native_round_trip(tmp_path_factory: Any, graph: Graph) -> None:
    path = tmp_path_factory.mktemp("npz") / "g.npz"
    save_graph(graph, path)
    assert_same_phase2(graph, load_graph(path))


@settings(max_examples=40, deadline=None)
@given(phase2_graphs())
def test_json_round_trip(graph: Graph) -> None:
    from dnnpart.devices.presets import reference_cluster

    problem = Problem(graph=graph, cluster=reference_cluster(n_accelerators=1, n_cpus=1, memory_bytes=1e12))
    data = json.loads(json.dumps(problem_to_dict(problem)))
    back = parse_graph(data)
    assert_same_phase2(graph, back)
    np.testing.assert_array_equal(np.isnan(back.edge_bytes), np.isnan(graph.edge_bytes))


def test_version_1_native_file_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.npz"
    save_graph(chain_graph(4), path)
    with np.load(path, allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files}
    members["version"] = np.array(1, dtype=np.int64)  # what dnnpart wrote before the bump
    with open(path, "wb") as fh:
        np.savez(fh, **members)
    g = load_graph(path)
    assert g.n_nodes == 4 and g.memory_class is None and g.layer_attrs is None
    assert g.memory_classes().tolist() == [0] * 4


def test_version_1_json_still_loads() -> None:
    doc = {"nodes": [{"id": 1, "cpuLatency": 1, "fpgaLatency": 1}], "edges": []}
    g = parse_graph(doc)
    assert g.memory_class is None and g.forward_of is None and g.layer_attrs is None


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"memoryClass": "weights"}, r"nodes\[0\].memoryClass: expected one of normal"),
        ({"pin": "gpu"}, r"nodes\[0\].pin: expected null or one of cpu, accelerator"),
        ({"forwardOf": 99}, "forward_of id 99 is not a node id"),
        ({"layer": {"kernel": [3, "x"]}}, r"nodes\[0\].layer.kernel\[1\]"),
        ({"paramBytes": -1}, r"nodes\[0\].paramBytes"),
    ],
)
def test_bad_phase2_json_fields_are_named(node: dict[str, Any], message: str) -> None:
    doc = {"nodes": [{"id": 1, "cpuLatency": 1, "fpgaLatency": 1} | node], "edges": []}
    with pytest.raises(FormatError, match=message):
        parse_graph(doc)


def test_future_json_version_is_refused() -> None:
    doc = {"dnnpartFormatVersion": 3, "nodes": [{"id": 1, "cpuLatency": 1, "fpgaLatency": 1}]}
    with pytest.raises(FormatError, match="dnnpartFormatVersion"):
        parse_graph(doc)


def test_native_layer_members_come_together(tmp_path: Path) -> None:
    g = build_graph([0], [], [], compute_time=[[1, 1]], edge_cost=[], layer_attrs=LayerAttrs.empty(1))
    path = tmp_path / "g.npz"
    save_graph(g, path)
    with np.load(path, allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files if name != "layer_kernel_values"}
    with open(path, "wb") as fh:
        np.savez(fh, **members)
    with pytest.raises(FormatError, match="layer_kernel_values: missing"):
        load_graph(path)
