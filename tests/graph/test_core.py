"""Graph construction: topological renumbering, CSR consistency, costs, validation errors."""

from __future__ import annotations

import dataclasses
import math
import re

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnpart.errors import InvalidGraphError
from dnnpart.graph import NO_CLASS, Graph, GraphBuilder, build_graph
from dnnpart.testing.strategies import DrawChooser, build_dag


@st.composite
def graph_inputs(draw, max_nodes: int = 8):
    """Raw build_graph inputs: shuffled distinct ids, shuffled edge list, random costs."""
    c = DrawChooser(draw)
    dag = build_dag(c, min_nodes=1, max_nodes=max_nodes, density=0.45)
    n = dag.n
    ids = draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n, unique=True))
    node_order = c.permutation(n)
    edges = [dag.edges[e] for e in c.permutation(len(dag.edges))]
    times = [[float(c.integer(1, 20)), float(c.integer(0, 9))] for _ in range(n)]
    mem = [float(c.integer(0, 9)) for _ in range(n)]
    costs = [0.5 * c.integer(0, 6) for _ in edges]
    return {
        "ids": [ids[i] for i in node_order],
        "times": [times[i] for i in node_order],
        "mem": [mem[i] for i in node_order],
        "classes": [c.integer(-1, 2) for _ in node_order],
        "src": [ids[u] for u, _ in edges],
        "dst": [ids[v] for _, v in edges],
        "cost": costs,
    }


def _build(inp: dict) -> Graph:
    return build_graph(
        inp["ids"], inp["src"], inp["dst"], compute_time=inp["times"], edge_cost=inp["cost"],
        memory_bytes=inp["mem"], color_class=inp["classes"],
        names=[f"node{i}" for i in inp["ids"]],
    )


@given(graph_inputs())
def test_renumbering_is_topological_and_keeps_everything(inp: dict) -> None:
    g = _build(inp)
    n, m = len(inp["ids"]), len(inp["src"])
    assert (g.n_nodes, g.n_edges) == (n, m)
    src = g.edge_sources()
    assert np.all(src < g.succ_idx), "every edge must point from a lower to a higher id"
    # same node set, each node's attributes follow its original id
    assert sorted(g.original_ids.tolist()) == sorted(inp["ids"])
    pos = {oid: i for i, oid in enumerate(inp["ids"])}
    for v in range(n):
        i = pos[int(g.original_ids[v])]
        assert g.names[v] == f"node{inp['ids'][i]}"
        assert g.compute_time[v].tolist() == inp["times"][i]
        assert g.memory_bytes[v] == inp["mem"][i]
        assert g.color_class[v] == inp["classes"][i]
    # same edge set (as original-id pairs), costs following their edges
    got = sorted(zip(g.original_ids[src].tolist(), g.original_ids[g.succ_idx].tolist(),
                     g.edge_cost.tolist(), strict=True))
    want = sorted(zip(inp["src"], inp["dst"], inp["cost"], strict=True))
    assert got == want
    # edges sorted by (source, target)
    keys = list(zip(src.tolist(), g.succ_idx.tolist(), strict=True))
    assert keys == sorted(keys)
    # index_of maps original ids back
    assert g.index_of(g.original_ids).tolist() == list(range(n))
    perm = np.random.default_rng(0).permutation(n)
    assert g.index_of(g.original_ids[perm]).tolist() == perm.tolist()


@given(graph_inputs())
def test_csr_successors_and_predecessors_agree(inp: dict) -> None:
    g = _build(inp)
    n = g.n_nodes
    assert g.succ_ptr[0] == 0 and g.succ_ptr[-1] == g.n_edges
    assert g.pred_ptr[0] == 0 and g.pred_ptr[-1] == g.n_edges
    assert np.all(np.diff(g.succ_ptr) >= 0) and np.all(np.diff(g.pred_ptr) >= 0)
    succ_pairs = {(u, int(w)) for u in range(n) for w in g.successors(u)}
    pred_pairs = {(int(u), v) for v in range(n) for u in g.predecessors(v)}
    assert succ_pairs == pred_pairs
    assert len(succ_pairs) == g.n_edges
    assert g.out_degree().tolist() == [len(g.successors(v)) for v in range(n)]
    assert g.in_degree().tolist() == [len(g.predecessors(v)) for v in range(n)]
    # pred_edge: entry j of the predecessor arrays is successor-edge pred_edge[j]
    src = g.edge_sources()
    for v in range(n):
        for j in range(g.pred_ptr[v], g.pred_ptr[v + 1]):
            e = g.pred_edge[j]
            assert src[e] == g.pred_idx[j]
            assert g.succ_idx[e] == v
    assert sorted(g.pred_edge.tolist()) == list(range(g.n_edges))


