"""Algorithm 1 (paper 3) against brute force over all strategies, and the K it ends with."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.layerwise.hardware import P100, paper_bandwidth
from dnnpart.layerwise.layers import NetBuilder
from dnnpart.layerwise.models import alexnet, inception_v3, resnet50, resnet152, vgg16
from dnnpart.layerwise.tables import build_tables, iteration_time
from dnnpart.solvers.optcnn.search import optimize, optimize_tables

Edge = tuple[int, int]


def eq1(node_cost: list[np.ndarray], edges: list[Edge], t_x: list[np.ndarray],
        strategy: tuple[int, ...]) -> float:
    """Eq. 1 written out plainly."""
    total = sum(float(c[s]) for c, s in zip(node_cost, strategy, strict=True))
    for (u, v), x in zip(edges, t_x, strict=True):
        total += float(x[strategy[u], strategy[v]])
    return total


def brute_force(node_cost: list[np.ndarray], edges: list[Edge], t_x: list[np.ndarray]) -> float:
    """Minimum of Eq. 1 over every strategy, all strategies evaluated at once via np.ix_ grids."""
    sizes = [len(c) for c in node_cost]
    grids = np.ix_(*[np.arange(s) for s in sizes])
    total = np.zeros(sizes)
    for i, c in enumerate(node_cost):
        total = total + c[grids[i]]
    for (u, v), x in zip(edges, t_x, strict=True):
        total = total + x[grids[u], grids[v]]
    return float(total.min())


def sp_graph(rng: np.random.Generator, max_nodes: int) -> list[Edge]:
    """A two-terminal series-parallel DAG built by series and parallel compositions."""

    def build(budget: int) -> tuple[int, list[Edge], int]:
        # returns (node count incl. terminals 0 and n-1, edges, n)
        if budget <= 2 or rng.random() < 0.3:
            return 2, [(0, 1)], 2
        left = int(rng.integers(2, budget))
        right = budget - left + (1 if rng.random() < 0.5 else 2)
        right = max(2, min(right, budget - left + 2))
        n1, e1, _ = build(left)
        n2, e2, _ = build(right)
        if rng.random() < 0.5:  # series: identify sink of first with source of second
            edges = e1 + [(u + n1 - 1, v + n1 - 1) for u, v in e2]
            return n1 + n2 - 1, edges, n1 + n2 - 1
        # parallel: shared source 0 and shared sink
        n = n1 + n2 - 2

        def remap(x: int) -> int:
            if x == 0:
                return 0
            if x == n2 - 1:
                return n - 1
            return n1 - 2 + x
        e1m = [(u if u < n1 - 1 else n - 1, v if v < n1 - 1 else n - 1) for u, v in e1]
        return n, e1m + [(remap(u), remap(v)) for u, v in e2], n

    while True:
        n, edges, _ = build(max_nodes)
        if n <= max_nodes:
            return edges


def random_dag(rng: np.random.Generator, n: int) -> list[Edge]:
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.45]
    return edges or [(0, n - 1)]


def random_tables(rng: np.random.Generator, n: int,
                  edges: list[Edge]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    sizes = rng.integers(1, 6, size=n)
    node_cost = [rng.random(int(s)) * 5 for s in sizes]
    t_x = [rng.random((int(sizes[u]), int(sizes[v]))) * 5 for u, v in edges]
    return node_cost, t_x


def _cases() -> list[tuple[list[np.ndarray], list[Edge], list[np.ndarray], bool]]:
    rng = np.random.default_rng(20180717)
    cases, sp, non_sp = [], 0, 0
    while sp < 250 or non_sp < 250:
        want_sp = sp <= non_sp
        if want_sp:
            edges = sp_graph(rng, 7)
            n = 1 + max(max(e) for e in edges)
        else:
            n = int(rng.integers(3, 8))
            edges = random_dag(rng, n)
        node_cost, t_x = random_tables(rng, n, edges)
        k = optimize(node_cost, edges, t_x).final_nodes
        if want_sp:
            assert k == 2, edges  # series-parallel with one source and one sink reduces fully
            sp += 1
        elif k > 2:
            non_sp += 1
        else:
            continue  # a random DAG that happens to be series-parallel
        cases.append((node_cost, edges, t_x, want_sp))
    return cases


CASES = _cases()


def test_case_mix() -> None:
    assert len(CASES) >= 500
    assert sum(not c[3] for c in CASES) >= 250


@pytest.mark.parametrize("enum_limit", [1 << 20, 0])
def test_algorithm1_equals_brute_force(enum_limit: int) -> None:
    """>= 500 random graphs (<= 7 nodes, <= 5 configurations), half not series-parallel.

    ``enum_limit=0`` forces the exact conditioning completion on every graph.
    """
    for node_cost, edges, t_x, _ in CASES:
        result = optimize(node_cost, edges, t_x, enum_limit=enum_limit)
        best = brute_force(node_cost, edges, t_x)
        assert abs(result.value - best) <= 1e-9, (edges, result)
        assert abs(eq1(node_cost, edges, t_x, result.strategy) - result.value) <= 1e-9
        if enum_limit == 0:
            assert result.completion == "conditioning"


def test_parallel_edges_and_isolated_nodes() -> None:
    rng = np.random.default_rng(3)
    edges = [(0, 1), (0, 1), (1, 2), (0, 2)]
    node_cost, t_x = random_tables(rng, 4, edges)  # node 3 has no edges
    r = optimize(node_cost, edges, t_x, enum_limit=0)
    assert abs(r.value - brute_force(node_cost, edges, t_x)) <= 1e-9
    assert r.edge_eliminations >= 1


def test_rejects_bad_tables() -> None:
    with pytest.raises(ValueError, match="shape"):
        optimize([np.zeros(2), np.zeros(3)], [(0, 1)], [np.zeros((3, 2))])
    with pytest.raises(ValueError, match="self-loop"):
        optimize([np.zeros(2)], [(0, 0)], [np.zeros((2, 2))])


@pytest.mark.parametrize("build", [alexnet, vgg16, inception_v3, resnet50, resnet152])
def test_networks_reduce_to_two_nodes(build) -> None:  # type: ignore[no-untyped-def]
    tables = build_tables(build(64), 2, P100, paper_bandwidth(2))
    result = optimize_tables(tables)
    assert result.final_nodes == 2
    assert result.completion == "enumerate"
    assert abs(iteration_time(tables, result.strategy) - result.value) <= 1e-9 * max(1.0, result.value)


def two_source_net() -> NetBuilder:
    b = NetBuilder("two_inputs", 4)
    x1 = b.input(2, 8, 8, name="image")
    x2 = b.input(2, 8, 8, name="mask")
    a = b.conv("conv_a", x1, 4, 3, 1, 1)
    m = b.conv("conv_m", x2, 4, 3, 1, 1)
    s = b.add("join", a, m)
    p = b.pool("pool", s, 2, 2)
    f = b.fc("fc", p, 4)
    b.softmax("softmax", f)
    return b


def test_second_source_stays_above_two_and_is_exact() -> None:
    tables = build_tables(two_source_net().build(), 2, P100, paper_bandwidth(2))
    node_cost = tables.node_cost
    edges, t_x = list(tables.edges), list(tables.t_x)
    for limit in (1 << 20, 0):
        result = optimize(node_cost, edges, t_x, enum_limit=limit)
        assert result.final_nodes > 2
        best = brute_force(node_cost, edges, t_x)
        assert abs(result.value - best) <= 1e-12
        assert abs(iteration_time(tables, result.strategy) - result.value) <= 1e-12


def test_sp_generator_covers_sizes() -> None:
    sizes = {1 + max(max(e) for e in c[1]) for c in CASES if c[3]}
    assert {2, 5, 7} <= sizes


def test_fixed_layers_are_respected_and_optimal_around() -> None:
    tables = build_tables(two_source_net().build(), 2, P100, paper_bandwidth(2))
    pins = {2: len(tables.spaces[2]) - 1, 6: 1}
    r = optimize_tables(tables, fixed=pins)
    assert all(r.strategy[i] == c for i, c in pins.items())
    node_cost = tables.node_cost
    for i, c in pins.items():  # brute force over strategies that keep the pins
        keep = np.full(len(node_cost[i]), np.inf)
        keep[c] = node_cost[i][c]
        node_cost[i] = keep
    assert r.value == pytest.approx(brute_force(node_cost, list(tables.edges), list(tables.t_x)), rel=1e-12)
    assert r.value == pytest.approx(iteration_time(tables, r.strategy), rel=1e-12)
    with pytest.raises(ValueError, match="out of range"):
        optimize_tables(tables, fixed={0: 99})


def test_tables_reject_bad_input() -> None:
    g = two_source_net().build()
    with pytest.raises(ValueError, match="bandwidth"):
        build_tables(g, 2, P100, paper_bandwidth(4))
    with pytest.raises(ValueError, match="entries"):
        iteration_time(build_tables(g, 2, P100, paper_bandwidth(2)), [0])
