"""Structural queries against brute-force definitions (paper 1, Definition 3.1 and Fact 5.2)."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnpart.errors import ProblemTooLargeError
from dnnpart.graph import (
    NO_CLASS,
    Graph,
    ancestors,
    build_graph,
    colocation_units,
    communication_to_computation_ratio,
    contiguity_witness,
    count_ideals,
    critical_path,
    degree_of_parallelism,
    descendants,
    is_contiguous,
    is_ideal,
    is_reachable,
    topological_levels,
    width,
)
from dnnpart.graph.ideals import count_dag_ideals, dag_ideals, enumerate_ideals
from dnnpart.testing.strategies import DagSpec, dags


def _graph(dag: DagSpec, weights: list[float] | None = None) -> Graph:
    """The DAG with ids listed in reverse so that the renumbering is not the identity."""
    ids = list(range(dag.n))[::-1]
    w = [1.0] * dag.n if weights is None else weights
    return build_graph(ids, [u for u, _ in dag.edges], [v for _, v in dag.edges],
                       compute_time=[[10.0 * x, x] for x in [w[i] for i in ids]],
                       edge_cost=np.ones(len(dag.edges)))


def _nx(g: Graph) -> nx.DiGraph:
    d = nx.DiGraph()
    d.add_nodes_from(range(g.n_nodes))
    d.add_edges_from(zip(g.edge_sources().tolist(), g.succ_idx.tolist(), strict=True))
    return d


def _reach(g: Graph) -> list[set[int]]:
    """reach[u] = nodes reachable from u by a path (u itself included)."""
    d = _nx(g)
    return [nx.descendants(d, u) | {u} for u in range(g.n_nodes)]


def _contiguous_by_definition(reach: list[set[int]], s: set[int], n: int) -> bool:
    """Definition 3.1: no u in S, v not in S, w in S with v reachable from u, w from v."""
    outside = set(range(n)) - s
    return not any(v in reach[u] and w in reach[v] for u in s for v in outside for w in s)


def _ideal_by_definition(g: Graph, s: set[int]) -> bool:
    return all(int(u) in s for v in s for u in g.predecessors(v))


def _subsets(n: int):
    for bits in range(1 << n):
        yield {v for v in range(n) if bits >> v & 1}


@st.composite
def dag_and_subset(draw, max_nodes: int = 8):
    dag = draw(dags(max_nodes=max_nodes, density=draw(st.sampled_from([0.2, 0.4, 0.7]))))
    subset = draw(st.lists(st.booleans(), min_size=dag.n, max_size=dag.n))
    return dag, subset


@given(dag_and_subset())
def test_is_contiguous_matches_definition_3_1(case) -> None:
    dag, subset = case
    g = _graph(dag)
    s = {v for v in range(g.n_nodes) if subset[v]}
    expected = _contiguous_by_definition(_reach(g), s, g.n_nodes)
    mask = np.array(subset, dtype=bool)
    assert is_contiguous(g, mask) == expected
    assert is_contiguous(g, sorted(s)) == expected  # index form agrees with mask form


@given(dag_and_subset())
def test_contiguity_witness_is_a_real_violation(case) -> None:
    dag, subset = case
    g = _graph(dag)
    s = {v for v in range(g.n_nodes) if subset[v]}
    witness = contiguity_witness(g, np.array(subset, dtype=bool))
    if witness is None:
        assert _contiguous_by_definition(_reach(g), s, g.n_nodes)
    else:
        u, v = witness
        reach = _reach(g)
        assert u in s and v not in s
        assert v in {int(w) for w in g.successors(u)}, "the witness must be an edge"
        assert reach[v] & s, "some node of the set must be reachable from v"


def test_contiguity_examples_of_figure_1() -> None:
    # a -> b -> c plus an isolated d: {a, c} is not contiguous, {a, d} is (not connected)
    g = build_graph([0, 1, 2, 3], [0, 1], [1, 2], compute_time=np.ones((4, 2)), edge_cost=[0, 0])
    a, b, c, d = g.index_of([0, 1, 2, 3]).tolist()
    assert not is_contiguous(g, [a, c])
    assert is_contiguous(g, [a, d])
    assert is_contiguous(g, [b, d])
    assert is_contiguous(g, [])
    assert is_contiguous(g, [a, b, c, d])
    # connected but not contiguous: a -> b -> c and a -> c, S = {a, c}
    h = build_graph([0, 1, 2], [0, 1, 0], [1, 2, 2], compute_time=np.ones((3, 2)),
                    edge_cost=[0, 0, 0])
    a, b, c = h.index_of([0, 1, 2]).tolist()
    assert not is_contiguous(h, [a, c])
    assert contiguity_witness(h, [a, c]) == (a, b)


@given(dag_and_subset())
def test_is_ideal_matches_definition(case) -> None:
    dag, subset = case
    g = _graph(dag)
    s = {v for v in range(g.n_nodes) if subset[v]}
    assert is_ideal(g, np.array(subset, dtype=bool)) == _ideal_by_definition(g, s)


@given(dags(max_nodes=10, density=0.3))
def test_count_ideals_matches_brute_force(dag: DagSpec) -> None:
    g = _graph(dag)
    expected = sum(_ideal_by_definition(g, s) for s in _subsets(g.n_nodes))
    assert count_ideals(g) == expected


@given(dags(max_nodes=8))
def test_enumerate_ideals_lists_each_ideal_once_by_size(dag: DagSpec) -> None:
    g = _graph(dag)
    ideals = enumerate_ideals(g)
    assert len(set(ideals)) == len(ideals)
    assert ideals[0] == 0 and ideals[-1] == (1 << g.n_nodes) - 1
    sizes = [bin(i).count("1") for i in ideals]
    assert sizes == sorted(sizes)
    for bits in ideals:
        assert _ideal_by_definition(g, {v for v in range(g.n_nodes) if bits >> v & 1})


@given(dags(max_nodes=10, density=0.3), st.integers(0, 40))
def test_count_dag_ideals_matches_brute_force_and_stops_at_its_limit(dag: DagSpec, limit: int) -> None:
    g = _graph(dag)
    expected = sum(_ideal_by_definition(g, s) for s in _subsets(g.n_nodes))
    src, dst = g.edge_sources().tolist(), g.succ_idx.tolist()
    assert count_dag_ideals(g.n_nodes, src, dst, limit=10**6) == expected
    assert count_dag_ideals(g.n_nodes, src, dst, limit=limit) == min(expected, limit + 1)
    listed = dag_ideals(g.n_nodes, src, dst, limit=limit)
    assert (listed is None) == (expected > limit)
    if listed is not None:
        assert sorted(listed) == sorted(enumerate_ideals(g))


def test_count_ideals_limit_raises() -> None:
    g = build_graph(list(range(12)), [], [], compute_time=np.ones((12, 2)), edge_cost=[])
    assert count_ideals(g) == 2**12  # an antichain: every subset is an ideal
    with pytest.raises(ProblemTooLargeError):
        count_ideals(g, limit=100)


@given(dags(max_nodes=8))
def test_width_exact_equals_brute_force_max_antichain(dag: DagSpec) -> None:
    g = _graph(dag)
    reach = _reach(g)
    best = 0
    for s in _subsets(g.n_nodes):
        if all(v not in reach[u] for u in s for v in s if u != v):
            best = max(best, len(s))
    value, exact = width(g)
    assert exact
    assert value == best
    lower, exact_small = width(g, exact_limit=0)
    assert not exact_small and 1 <= lower <= best


@given(dags(max_nodes=6))
def test_fact_5_2_contiguous_sets_are_differences_of_nested_ideals(dag: DagSpec) -> None:
    g = _graph(dag)
    n = g.n_nodes
    ideals = [frozenset(v for v in range(n) if b >> v & 1) for b in enumerate_ideals(g)]
    differences = {i - j for i in ideals for j in ideals if j <= i}
    reach = _reach(g)
    contiguous = {frozenset(s) for s in _subsets(n) if _contiguous_by_definition(reach, s, n)}
    assert contiguous == differences


@given(dag_and_subset())
def test_ancestors_descendants_reachability(case) -> None:
    dag, subset = case
    g = _graph(dag)
    reach = _reach(g)
    s = {v for v in range(g.n_nodes) if subset[v]}
    down = set().union(*(reach[u] for u in s)) if s else set()
    up = {u for u in range(g.n_nodes) if reach[u] & s}
    assert set(np.flatnonzero(descendants(g, np.array(subset, dtype=bool))).tolist()) == down
    assert set(np.flatnonzero(ancestors(g, sorted(s))).tolist()) == up
    for u, v in itertools.product(range(g.n_nodes), repeat=2):
        assert is_reachable(g, u, v) == (v in reach[u])


@given(dags(max_nodes=8), st.lists(st.integers(0, 9), min_size=8, max_size=8))
def test_levels_and_critical_path(dag: DagSpec, weights: list[int]) -> None:
    g = _graph(dag, [float(w) for w in weights[: dag.n]])
    d = _nx(g)
    for v in range(g.n_nodes):
        longest = max((len(p) - 1 for u in range(g.n_nodes)
                       for p in nx.all_simple_paths(d, u, v)), default=0)
        assert topological_levels(g)[v] == longest
    acc = g.time_on("accelerator")
    best = max(sum(acc[p]) for u in range(g.n_nodes) for v in range(g.n_nodes)
               for p in ([[u]] if u == v else nx.all_simple_paths(d, u, v)))
    assert critical_path(g) == pytest.approx(best)
    assert critical_path(g, "cpu") == pytest.approx(10 * best)


def test_ccr_and_degree_of_parallelism_by_hand() -> None:
    # diamond 0 -> {1, 2} -> 3, accelerator times 1, 2, 4, 1, edge costs 0.5 each
    g = build_graph([0, 1, 2, 3], [0, 0, 1, 2], [1, 2, 3, 3],
                    compute_time=[[9, 1], [9, 2], [9, 4], [9, 1]], edge_cost=[0.5] * 4)
    assert communication_to_computation_ratio(g) == pytest.approx(2.0 / 8.0)
    assert critical_path(g) == 6.0
    assert degree_of_parallelism(g) == pytest.approx(8.0 / 6.0)


@given(dags(max_nodes=8), st.lists(st.integers(-1, 2), min_size=8, max_size=8))
def test_colocation_units_partition_by_class(dag: DagSpec, classes: list[int]) -> None:
    ids = list(range(dag.n))
    g = build_graph(ids, [u for u, _ in dag.edges], [v for _, v in dag.edges],
                    compute_time=np.ones((dag.n, 2)), edge_cost=np.zeros(len(dag.edges)),
                    color_class=classes[: dag.n])
    ptr, nodes = colocation_units(g)
    units = [set(nodes[ptr[i]:ptr[i + 1]].tolist()) for i in range(len(ptr) - 1)]
    assert sorted(nodes.tolist()) == list(range(g.n_nodes))
    assert all(units), "no empty unit"
    cls = g.color_class
    for unit in units:
        kinds = {int(cls[v]) for v in unit}
        if NO_CLASS in kinds:
            assert len(unit) == 1
        else:
            assert len(kinds) == 1
            (k,) = kinds
            assert unit == set(np.flatnonzero(cls == k).tolist())


def test_critical_path_with_unsupported_nodes_is_infinite() -> None:
    g = build_graph([0, 1], [0], [1], compute_time=[[1, 1], [1, math.inf]], edge_cost=[0])
    assert critical_path(g) == math.inf