@given(graph_inputs())
def test_node_out_cost_is_max_and_uniform_flags_equal_costs(inp: dict) -> None:
    g = _build(inp)
    cost, uniform = g.node_out_cost()
    src = g.edge_sources()
    for u in range(g.n_nodes):
        out = g.edge_cost[src == u]
        if out.size == 0:
            assert cost[u] == 0 and uniform[u]
        else:
            assert cost[u] == out.max()
            assert bool(uniform[u]) == bool(np.all(out == out[0]))


def test_node_out_cost_by_hand() -> None:
    g = build_graph([1, 2, 3, 4], [1, 1, 2, 2], [2, 3, 3, 4],
                    compute_time=np.ones((4, 2)), edge_cost=[0.5, 0.5, 1.0, 3.0])
    cost, uniform = g.node_out_cost()
    assert cost.tolist() == [0.5, 3.0, 0.0, 0.0]
    assert uniform.tolist() == [True, False, True, True]


def test_duplicate_edges_sum_merges_costs_and_bytes() -> None:
    g = build_graph([5, 7, 9], [5, 7, 5, 5], [7, 9, 7, 9], compute_time=np.ones((3, 2)),
                    edge_cost=[1.0, 2.0, 0.25, 4.0], edge_bytes=[10.0, 20.0, 5.0, np.nan],
                    duplicate_edges="sum")
    assert g.n_edges == 3
    pairs = {(int(g.original_ids[s]), int(g.original_ids[t])): (c, b) for s, t, c, b in
             zip(g.edge_sources(), g.succ_idx, g.edge_cost, g.edge_bytes, strict=True)}
    assert pairs[(5, 7)] == (1.25, 15.0)
    assert pairs[(7, 9)] == (2.0, 20.0)
    assert pairs[(5, 9)][0] == 4.0 and math.isnan(pairs[(5, 9)][1])


def test_duplicate_edge_is_an_error_by_default() -> None:
    with pytest.raises(InvalidGraphError, match=r"duplicate edge 5 -> 7"):
        build_graph([5, 7], [5, 5], [7, 7], compute_time=np.ones((2, 2)), edge_cost=[1, 1])


def test_index_of_unknown_id_raises_key_error_naming_it() -> None:
    g = build_graph([10, 20], [10], [20], compute_time=np.ones((2, 2)), edge_cost=[0.5])
    with pytest.raises(KeyError, match="99"):
        g.index_of([10, 99])


def test_arrays_are_read_only_and_graph_is_frozen() -> None:
    g = build_graph([1, 2, 3], [1, 2], [2, 3], compute_time=np.ones((3, 2)), edge_cost=[1, 1])
    arrays = [f.name for f in dataclasses.fields(g) if isinstance(getattr(g, f.name), np.ndarray)]
    assert {"succ_ptr", "succ_idx", "pred_ptr", "pred_idx", "pred_edge", "edge_cost",
            "compute_time", "memory_bytes", "is_backward", "color_class"} <= set(arrays)
    for name in arrays:
        arr = getattr(g, name)
        assert not arr.flags.writeable, name
        with pytest.raises(ValueError):
            arr[...] = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.names = ("x",)  # type: ignore[misc]


def test_defaults_for_optional_node_fields() -> None:
    g = build_graph([3, 1], [1], [3], compute_time=[[1, 1], [2, 2]], edge_cost=[0.0])
    assert g.original_ids.tolist() == [1, 3]
    assert g.names == ("1", "3")
    assert g.memory_bytes.tolist() == [0.0, 0.0]
    assert g.color_class.tolist() == [NO_CLASS, NO_CLASS]
    assert not g.is_backward.any() and not g.is_training
    assert np.isnan(g.edge_bytes).all()


def test_builder_matches_build_graph() -> None:
    b = GraphBuilder()
    b.add_node(30, cpu_time=3.0, acc_time=1.0, memory_bytes=2.0, name="c")
    b.add_node(10, cpu_time=1.0, name="a", color_class=4)
    b.add_edge(10, 30, cost=0.5)
    g = b.build()
    assert g.names == ("a", "c")
    assert g.time_on("accelerator").tolist() == [math.inf, 1.0]
    assert g.time_on("cpu").tolist() == [1.0, 3.0]
    assert g.color_class.tolist() == [4, NO_CLASS]
    with pytest.raises(ValueError, match="gpu"):
        g.time_on("gpu")


