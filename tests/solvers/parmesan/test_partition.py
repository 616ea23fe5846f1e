"""Phase 1: DP vs brute force over chains of fronted subgraphs, clustering invariants,
refinement monotonicity."""

from __future__ import annotations

import itertools
import math
from functools import cache

import networkx as nx
import numpy as np
import pytest

from dnnpart.graph.core import Graph, build_graph
from dnnpart.graph.ideals import enumerate_ideals
from dnnpart.solvers.parmesan.clustering import Merge, cluster_ops
from dnnpart.solvers.parmesan.opdag import MemoryModel, OpDag, atomic_dag, quotient
from dnnpart.solvers.parmesan.partition_dp import partition_dp, stage_times
from dnnpart.solvers.parmesan.phase1 import partition_ops, pipeline_stages
from dnnpart.solvers.parmesan.refinement import refine

N_FAST = 40
N_ALL = 320


def random_graph(rng: np.random.Generator, n: int, density: float) -> Graph:
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < density]
    ids = rng.permutation(n) * 3 + 7  # not topological
    eb = rng.integers(0, 6, len(edges)).astype(float)
    eb[rng.random(len(edges)) < 0.2] = np.nan
    compute = np.stack([np.full(n, 99.0), rng.integers(0, 10, n).astype(float)], 1)
    cost = rng.integers(0, 5, len(edges)) * 0.5
    out = rng.integers(0, 6, n).astype(float)
    return build_graph(
        ids.tolist(), [int(ids[u]) for u, _ in edges], [int(ids[v]) for _, v in edges],
        compute_time=compute, edge_cost=cost, edge_bytes=eb, memory_bytes=out, output_bytes=out,
        param_bytes=rng.integers(0, 4, n).astype(float),
    )


def case(seed: int) -> tuple[Graph, int, int, int | None, MemoryModel]:
    rng = np.random.default_rng(seed)
    g = random_graph(rng, int(rng.integers(1, 9)), float(rng.uniform(0.15, 0.6)))
    s = int(rng.integers(1, 4))
    d = int(rng.integers(s, 7))
    fixed = d // s if d % s == 0 and rng.random() < 0.4 else None
    model = MemoryModel(micro_batches=int(rng.integers(1, 5)),
                        schedule="gpipe" if rng.random() < 0.3 else "1f1b",
                        recompute=bool(rng.random() < 0.3))
    total = float(model.stage_memory(g.node_param_bytes().sum(), g.node_output_bytes().sum(),
                                      0.0, 0, s))
    cap = math.inf if rng.random() < 0.3 else total * float(rng.uniform(0.4, 1.3))
    mem = MemoryModel(device_memory=cap, micro_batches=model.micro_batches,
                      schedule=model.schedule, recompute=model.recompute,
                      training=bool(rng.random() < 0.7))
    return g, s, d, fixed, mem


