"""Interval contraction (--granularity module) keeps a DAG and the phase-2 arrays' meaning."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.graph import RESIDUAL, Graph, build_graph
from dnnpart.graph.contract import consecutive_groups, contract_intervals
from dnnpart.testing.strategies import graphs


@settings(max_examples=60, deadline=None)
@given(graphs(min_nodes=1, max_nodes=9), st.data())
def test_contraction_sums_work_and_keeps_crossings(graph: Graph, data: st.DataObject) -> None:
    n = graph.n_nodes
    cuts = data.draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1)) if n > 1 else []
    group = np.concatenate(([0], np.cumsum(cuts))).astype(np.int64)
    c = contract_intervals(graph, group)
    assert c.n_nodes == int(group[-1]) + 1
    np.testing.assert_allclose(c.compute_time.sum(axis=0), graph.compute_time.sum(axis=0))
    assert c.memory_bytes.sum() == pytest.approx(graph.memory_bytes.sum())
    # brute force: an edge between two groups exists iff some member edge crosses them
    src, dst = group[graph.edge_sources()], group[graph.succ_idx]
    want = {(int(a), int(b)) for a, b in zip(src, dst, strict=True) if a != b}
    got = set(zip(c.edge_sources().tolist(), c.succ_idx.tolist(), strict=True))
    assert got == want
    # a tensor is charged once per target group: total cost never exceeds the crossing edges'
    assert c.edge_cost.sum() <= graph.edge_cost[src != dst].sum() + 1e-9


def test_phase2_arrays_follow_the_groups() -> None:
    g = build_graph(
        [0, 1, 2, 3], [0, 1, 2], [1, 2, 3], compute_time=[[1, 1]] * 4, edge_cost=[1, 1, 1],
        memory_class=[RESIDUAL, 0, 0, 0], param_bytes=[8, 0, 0, 0], forward_of=[-1, -1, -1, 1],
        is_backward=[0, 0, 0, 1], module_paths=["a.x", "a.y", "b", "b"],
    )
    c = contract_intervals(g, consecutive_groups(["a", "a", "b", "b"]))
    assert c.module_paths == ("a", "b")
    assert c.memory_classes().tolist() == [0, 0]  # residual + normal disagree -> normal
    assert c.node_param_bytes().tolist() == [8, 0]
    assert c.is_backward.tolist() == [False, True]
    assert c.forward_ops().tolist() == [-1, 0]


def test_bad_groups_are_refused() -> None:
    g = build_graph([0, 1], [0], [1], compute_time=[[1, 1]] * 2, edge_cost=[1])
    with pytest.raises(ValueError, match="intervals"):
        contract_intervals(g, [1, 0])
