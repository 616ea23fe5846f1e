"""Biconnected components and branching regions against networkx."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dnnpart.graph.branching import biconnected_edge_components, branch_region_labels


def _random_dag(seed: int) -> tuple[int, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 14))
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.25]
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    return n, src, dst


@pytest.mark.parametrize("seed", range(60))
def test_edge_components_match_networkx(seed: int) -> None:
    n, src, dst = _random_dag(seed)
    comp = biconnected_edge_components(n, src, dst)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    expected = {frozenset(frozenset(e) for e in c) for c in nx.biconnected_component_edges(g)}
    ours: dict[int, set[frozenset[int]]] = {}
    for i, c in enumerate(comp.tolist()):
        ours.setdefault(c, set()).add(frozenset((int(src[i]), int(dst[i]))))
    assert {frozenset(c) for c in ours.values()} == expected


def test_chain_of_diamonds_keeps_blocks_apart() -> None:
    # two residual blocks: 0 -> {1, 2} -> 3 -> {4, 5} -> 6
    src = np.array([0, 0, 1, 2, 3, 3, 4, 5])
    dst = np.array([1, 2, 3, 3, 4, 5, 6, 6])
    labels = branch_region_labels(7, src, dst)
    assert labels[0] == labels[1] == labels[2]
    assert labels[3] == labels[4] == labels[5]
    assert len({labels[0], labels[3], labels[6]}) == 3


def test_ignored_fan_out_does_not_merge_its_consumers() -> None:
    # input 0 feeds layers 1, 2, 3 of the chain 1 -> 2 -> 3
    src, dst = np.array([0, 0, 0, 1, 2]), np.array([1, 2, 3, 2, 3])
    merged = branch_region_labels(4, src, dst)
    assert len(set(merged.tolist())) == 2  # {0, 1, 2} and {3}
    ignore = np.array([True, False, False, False])
    apart = branch_region_labels(4, src, dst, ignore_sources=ignore)
    assert len(set(apart.tolist())) == 4