def brute_force(g: Graph, s_n: int, d_n: int, fixed: int | None, mem: MemoryModel) -> float:
    """Min over chains of fronted subgraphs and replica splits, Eq. 3 and memory written out."""
    n = g.n_nodes
    acc = g.time_on("accelerator")
    src, dst = g.edge_sources(), g.succ_idx
    nbytes = np.where(np.isnan(g.edge_bytes), g.node_output_bytes()[src], g.edge_bytes)
    ideals = enumerate_ideals(g)

    def members(x: int) -> list[int]:
        return [v for v in range(n) if x >> v & 1]

    @cache
    def work(u: int) -> float:
        t = sum(acc[v] for v in members(u))
        for e in range(g.n_edges):
            if (u >> int(src[e]) & 1) != (u >> int(dst[e]) & 1):
                t += g.edge_cost[e]
        return float(t)

    @cache
    def fits(u: int, pos: int) -> bool:
        ms = members(u)
        p = sum(g.node_param_bytes()[v] for v in ms)
        a = sum(g.node_output_bytes()[v] for v in ms)
        i = sum(nbytes[e] for e in range(g.n_edges)
                if u >> int(dst[e]) & 1 and not u >> int(src[e]) & 1)
        if not mem.training:  # the simulator: weights, one micro-batch's stash
            return p + (i if mem.recompute else a) <= mem.device_memory
        # replica 0 of a stage runs micro-batches 0, R, 2R, ...: ceil(m / R) of them
        per = math.ceil(mem.micro_batches / (fixed or 1))
        k = per if mem.schedule == "gpipe" else max(1, min(per, s_n - pos))
        total = (2 + mem.optimizer_states) * p + (k * i + a if mem.recompute else k * a)
        return total <= mem.device_memory

    splits = ([(fixed,) * s_n] if fixed else
              [c for c in itertools.product(range(1, d_n + 1), repeat=s_n) if sum(c) == d_n])
    full = (1 << n) - 1
    best = math.inf

    def chains(prev: int, left: int) -> list[list[int]]:
        if left == 1:
            return [[full]] if full != prev else []
        out = []
        for x in ideals:
            if x != prev and x & prev == prev and x != full:
                out += [[x, *rest] for rest in chains(x, left - 1)]
        return out

    for chain in chains(0, s_n):
        sets, prev = [], 0
        for x in chain:
            sets.append(x & ~prev)
            prev = x
        if not all(fits(u, j) for j, u in enumerate(sets)):
            continue
        for split in splits:
            best = min(best, max(work(u) / r for u, r in zip(sets, split, strict=True)))
    return best


@pytest.mark.parametrize("seed", [pytest.param(i, marks=pytest.mark.slow) if i >= N_FAST
                                  else i for i in range(N_ALL)])
def test_dp_equals_brute_force(seed: int) -> None:
    g, s, d, fixed, mem = case(seed)
    expect = brute_force(g, s, d, fixed, mem)
    dag, atom = atomic_dag(g)
    res = partition_dp(dag, s, d, replicas=fixed, memory=mem)
    if math.isinf(expect):
        assert res.stage_of is None and math.isinf(res.objective)
        return
    assert res.objective == pytest.approx(expect)
    assert res.stage_of is not None and res.replicas is not None
    assert int(res.replicas.sum()) == d and (fixed is None or set(res.replicas) == {fixed})
    # the returned partition has that value and is a chain of fronted subgraphs
    assert float(stage_times(dag, res.stage_of, res.replicas).max()) == pytest.approx(expect)
    op_stage = res.stage_of[atom]
    assert all(op_stage[u] <= op_stage[v] for u, v in zip(g.edge_sources(), g.succ_idx,
                                                           strict=True))
    assert sorted(set(op_stage.tolist())) == list(range(s))


def _is_acyclic_quotient(dag: OpDag, blocks: list[frozenset[int]]) -> bool:
    lab = {v: i for i, b in enumerate(blocks) for v in b}
    q = nx.DiGraph()
    q.add_nodes_from(range(len(blocks)))
    q.add_edges_from((lab[a], lab[b]) for a, b in zip(dag.src.tolist(), dag.dst.tolist(),
                                                       strict=True) if lab[a] != lab[b])
    return nx.is_directed_acyclic_graph(q)


def _convex(g: nx.DiGraph, block: frozenset[int]) -> bool:
    for u in block:
        for w in nx.descendants(g, u) - block:
            if nx.descendants(g, w) & block:
                return False
    return True


