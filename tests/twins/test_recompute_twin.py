"""Twins of the recomputation a stage runs (dnnpart.pricing.chain.recomputed_forward and the
block DP's interval table dnnpart.pricing.chain_tables.interval_recompute), written from their
definition: a stage's forward operators in the graph's order, up to the last one whose value
its backward reads (torch's non-reentrant checkpoint stops there), constant fills aside.
Hypothesis over random DAGs, positions and block units that need not be contiguous in the
graph's order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnpart.graph.core import RESIDUAL
from dnnpart.pricing.chain import recomputed_forward
from dnnpart.pricing.chain_tables import interval_recompute
from dnnpart.pricing.liveness import stashed
from dnnpart.testing.strategies import problems


def naive_recomputed(g, times: list[float], pos: list[int], n_positions: int) -> list[float]:
    keeps = stashed(g)
    cls = g.memory_classes()
    out = []
    for p in range(n_positions):
        mine = [n for n in range(g.n_nodes) if pos[n] == p and not g.is_backward[n]]
        fill = [g.op_types is not None and g.op_types[n] == "fill" for n in range(g.n_nodes)]
        needed = [n for n in mine if keeps[n] and cls[n] != RESIDUAL and not fill[n]]
        last = max(needed, default=-1)
        out.append(sum(times[n] for n in mine if n <= last))
    return out


@settings(max_examples=80, deadline=None)
@given(problems(max_nodes=9, training=None), st.data())
def test_recomputed_forward_meets_its_twin(problem, data) -> None:
    g = problem.graph
    n_positions = data.draw(st.integers(1, 4))
    pos = [data.draw(st.integers(0, n_positions - 1)) for _ in range(g.n_nodes)]
    times = [data.draw(st.floats(0.0, 10.0)) for _ in range(g.n_nodes)]
    got = recomputed_forward(np.array(times), g, pos, n_positions)
    np.testing.assert_allclose(got, naive_recomputed(g, times, pos, n_positions), rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(problems(max_nodes=9, training=True), st.data())
def test_the_interval_table_is_each_intervals_recomputation(problem, data) -> None:
    g = problem.graph
    n_units = data.draw(st.integers(1, 4))
    unit = np.array([data.draw(st.integers(0, n_units - 1)) for _ in range(g.n_nodes)])
    times = np.array([[data.draw(st.floats(0.0, 10.0)) for _ in range(g.n_nodes)] for _ in range(2)])
    table = interval_recompute(g, unit, n_units, times)
    for i in range(2):
        for a in range(n_units):
            for b in range(a + 1, n_units + 1):
                inside = (unit >= a) & (unit < b)
                want = naive_recomputed(g, times[i].tolist(), np.where(inside, 0, 1).tolist(), 2)[0]
                assert table[i, a, b] == np.float64(want) or abs(table[i, a, b] - want) < 1e-9