# -- invalid graphs -----------------------------------------------------------------------


@st.composite
def cyclic_inputs(draw):
    """A random DAG plus one or more backward edges closing cycles."""
    c = DrawChooser(draw)
    n = c.integer(2, 8)
    forward = [(u, v) for u in range(n) for v in range(u + 1, n) if c.flag(0.35)]
    chain_back = []
    for _ in range(c.integer(1, 2)):
        u = c.integer(0, n - 2)
        v = c.integer(u + 1, n - 1)
        forward.append((u, v))  # make sure u reaches v, so v -> u closes a cycle
        chain_back.append((v, u))
    edges = list(dict.fromkeys(forward + chain_back))
    ids = [100 + 7 * p for p in c.permutation(n)]
    return n, ids, edges


@given(cyclic_inputs())
def test_cycle_error_names_a_node_on_a_cycle(case) -> None:
    n, ids, edges = case
    with pytest.raises(InvalidGraphError, match="cycle") as info:
        build_graph(ids, [ids[u] for u, _ in edges], [ids[v] for _, v in edges],
                    compute_time=np.ones((n, 2)), edge_cost=np.zeros(len(edges)))
    named = re.search(r"id (-?\d+)", str(info.value))
    assert named, str(info.value)
    node = int(named.group(1))
    g = nx.DiGraph([(ids[u], ids[v]) for u, v in edges])
    on_cycle = {v for comp in nx.strongly_connected_components(g) if len(comp) > 1 for v in comp}
    assert node in on_cycle, f"{info.value} names {node}, cycle nodes are {sorted(on_cycle)}"


def _times(n: int) -> np.ndarray:
    return np.ones((n, 2))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"node_ids": [1, 2], "edge_src": [2], "edge_dst": [2]}, r"self-loop.*\b2\b"),
        ({"node_ids": [1, 2], "edge_src": [1], "edge_dst": [42]}, r"edges\[0\].*42"),
        ({"node_ids": [1, 2], "edge_src": [77], "edge_dst": [2]}, r"edges\[0\].*77"),
        ({"node_ids": [1, 2, 1], "edge_src": [], "edge_dst": []}, r"duplicate node id 1"),
        ({"node_ids": [1, 2], "edge_src": [1, 1], "edge_dst": [2, 2]}, r"duplicate edge 1 -> 2"),
        ({"node_ids": [], "edge_src": [], "edge_dst": []}, r"no nodes"),
    ],
    ids=["self-loop", "unknown-target", "unknown-source", "duplicate-id", "duplicate-edge", "empty"],
)
def test_structural_errors(kwargs: dict, pattern: str) -> None:
    n, m = len(kwargs["node_ids"]), len(kwargs["edge_src"])
    with pytest.raises(InvalidGraphError, match=pattern):
        build_graph(**kwargs, compute_time=_times(n) if n else np.zeros((0, 2)),
                    edge_cost=np.ones(m))


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_bad_compute_time_names_the_node(bad: float) -> None:
    times = np.ones((3, 2))
    times[1, 0] = bad
    with pytest.raises(InvalidGraphError, match=r"(id 20).*compute time"):
        build_graph([10, 20, 30], [], [], compute_time=times, edge_cost=[])


def test_infinite_compute_time_means_unsupported_and_is_allowed() -> None:
    g = build_graph([1], [], [], compute_time=[[1.0, math.inf]], edge_cost=[])
    assert g.time_on("accelerator")[0] == math.inf


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_bad_memory_names_the_node(bad: float) -> None:
    with pytest.raises(InvalidGraphError, match=r"id 30.*memory_bytes"):
        build_graph([10, 20, 30], [], [], compute_time=np.ones((3, 2)), edge_cost=[],
                    memory_bytes=[0.0, 1.0, bad])


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf])
def test_bad_edge_cost_names_the_edge(bad: float) -> None:
    with pytest.raises(InvalidGraphError, match=r"edge 20 -> 30: cost"):
        build_graph([10, 20, 30], [10, 20], [20, 30], compute_time=np.ones((3, 2)),
                    edge_cost=[1.0, bad])


def test_wrong_shapes_are_rejected() -> None:
    with pytest.raises(InvalidGraphError, match="compute_time"):
        build_graph([1, 2], [], [], compute_time=np.ones((3, 2)), edge_cost=[])
    with pytest.raises(InvalidGraphError, match="edge_src and edge_dst"):
        build_graph([1, 2], [1], [], compute_time=np.ones((2, 2)), edge_cost=[])
