"""Twin of :func:`dnnpart.pricing.chain.boundary_bytes` written from its definition: for every
value and every boundary between two positions, whether the value crosses it, which way, and
the phase that first needs it beyond (Hypothesis over random DAGs and positions)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.graph.core import CONTROL, RESIDUAL
from dnnpart.pricing.chain import DOWN, MESSAGE_KINDS, UP, boundary_bytes
from dnnpart.testing.strategies import problems


def naive_boundary_bytes(g, pos: list[int], n_positions: int) -> np.ndarray:
    out = np.zeros((max(n_positions - 1, 0), len(MESSAGE_KINDS)))
    cls = g.memory_classes()
    src = g.edge_sources().tolist()
    dst = g.succ_idx.tolist()
    bytes_of = [g.edge_bytes[e] if g.edge_bytes[e] == g.edge_bytes[e] else g.node_output_bytes()[src[e]]
                for e in range(len(src))]
    for u in range(g.n_nodes):
        if cls[u] in (RESIDUAL, CONTROL):
            continue
        edges = [e for e in range(len(src)) if src[e] == u]
        size = max((bytes_of[e] for e in edges), default=0.0)
        if size <= 0:
            continue
        readers = [(pos[dst[e]], int(g.is_backward[dst[e]])) for e in edges]
        pu = int(g.is_backward[u])
        for j in range(n_positions - 1):  # boundary between positions j and j + 1
            if pos[u] <= j:
                beyond = [ph for q, ph in readers if q > j]
                direction = UP
            else:
                beyond = [ph for q, ph in readers if q <= j]
                direction = DOWN
            if beyond:
                pv = 0 if 0 in beyond else 1
                out[j, MESSAGE_KINDS.index((direction, pu, pv))] += size
    return out


@settings(max_examples=60, deadline=None)
@given(problems(max_nodes=8, training=None), st.data())
def test_boundary_bytes_meets_its_twin(problem, data) -> None:
    g = problem.graph
    n_positions = data.draw(st.integers(1, 4))
    pos = [data.draw(st.integers(0, n_positions - 1)) for _ in range(g.n_nodes)]
    np.testing.assert_allclose(boundary_bytes(g, pos, n_positions),
                               naive_boundary_bytes(g, pos, n_positions), rtol=1e-12, atol=1e-9)
