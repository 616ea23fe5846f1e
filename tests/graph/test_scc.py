"""Strongly connected components labelled as scipy labels them (:mod:`dnnpart.graph.scc`).

The labels fix the DP's stage numbering, which DPL's values depend on: they must be scipy's,
not merely the same components.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from tests.workloads import WORKLOADS_DIR, over_workloads

import dnnpart.graph.stage_graph as pre
from dnnpart.graph.scc import strong_components


def _scipy(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[int, np.ndarray]:
    adj = coo_matrix((np.ones(src.size, np.int8), (src, dst)), shape=(n, n)).tocsr()
    m, label = connected_components(adj, directed=True, connection="strong")
    return int(m), label


@st.composite
def edge_lists(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray]:
    """Any digraph with repeated edges and self-loops; or a DAG with a few back edges (long
    paths, the shape of stage graphs)."""
    n = draw(st.integers(1, 40))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                          max_size=4 * n))
    if draw(st.booleans()):
        back = draw(st.sets(st.integers(0, max(0, len(pairs) - 1)), max_size=2))
        pairs = [(max(u, v), min(u, v)) if k in back else (min(u, v), max(u, v))
                 for k, (u, v) in enumerate(pairs)]
    src = np.array([u for u, _ in pairs], np.int64)
    dst = np.array([v for _, v in pairs], np.int64)
    return n, src, dst


@settings(max_examples=300, deadline=None)
@given(edge_lists())
def test_labels_equal_scipy(graph: tuple[int, np.ndarray, np.ndarray]) -> None:
    n, src, dst = graph
    m, label = strong_components(n, src, dst)
    m_ref, label_ref = _scipy(n, src, dst)
    assert m == m_ref
    np.testing.assert_array_equal(label, label_ref)


def test_parallel_edges_beyond_int8() -> None:
    # 256 parallel edges sum to 0 in scipy's int8 data; the edge still counts there
    src = np.array([0] * 256 + [1])
    dst = np.array([1] * 256 + [0])
    assert strong_components(3, src, dst)[1].tolist() == _scipy(3, src, dst)[1].tolist()


def _workloads() -> list[Path]:
    return sorted((WORKLOADS_DIR / "throughput").glob("*/*.json"))


@pytest.mark.parametrize("merge_trivial", over_workloads([True, False]))
def test_stage_graphs_of_the_workloads_are_unchanged(merge_trivial: bool) -> None:
    # the plain twin below SMALL_SCC gives the stage graphs scipy gives, numbering included
    paths = _workloads()
    assert paths, f"no workload files in {WORKLOADS_DIR / 'throughput'}"
    from dnnpart.io import read_problem

    for path in paths:
        graph = read_problem(path).graph
        twin = pre.build_stage_graph(graph, merge_trivial=merge_trivial)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(pre, "SMALL_SCC", 0)
            ref = pre.build_stage_graph(graph, merge_trivial=merge_trivial)
        assert twin.n_stage_nodes == ref.n_stage_nodes, path.name
        for attr in ("stage_of", "succ_ptr", "succ_idx", "member_idx"):
            np.testing.assert_array_equal(getattr(twin, attr), getattr(ref, attr), err_msg=path.name)
