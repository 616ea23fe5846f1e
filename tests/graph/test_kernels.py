"""Graph and local-search kernels against oracles, and compiled like their source.

Each kernel of ``dnnpart.graph.kernels`` is checked against a definition (networkx, or
longest paths over every path of the DAG), and the local-search kernels of
``dnnpart.baselines.local_search_kernels`` against the evaluator. Comparing a compiled kernel
with its own source run as Python (``.py_func``, :func:`_both`) checks compilation only.
The DP kernels are covered by tests/solvers and tests/twins.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnpart._jit import LazyKernel
from dnnpart.evaluate import evaluate
from dnnpart.graph import kernels as gk
from dnnpart.plan import Plan
from dnnpart.testing.jit import compiled
from dnnpart.testing.strategies import DrawChooser, build_dag, problems_and_plans


def _csr(n: int, src: list[int], dst: list[int]) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((np.asarray(dst, dtype=np.int64), np.asarray(src, dtype=np.int64)))
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(np.asarray(src, dtype=np.int64), minlength=n), out=ptr[1:])
    return ptr, np.asarray(dst, dtype=np.int64)[order] if len(dst) else np.zeros(0, np.int64)


@st.composite
def digraphs(draw, max_nodes: int = 10):
    """Any directed graph (cycles allowed), as CSR successors."""
    n = draw(st.integers(1, max_nodes))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                          max_size=2 * n, unique=True))
    pairs = [(u, v) for u, v in pairs if u != v]
    ptr, idx = _csr(n, [u for u, _ in pairs], [v for _, v in pairs])
    return n, ptr, idx, pairs


@st.composite
def topo_dags(draw, max_nodes: int = 10):
    """A DAG with topological ids: CSR both ways, node weights and a node mask."""
    c = DrawChooser(draw)
    dag = build_dag(c, min_nodes=1, max_nodes=max_nodes, density=draw(st.sampled_from([0.2, 0.5])))
    src = [u for u, _ in dag.edges]
    dst = [v for _, v in dag.edges]
    succ_ptr, succ_idx = _csr(dag.n, src, dst)
    pred_ptr, pred_idx = _csr(dag.n, dst, src)
    weights = np.array(draw(st.lists(st.floats(0, 100, allow_nan=False), min_size=dag.n,
                                     max_size=dag.n)))
    mask = np.array(draw(st.lists(st.booleans(), min_size=dag.n, max_size=dag.n)), dtype=np.bool_)
    return dag, succ_ptr, succ_idx, pred_ptr, pred_idx, weights, mask


def _same(a, b) -> None:
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _both(kern, *args):
    """Run the compiled kernel and its own source (``.py_func``) on copies of the arguments;
    both must agree (a compilation check). Returns the compiled kernel's result."""
    copy = lambda xs: tuple(x.copy() if isinstance(x, np.ndarray) else x for x in xs)  # noqa: E731
    with compiled(kern):  # small inputs would run the source
        fast = kern(*copy(args))
    python = kern.py_func(*copy(args))
    _same(fast, python)
    return fast


def _longest_paths(n: int, edges, weight) -> list[float]:
    """Per node, the heaviest path ending there (``weight`` of its nodes summed), over every
    path of the DAG, enumerated."""
    succ = {v: [y for x, y in edges if x == v] for v in range(n)}
    best = [-np.inf] * n

    def walk(v: int, total: float) -> None:
        best[v] = max(best[v], total)
        for w in succ[v]:
            walk(w, total + weight(w))

    for v in range(n):
        walk(v, weight(v))
    return best


COVERED = {"kahn_order", "longest_path_levels", "weighted_longest_path", "ancestors_mask",
           "descendants_mask", "contiguity_violation"}


def test_every_graph_kernel_is_covered_here() -> None:
    kernels = {name for name, obj in vars(gk).items() if isinstance(obj, LazyKernel)}
    assert kernels == COVERED, f"add twin tests for {sorted(kernels - COVERED)}"
    for name in kernels:
        assert callable(getattr(gk, name).py_func)


@given(digraphs())
def test_kahn_order(case) -> None:
    n, ptr, idx, pairs = case
    with compiled(gk.kahn_order):
        order, count = gk.kahn_order(n, ptr.copy(), idx.copy())
    twin_order, twin_count = gk.kahn_order.py_func(n, ptr.copy(), idx.copy())
    # entries past ``count`` are scratch (np.empty) and may differ
    assert count == twin_count
    np.testing.assert_array_equal(order[:count], twin_order[:count])
    g = nx.DiGraph(pairs)
    g.add_nodes_from(range(n))
    assert (count == n) == nx.is_directed_acyclic_graph(g)
    prefix = order[:count].tolist()
    assert len(set(prefix)) == count
    pos = {v: i for i, v in enumerate(prefix)}
    for u, v in pairs:  # an ordered node's predecessors are all ordered before it
        if v in pos:
            assert u in pos and pos[u] < pos[v]