@pytest.mark.parametrize("seed", range(12))
def test_clustering_invariants_and_eq4_argmin(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    g = random_graph(rng, int(rng.integers(8, 31)), float(rng.uniform(0.05, 0.25)))
    dag, _ = atomic_dag(g)
    mem = MemoryModel(device_memory=float(rng.uniform(10, 80)), micro_batches=2)
    alpha = float(rng.choice([0.001, 0.5, 2.0]))
    trace: list[Merge] = []
    k = int(rng.integers(1, max(2, dag.n // 2)))
    label = cluster_ops(dag, k, alpha=alpha, memory=mem, n_stages=2, trace=trace)
    structure = nx.DiGraph(list(zip(dag.src.tolist(), dag.dst.tolist(), strict=True)))
    structure.add_nodes_from(range(dag.n))
    comm: dict[tuple[int, int], float] = {}
    for a, b, t in zip(dag.c_src.tolist(), dag.c_dst.tolist(), dag.c_time.tolist(), strict=True):
        comm[(a, b)] = comm.get((a, b), 0.0) + t

    def mem_of(block: frozenset[int]) -> float:
        mask = np.zeros(dag.n, np.bool_)
        mask[list(block)] = True
        return float(dag.memory(mask, mem, 0, 2)[0])

    blocks = [frozenset([v]) for v in range(dag.n)]
    for step in trace:
        # every valid adjacent pair and its Eq. 4 cost, by brute force
        costs = []
        for x, y in itertools.permutations(range(len(blocks)), 2):
            bx, by = blocks[x], blocks[y]
            if not any(structure.has_edge(a, b) for a in bx for b in by):
                continue
            merged = [b for i, b in enumerate(blocks) if i not in (x, y)] + [bx | by]
            if not _is_acyclic_quotient(dag, merged) or mem_of(bx | by) > mem.device_memory:
                continue
            cm = sum(t for (a, b), t in comm.items() if (a in bx and b in by)
                     or (a in by and b in bx))
            costs.append(float(dag.compute[list(bx)].sum() + dag.compute[list(by)].sum())
                         - alpha * cm)
        assert step.u in blocks and step.v in blocks
        assert step.cost == pytest.approx(min(costs))
        blocks = [b for b in blocks if b not in (step.u, step.v)] + [step.u | step.v]
        assert _is_acyclic_quotient(dag, blocks)
        assert all(_convex(structure, b) for b in blocks)
        assert all(mem_of(b) <= mem.device_memory for b in blocks if len(b) > 1)
    assert len(set(label.tolist())) == len(blocks)
    # labels are a topological numbering of the hyper-graph
    q = quotient(dag, label)
    assert np.all(q.src < q.dst)


@pytest.mark.parametrize("seed", range(25))
def test_refinement_never_increases_max_stage_time(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    g = random_graph(rng, int(rng.integers(4, 25)), float(rng.uniform(0.1, 0.4)))
    s = int(rng.integers(1, 4))
    res = partition_ops(g, s, s * 2, replicas=2, k=int(rng.integers(s, 8)),
                        memory=MemoryModel(), refine_steps=0)
    if res.atom_stage is None or res.replicas is None:
        return
    before = float(stage_times(res.dag, res.atom_stage, res.replicas).max())
    after_stage, _ = refine(res.dag, res.atom_stage, res.replicas)
    after = float(stage_times(res.dag, after_stage, res.replicas).max())
    assert after <= before + 1e-12
    for u, v in zip(res.dag.src.tolist(), res.dag.dst.tolist(), strict=True):
        assert after_stage[u] <= after_stage[v]
    assert sorted(set(after_stage.tolist())) == list(range(s))


def test_clustering_plus_dp_never_beats_the_exact_dp() -> None:
    for seed in range(15):
        rng = np.random.default_rng(300 + seed)
        g = random_graph(rng, int(rng.integers(6, 12)), 0.3)
        exact = partition_ops(g, 2, 4, replicas=2, k=None, refine_steps=0)
        clustered = partition_ops(g, 2, 4, replicas=2, k=4, refine_steps=0)
        refined = partition_ops(g, 2, 4, replicas=2, k=4)
        assert exact.objective <= clustered.objective + 1e-12
        assert exact.objective <= refined.objective + 1e-12
        assert refined.objective <= clustered.objective + 1e-12


def test_pipeline_stages_feeds_phase2() -> None:
    rng = np.random.default_rng(5)
    g = random_graph(rng, 10, 0.3)
    res = partition_ops(g, 2, 4, replicas=2, k=6)
    assert res.atom_stage is not None
    st = pipeline_stages(res.dag, res.atom_stage, 2)
    assert st.n_devices == 4
    dag, _ = atomic_dag(g)
    assert st.compute.sum() * 2 == pytest.approx(dag.compute.sum())
    assert st.param_bytes.sum() == pytest.approx(g.node_param_bytes().sum())


def module_graph(rng: np.random.Generator) -> Graph:
    """A random stack of modules (each a small DAG between an entry and an exit op, with
    ``module_paths``), residual skips between modules, zero-time parameter sources, and
    sometimes the mirrored backward pass: a small stand-in for an imported training graph."""
    from dnnpart.graph.training import add_backward_pass

    srcs: list[int] = []
    dsts: list[int] = []
    paths: list[str] = []
    comp: list[float] = []
    exits: list[int] = []
    prev = None
    for m in range(int(rng.integers(3, 8))):
        first = len(paths)
        width = int(rng.integers(1, 4))
        body = list(range(first + 1, first + 1 + width))
        last = first + 1 + width
        for _ in range(first, last + 1):
            paths.append(f"block.{m}")
            comp.append(float(rng.integers(1, 10)))
        for v in body:
            srcs.append(first)
            dsts.append(v)
            srcs.append(v)
            dsts.append(last)
        if prev is not None:
            srcs.append(prev)
            dsts.append(first)
            if exits[:-1] and rng.random() < 0.5:  # a residual skip from an earlier module
                srcs.append(int(rng.choice(exits[:-1])))
                dsts.append(last)
        if rng.random() < 0.6:  # a parameter: a zero-time source read by one op
            p = len(paths)
            paths.append(f"block.{m}")
            comp.append(0.0)
            srcs.append(p)
            dsts.append(int(rng.choice(body)))
        exits.append(last)
        prev = last
    n = len(paths)
    e = len(srcs)
    g = build_graph(
        list(range(n)), srcs, dsts,
        compute_time=np.stack([np.full(n, 99.0), np.array(comp)], 1),
        edge_cost=rng.integers(0, 5, e) * 0.5, edge_bytes=rng.integers(1, 6, e).astype(float),
        memory_bytes=rng.integers(0, 6, n).astype(float),
        param_bytes=rng.integers(0, 4, n).astype(float), module_paths=paths,
    )
    return add_backward_pass(g) if rng.random() < 0.5 else g


@pytest.mark.parametrize("seed", range(40))
def test_op_level_partition_never_loses_to_the_layer_level_dp(seed: int) -> None:
    """The invariant the ``parmesan`` method relies on: clustering that respects the
    layer-level (PipeDream) partition keeps it among the DP's chains, so the op-level max stage
    time (after the DP, and after refinement) is never above the layer-level DP's. (Measured
    when written: on 60 such cases, 42 feasible, clustering to the same ``k`` without
    ``respect`` lost to the layer-level DP in 3.)"""
    from dnnpart.devices.presets import reference_cluster
    from dnnpart.problem import Objective, Problem
    from dnnpart.solvers.parmesan.solver import _layer_partition

    rng = np.random.default_rng(400 + seed)
    g = module_graph(rng)
    s = int(rng.integers(1, 4))
    r = int(rng.integers(1, 3))
    model = MemoryModel(micro_batches=int(rng.integers(1, 5)), recompute=bool(rng.random() < 0.5))
    total = float(model.stage_memory(g.node_param_bytes().sum(), g.node_output_bytes().sum(),
                                      0.0, 0, s))
    cap = math.inf if rng.random() < 0.4 else total * float(rng.uniform(0.4, 1.0))
    mem = MemoryModel(device_memory=cap, micro_batches=model.micro_batches,
                      recompute=model.recompute)
    problem = Problem(graph=g, cluster=reference_cluster(n_accelerators=s * r, n_cpus=0,
                                                         memory_bytes=cap),
                      objective=Objective(kind="pipeline"))
    layer = _layer_partition(problem, s, s * r, r, mem, 10**6)
    if layer is None:
        return
    k = int(rng.integers(s, s + 4))  # coarse: free clustering would often lose here
    op = partition_ops(g, s, s * r, replicas=r, k=k, memory=mem, respect=layer.stage_of)
    assert op.stage_of is not None
    tol = 1e-9 * max(1.0, layer.objective)
    assert op.dp_objective <= layer.objective + tol
    assert op.objective <= op.dp_objective + tol
    # the same partition scored on the op DAG has the layer DP's value
    start = np.empty(op.dag.n, np.int64)
    start[op.atom] = layer.stage_of
    assert float(stage_times(op.dag, start, layer.replicas).max()) == pytest.approx(
        layer.objective)


@pytest.mark.parametrize("seed", range(40))
def test_chain_dp_equals_the_dp_over_the_chained_dag(seed: int) -> None:
    """The prefix-sum DP over one linear order equals the lattice DP on the DAG whose structure
    is that order (same ops, communication edges and memory caps)."""
    import dataclasses

    from dnnpart.solvers.parmesan.partition_dp import partition_chain_dp
    from dnnpart.solvers.parmesan.phase1 import linear_order

    g, s, d, fixed, mem = case(1000 + seed)
    dag, _ = atomic_dag(g)
    order = linear_order(dag)
    pos = np.empty(dag.n, np.int64)
    pos[order] = np.arange(dag.n)
    assert np.all(pos[dag.src] < pos[dag.dst])
    chained = dataclasses.replace(dag, src=order[:-1].copy(), dst=order[1:].copy())
    want = partition_dp(chained, s, d, replicas=fixed, memory=mem)
    got = partition_chain_dp(dag, order, s, d, replicas=fixed, memory=mem)
    assert got.objective == pytest.approx(want.objective)
    assert got.n_ideals == dag.n + 1 == want.n_ideals
    if got.stage_of is not None and got.replicas is not None:
        times = stage_times(dag, got.stage_of, got.replicas)
        assert float(times.max()) == pytest.approx(got.objective)
        assert np.all(np.diff(got.stage_of[order]) >= 0)  # prefixes of the order


def test_phase1_clusters_harder_until_the_lattice_fits() -> None:
    from dnnpart.errors import ProblemTooLargeError

    # 24 parallel branches between a source and a sink: about 2**24 fronted subgraphs
    n = 26
    src = [0] * 24 + list(range(1, 25))
    dst = list(range(1, 25)) + [25] * 24
    g = build_graph(list(range(n)), src, dst, compute_time=np.ones((n, 2)),
                    edge_cost=np.full(len(src), 0.5))
    with pytest.raises(ProblemTooLargeError):
        partition_ops(g, 2, 2, k=None, max_ideals=500)
    res = partition_ops(g, 2, 2, k=20, max_ideals=500)
    assert res.n_coarsenings >= 1 and res.n_ideals <= 500 and res.lattice == "ideals"
    assert res.objective < math.inf
    path = partition_ops(g, 2, 2, k=None, max_ideals=500, too_large="chain")
    assert path.lattice == "linear order" and path.n_ideals == n + 1


def test_stalled_clustering_fuses_pieces_of_a_respected_stage() -> None:
    """20 independent two-op chains feeding one sink, the chains respected as stage 0: adjacent
    clustering stops at 20 pieces (2**20 fronted subgraphs); fusing pieces of one stage (no
    path joins them) brings the lattice under the cap, and every hyper-op stays in one
    respected stage, so the respected partition stays among the DP's chains."""
    m = 20
    n = 2 * m + 1
    src = list(range(m)) + list(range(m, 2 * m))
    dst = list(range(m, 2 * m)) + [2 * m] * m
    g = build_graph(list(range(n)), src, dst, compute_time=np.ones((n, 2)),
                    edge_cost=np.full(len(src), 0.25))
    respect = np.array([0] * (2 * m) + [1])
    res = partition_ops(g, 2, 2, k=4, max_ideals=300, respect=respect, refine_steps=0)
    assert res.n_ideals <= 300 and res.n_coarsenings >= 1
    dag, atom = atomic_dag(g)
    start = np.empty(dag.n, np.int64)
    start[atom] = respect
    assert res.objective <= float(stage_times(dag, start, np.array([1, 1])).max()) + 1e-9
    assert res.n_hyper_ops < 2 * m + 1
