"""Block units on random DAGs with random module paths: a chain every forward edge respects,
colocation classes inside one unit, every backward node with a forward unit (Hypothesis)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.graph.blocks import block_keys, node_units
from dnnpart.testing.strategies import problems

PATHS = ["", "emb", "h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp", "h.2.attn", "enc.layers.0.blocks.0.a",
         "enc.layers.0.blocks.1.a", "enc.layers.0.down", "head"]


@settings(max_examples=60, deadline=None)
@given(problems(max_nodes=9, training=None), st.data())
def test_units_form_a_chain_of_the_forward_graph(problem, data) -> None:
    g = problem.graph
    paths = tuple(data.draw(st.sampled_from(PATHS)) for _ in range(g.n_nodes))
    g = dataclasses.replace(g, module_paths=paths)
    units = node_units(g)
    assert units.unit.shape == (g.n_nodes,)
    assert units.unit.min() >= 0 and units.unit.max() < units.n_units
    assert set(units.unit.tolist()) == set(range(units.n_units))  # no empty unit
    src, dst = g.edge_sources(), g.succ_idx
    fwd = ~g.is_backward[src] & ~g.is_backward[dst]
    assert np.all(units.unit[src[fwd]] <= units.unit[dst[fwd]])
    for c in np.unique(g.color_class[g.color_class >= 0]).tolist():
        assert np.unique(units.unit[g.color_class == c]).size == 1
    if g.forward_of is not None:
        has = g.is_backward & (g.forward_of >= 0)
        # a backward node is in its forward operator's unit unless a colocation merge moved both
        assert np.all(units.unit[has] == units.unit[g.forward_of[has]])


@given(st.lists(st.sampled_from(PATHS), min_size=1, max_size=12))
def test_a_block_key_is_a_prefix_of_its_path_ending_at_a_number(paths: list[str]) -> None:
    for path, key in zip(paths, block_keys(paths), strict=True):
        if key:
            assert path.startswith(key) and key.split(".")[-1].isdigit()
        else:
            assert not any(part.isdigit() for part in path.split("."))