@given(topo_dags())
def test_longest_path_levels(case) -> None:
    dag, _, _, pred_ptr, pred_idx, _, _ = case
    levels = _both(gk.longest_path_levels, dag.n, pred_ptr, pred_idx)
    assert levels.tolist() == [x - 1 for x in _longest_paths(dag.n, dag.edges, lambda v: 1)]


@given(topo_dags())
def test_weighted_longest_path(case) -> None:
    dag, _, _, pred_ptr, pred_idx, weights, _ = case
    finish = _both(gk.weighted_longest_path, dag.n, pred_ptr, pred_idx, weights)
    np.testing.assert_allclose(finish, _longest_paths(dag.n, dag.edges, lambda v: weights[v]),
                               rtol=1e-12)


@given(topo_dags())
def test_reachability_masks(case) -> None:
    dag, succ_ptr, succ_idx, _, _, _, mask = case
    down = _both(gk.descendants_mask, dag.n, succ_ptr, succ_idx, mask)
    up = _both(gk.ancestors_mask, dag.n, succ_ptr, succ_idx, mask)
    g = nx.DiGraph(list(dag.edges))
    g.add_nodes_from(range(dag.n))
    seeds = np.flatnonzero(mask).tolist()
    want_down = set(seeds).union(*(nx.descendants(g, s) for s in seeds))
    want_up = set(seeds).union(*(nx.ancestors(g, s) for s in seeds))
    assert set(np.flatnonzero(down).tolist()) == want_down
    assert set(np.flatnonzero(up).tolist()) == want_up


@given(topo_dags())
def test_contiguity_violation(case) -> None:
    dag, succ_ptr, succ_idx, _, _, _, mask = case
    u, v = _both(gk.contiguity_violation, dag.n, succ_ptr, succ_idx, mask)
    # Definition 3.1 of paper 1: no u in S, v not in S, w in S with v reachable from u and
    # w from v
    g = nx.DiGraph(list(dag.edges))
    g.add_nodes_from(range(dag.n))
    inside = set(np.flatnonzero(mask).tolist())
    broken = any(x not in inside and nx.has_path(g, a, x) and nx.has_path(g, x, b)
                 for a in inside for b in inside for x in range(dag.n))
    assert (u >= 0) == broken and (u < 0) == (v < 0)
    if broken:  # an edge u -> v leaving S to a node that reaches S again
        assert mask[u] and not mask[v] and g.has_edge(u, v)
        assert any(nx.has_path(g, v, b) for b in inside)


# -- local-search kernels -------------------------------------------------------------------

lsk = pytest.importorskip("dnnpart.baselines.local_search_kernels")


def _ls_arrays(problem):
    from dnnpart.pricing.loads import node_times

    g, cl = problem.graph, problem.cluster
    n, d = g.n_nodes, cl.n_devices
    node_time = np.column_stack([node_times(g, cl, np.full(n, x)) for x in range(d)])
    out_cost, uniform = g.node_out_cost()
    return dict(
        succ_ptr=g.succ_ptr, succ_idx=g.succ_idx.astype(np.int64), pred_ptr=g.pred_ptr,
        pred_idx=g.pred_idx.astype(np.int64), edge_cost=g.edge_cost, node_time=node_time,
        out_cost=out_cost, uniform=uniform, is_acc=cl.is_accelerator(),
        node_memory=g.memory_bytes,
    )


@given(problems_and_plans(max_nodes=7, training=False, unsupported_prob=0.0),
       st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4)), max_size=6))
def test_local_search_kernels_compile_like_their_source_and_match_the_evaluator(case, moves) -> None:
    problem, plan = case
    ar = _ls_arrays(problem)
    n, d = problem.graph.n_nodes, problem.cluster.n_devices
    assign = plan.assignment.astype(np.int64)
    cnt, loads, memory = lsk.initial_state(assign.copy(), d, ar["succ_ptr"], ar["succ_idx"],
                                           ar["edge_cost"], ar["node_time"], ar["out_cost"],
                                           ar["uniform"], ar["is_acc"], ar["node_memory"])
    np.testing.assert_allclose(loads, evaluate(problem, plan).load)
    twin = (assign.copy(), cnt.copy(), loads.copy(), memory.copy())
    state = (assign.copy(), cnt.copy(), loads.copy(), memory.copy())
    rest = (ar["node_memory"], ar["succ_ptr"], ar["succ_idx"], ar["pred_ptr"], ar["pred_idx"],
            ar["edge_cost"], ar["node_time"], ar["out_cost"], ar["uniform"], ar["is_acc"])
    for w, target in moves:
        w, target = w % n, target % d
        lsk.move_node(w, target, *state[:3], state[3], *rest)
        lsk.move_node.py_func(w, target, *twin[:3], twin[3], *rest)
        for x, y in zip(state, twin, strict=True):
            np.testing.assert_allclose(x, y)
        moved = Plan(assignment=state[0])
        np.testing.assert_allclose(state[2], evaluate(problem, moved).load, atol=1e-9)
        np.testing.assert_allclose(state[3], evaluate(problem, moved).memory_bytes)
