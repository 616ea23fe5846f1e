"""Throughput DP over ideals and DPL (paper 1, sections 5.1.1, 5.1.2, 5.3, appendix B)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.workloads import over_workloads

import dnnpart.solvers.dp as dpmod
import dnnpart.solvers.dp.driver as driver
from dnnpart.devices import reference_cluster
from dnnpart.errors import ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph import GraphBuilder, count_ideals
from dnnpart.graph.stage_graph import build_stage_graph
from dnnpart.plan import Plan, Status
from dnnpart.problem import Objective, Problem
from dnnpart.solvers import solve
from dnnpart.solvers.dp import enumerate_stage_ideals, lattice_kernels, run_dp
from dnnpart.solvers.dp import kernels as dpk
from dnnpart.solvers.dp.bounds import work_bound
from dnnpart.solvers.dp.devices import device_model
from dnnpart.testing import chain_problem, random_problem
from dnnpart.testing import dp_row_twins as row_twins
from dnnpart.testing.jit import compiled

WORKLOADS = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "workloads" / "dnn-partitioning"
    / "throughput"
)

# Paper 1, Table 1: (folder, file) -> (ideals, DP, DPL)
PUBLISHED = {
    ("OperatorGraphs", "bert_l-3_inference"): (1428, 27.92, 27.92),
    ("OperatorGraphs", "bert_l-6_inference"): (1923, 29.58, 29.58),
    ("OperatorGraphs", "bert_l-12_inference"): (2906, 147.48, 147.48),
    ("OperatorGraphs", "resnet50_inference"): (241, 124.35, 124.35),
    ("OperatorGraphs", "bert_l-3_training"): (2774, 65.30, 65.30),
    ("OperatorGraphs", "resnet50_training"): (258, 255.19, 255.19),
    ("LayerGraphs", "bert24_inference"): (30, 17.79, 17.79),
    ("LayerGraphs", "resnet50_inference"): (242, 33.77, 33.77),
    ("LayerGraphs", "inceptionv3_inference"): (36596, 51.55, 51.55),
    ("LayerGraphs", "gnmt_inference"): (17914, 32.91, 32.91),
    ("LayerGraphs", "bert24_training"): (30, 41.75, 41.75),
    ("LayerGraphs", "resnet50_training"): (242, 78.63, 78.65),
    ("LayerGraphs", "inceptionv3_training"): (36596, 122.76, 123.93),
    ("LayerGraphs", "gnmt_training"): (17914, 107.00, 107.00),
}
SLOW = {"inceptionv3_inference", "inceptionv3_training"}


def _workload_params() -> list[object]:
    params = []
    for (folder, name), expected in PUBLISHED.items():
        marks = [pytest.mark.slow] if name in SLOW else []
        params.append(pytest.param(folder, name, expected, marks=marks, id=f"{folder[:2]}-{name}"))
    return params


def _published_equal(value: float, published: float) -> bool:
    # The table rounds to two decimals: equal after rounding, or within 0.01 %.
    return abs(value - published) <= 0.005 + 1e-4 * published


# -- published figures -------------------------------------------------------------------

@pytest.mark.parametrize(("folder", "name", "expected"), over_workloads(_workload_params()))
def test_published_workloads(folder: str, name: str, expected: tuple[int, float, float]) -> None:
    path = WORKLOADS / folder / f"{name}.json"
    if not path.exists():
        pytest.skip(f"reference workload {path} is absent (../shared/workloads not mounted)")
    from dnnpart.io import read_problem

    problem = read_problem(path)
    n_ideals, dp_value, dpl_value = expected
    dp = solve(problem, "dp")
    dpl = solve(problem, "dpl")
    assert dp.status is Status.OPTIMAL
    assert dp.stats["n_ideals"] == n_ideals
    assert _published_equal(dp.objective, dp_value), (dp.objective, dp_value)
    assert dp.objective == pytest.approx(evaluate(problem, dp.require_plan()).objective)
    assert dpl.status is Status.FEASIBLE
    assert dpl.objective >= dp.objective * (1 - 1e-12)
    assert dpl.objective <= dpl_value * 1.01
    assert evaluate(problem, dp.require_plan()).contiguous.all()


# -- small exact cases -------------------------------------------------------------------

def test_chain_balances_and_pays_transfers() -> None:
    p = chain_problem([4, 1, 1, 4], n_accelerators=2, cost=0.5)
    r = solve(p, "dp")
    assert r.status is Status.OPTIMAL
    assert r.objective == pytest.approx(5.5)  # {4,1} + 0.5 out, {1,4} + 0.5 in
    assert r.bound == r.objective


def test_unsupported_nodes_go_to_cpu_and_infeasible_is_a_status() -> None:
    b = GraphBuilder()
    b.add_node(0, acc_time=1.0, cpu_time=10.0)
    b.add_node(1, acc_time=math.inf, cpu_time=3.0)
    b.add_node(2, acc_time=1.0, cpu_time=10.0)
    b.add_edge(0, 1, cost=0.0)
    b.add_edge(1, 2, cost=0.0)
    g = b.build()
    with_cpu = Problem(graph=g, cluster=reference_cluster(n_accelerators=2, n_cpus=1,
                                                          memory_bytes=math.inf))
    r = solve(with_cpu, "dp")
    assert r.status is Status.OPTIMAL and r.objective == 3.0
    assert r.require_plan().assignment[g.index_of([1])[0]] == 2
    no_cpu = Problem(graph=g, cluster=reference_cluster(n_accelerators=2, n_cpus=0,
                                                        memory_bytes=math.inf))
    r = solve(no_cpu, "dp")
    assert r.status is Status.INFEASIBLE and r.plan is None


def test_memory_limit_forces_a_split() -> None:
    b = GraphBuilder()
    for v in range(4):
        b.add_node(v, acc_time=1.0, cpu_time=100.0, memory_bytes=1.0)
    for v in range(3):
        b.add_edge(v, v + 1, cost=0.0)
    p = Problem(graph=b.build(), cluster=reference_cluster(n_accelerators=3, n_cpus=0,
                                                           memory_bytes=2.0))
    r = solve(p, "dp")
    assert r.objective == 2.0
    assert evaluate(p, r.require_plan()).memory_bytes.max() <= 2.0


def test_too_many_ideals_raises_with_advice() -> None:
    b = GraphBuilder()
    for v in range(12):  # no edges: 2**12 ideals
        b.add_node(v, acc_time=1.0, cpu_time=2.0)
    p = Problem(graph=b.build(), cluster=reference_cluster(n_accelerators=2, n_cpus=0,
                                                           memory_bytes=math.inf))
    with pytest.raises(ProblemTooLargeError, match="dpl"):
        solve(p, "dp", max_ideals=1000)
    assert solve(p, "dp", max_ideals=5000).stats["n_ideals"] == 2**12
    with pytest.raises(ValueError, match="max_ideals"):
        solve(p, "dp", max_ideals=0)
    with pytest.raises(ValueError, match="unknown option"):
        solve(p, "dp", colour=1)


def test_gpipe_is_feasible_with_pipedream_bound() -> None:
    p = random_problem(np.random.default_rng(3), n_nodes=5, training=True,
                       objective=Objective(training="gpipe"))
    r = solve(p, "dp")
    assert r.status is Status.FEASIBLE
    assert r.bound is not None and r.bound <= r.objective + 1e-9
    pipedream = solve(p.with_objective(Objective()), "dp")
    assert r.bound == pytest.approx(pipedream.objective)


def test_orphaned_backward_nodes_are_placed() -> None:
    # backward node 3 has no forward partner (no colour class): it gets an artificial image
    b = GraphBuilder()
    b.add_node(0, acc_time=2.0, cpu_time=20.0, color_class=0)
    b.add_node(1, acc_time=2.0, cpu_time=20.0, color_class=1)
    b.add_node(10, acc_time=3.0, cpu_time=30.0, is_backward=True, color_class=1)
    b.add_node(11, acc_time=3.0, cpu_time=30.0, is_backward=True)
    b.add_node(12, acc_time=3.0, cpu_time=30.0, is_backward=True, color_class=0)
    b.add_edge(0, 1, cost=1.0)
    b.add_edge(1, 10, cost=1.0)
    b.add_edge(10, 11, cost=1.0)
    b.add_edge(11, 12, cost=1.0)
    p = Problem(graph=b.build(), cluster=reference_cluster(n_accelerators=2, n_cpus=0,
                                                           memory_bytes=math.inf))
    stage = build_stage_graph(p.graph)
    assert stage.n_artificial == 1
    r = solve(p, "dp")
    assert r.status is Status.OPTIMAL
    assert r.objective == pytest.approx(evaluate(p, r.require_plan()).objective)
    assert evaluate(p, r.require_plan()).contiguous.all()


def test_non_uniform_out_edges_are_charged_per_edge() -> None:
    b = GraphBuilder()
    for v in range(4):
        b.add_node(v, acc_time=1.0, cpu_time=50.0)
    b.add_edge(0, 1, cost=0.25)
    b.add_edge(0, 2, cost=2.0)
    b.add_edge(1, 3, cost=0.5)
    b.add_edge(2, 3, cost=0.5)
    p = Problem(graph=b.build(), cluster=reference_cluster(n_accelerators=3, n_cpus=0,
                                                           memory_bytes=math.inf))
    r = solve(p, "dp")
    oracle = solve(p, "brute-force-contiguous")
    assert r.objective == pytest.approx(oracle.objective)


@pytest.mark.parametrize("overlap", ["none", "compute-comm", "full-duplex"])
def test_overlap_modes_match_oracle(overlap: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(3):
        p = random_problem(rng, n_nodes=6, n_accelerators=2, n_cpus=1,
                           objective=Objective(overlap=overlap))
        assert solve(p, "dp").objective == pytest.approx(_pipeline_oracle(p))


# -- property tests ----------------------------------------------------------------------

def _pipeline_oracle(problem: Problem) -> float:
    """Best feasible split in the DP's space, by exhaustion over colocation groups.

    The DP's space: every device's forward and backward parts contiguous and the devices
    orderable as a pipeline (the forward quotient graph acyclic). ``brute-force-contiguous``
    searches a little more: contiguous parts whose quotient has a cycle (e.g. a->b, c->d
    split as {a, d}, {b, c}), which no pipeline order can run.
    """
    g, d = problem.graph, problem.cluster.n_devices
    cls = g.color_class.copy()
    free = cls < 0
    cls[free] = cls.max(initial=0) + 1 + np.arange(int(free.sum()))
    groups, group_of = np.unique(cls, return_inverse=True)
    src, dst = g.edge_sources(), g.succ_idx.astype(np.int64)
    fw = ~g.is_backward[src] & ~g.is_backward[dst]
    best = math.inf
    for combo in itertools.product(range(d), repeat=groups.size):
        a = np.asarray(combo, dtype=np.int32)[group_of]
        ev = evaluate(problem, Plan(assignment=a))
        if not ev.feasible or not ev.contiguous.all() or ev.objective >= best:
            continue
        q_src, q_dst = a[src[fw]], a[dst[fw]]
        cut = q_src != q_dst
        if _has_cycle(d, q_src[cut], q_dst[cut]):
            continue
        best = ev.objective
    return best


def _has_cycle(d: int, src: np.ndarray, dst: np.ndarray) -> bool:
    succ = {i: set() for i in range(d)}
    for u, v in zip(src.tolist(), dst.tolist(), strict=True):
        succ[u].add(v)
    state = [0] * d

    def visit(u: int) -> bool:
        state[u] = 1
        for w in succ[u]:
            if state[w] == 1 or (state[w] == 0 and visit(w)):
                return True
        state[u] = 2
        return False

    return any(state[u] == 0 and visit(u) for u in range(d))


@st.composite
def small_problems(draw: st.DrawFn) -> Problem:
    training = draw(st.booleans())
    n_acc = draw(st.integers(1, 3))
    n_cpu = draw(st.integers(0, 2))
    d = n_acc + n_cpu
    max_fw = {1: 8, 2: 8, 3: 6, 4: 5, 5: 4}[d]
    n_nodes = draw(st.integers(1, max_fw if not training else min(max_fw, 5)))
    seed = draw(st.integers(0, 2**31))
    memory = draw(st.sampled_from([None, 0.3, 0.5, 0.8]))
    overlap = draw(st.sampled_from(["none", "none", "compute-comm", "full-duplex"]))
    return random_problem(
        np.random.default_rng(seed), n_nodes=n_nodes, edge_prob=draw(st.sampled_from([0.2, 0.4, 0.7])),
        n_accelerators=n_acc, n_cpus=n_cpu, memory_fraction=memory,
        unsupported_prob=draw(st.sampled_from([0.0, 0.2])), training=training,
        objective=Objective(overlap=overlap),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems())
def test_dp_is_optimal_over_pipeline_splits(problem: Problem) -> None:
    dp = solve(problem, "dp")
    oracle = _pipeline_oracle(problem)
    if math.isinf(oracle):
        assert dp.status is Status.INFEASIBLE
        return
    assert dp.status is Status.OPTIMAL
    assert dp.objective == pytest.approx(oracle, rel=1e-9, abs=1e-9)
    assert dp.objective == evaluate(problem, dp.require_plan()).objective
    unpruned = solve(problem, "dp", use_upper_bound=False)
    assert unpruned.objective == pytest.approx(dp.objective, rel=1e-9, abs=1e-9)
    dpl = solve(problem, "dpl")
    if dpl.plan is not None:
        assert dpl.status is Status.FEASIBLE
        assert dpl.objective >= dp.objective - 1e-9
        assert dpl.objective == evaluate(problem, dpl.require_plan()).objective


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems(), st.sampled_from([1.0, 1.0 + 1e-7, 1.3, 2.0, math.inf]))
def test_work_bound_and_threads_keep_the_optimum(problem: Problem, factor: float) -> None:
    # the DP as before issue 20 (no work bound, one thread) is the reference; with the
    # bound and with level-parallel threads the optimum below `upper` is the same, and
    # nothing at or above it is claimed
    stage = build_stage_graph(problem.graph)
    lattice = enumerate_stage_ideals(stage)
    plain = run_dp(problem, stage, lattice)
    upper = plain.value * factor if math.isfinite(plain.value) else factor
    for threads in (1, 2):
        out = run_dp(problem, stage, lattice, upper=upper, work_bound=True, threads=threads)
        if plain.value < upper:
            assert out.value == plain.value
            plan = out.plan()
            assert plan is not None
            assert evaluate(problem, plan).objective == pytest.approx(
                out.value, rel=1e-9, abs=1e-12)
        else:
            assert not out.value < upper
    assert dpmod.load_lower_bound(problem, stage) <= plain.value * (1 + 1e-9)


def test_work_bound_cell_liveness() -> None:
    live = dpk.cell_is_live
    assert live(3.0, 6.0, 1.0, 3, 0, 6, 0, 0.0)          # 3 on 3, 3 on 3: both fit at 1.0
    assert not live(3.0, 6.0, 1.0, 2, 0, 6, 0, 0.0)      # 3 on 2 devices: one gets 1.5
    assert not live(3.0, 6.0, 1.0, 4, 0, 6, 0, 0.0)      # the other 3 on 2 devices
    assert live(3.0, 6.0, 1.0, 3, 0, 4, 2, 1.0)          # 3 left on 1 accelerator + 2 CPUs
    assert not live(3.0, 6.0, 1.0, 3, 0, 4, 2, 0.25)     # ... each CPU a quarter of one
    assert live(0.0, 0.0, 1.0, 0, 0, 1, 0, 0.0)          # the empty ideal of an empty graph


def test_threads_option_is_checked_and_ignored_by_the_result() -> None:
    p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    with pytest.raises(ValueError, match="threads"):
        solve(p, "dp", threads=0)
    assert solve(p, "dp", threads=2).objective == solve(p, "dp", work_bound=False).objective


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 6), st.booleans())
def test_dp_never_beats_contiguous_brute_force(seed: int, n_nodes: int, training: bool) -> None:
    rng = np.random.default_rng(seed)
    p = random_problem(rng, n_nodes=min(n_nodes, 3) if training else n_nodes, n_accelerators=2,
                       n_cpus=1, memory_fraction=0.6, training=training)
    dp = solve(p, "dp")
    oracle = solve(p, "brute-force-contiguous")
    if dp.plan is None:
        return
    assert oracle.objective <= dp.objective + 1e-9


# -- ideals and kernels ------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 12), st.sampled_from([0.1, 0.3, 0.6]))
def test_ideal_count_matches_reference(seed: int, n_nodes: int, edge_prob: float) -> None:
    p = random_problem(np.random.default_rng(seed), n_nodes=n_nodes, edge_prob=edge_prob)
    stage = build_stage_graph(p.graph, merge_trivial=False)
    assert stage.n_stage_nodes == p.graph.n_nodes
    lattice = enumerate_stage_ideals(stage)
    assert lattice.n_ideals == count_ideals(p.graph)
    # every cover pair removes one maximal node from an ideal and leaves an ideal
    for i in range(lattice.n_ideals):
        upper = lattice.nodes(i, stage.n_stage_nodes)
        for e in range(lattice.down_ptr[i], lattice.down_ptr[i + 1]):
            lower = lattice.nodes(int(lattice.down_lower[e]), stage.n_stage_nodes)
            diff = np.flatnonzero(upper & ~lower)
            assert diff.tolist() == [lattice.down_node[e]]


def test_lattice_and_fill_kernels_compile_like_their_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compilation check: the compiled lattice, order and row kernels give what their own
    source gives run as Python (``.py_func``). Correctness is checked against twins written
    from the definitions: ``tests/twins/test_lattice_twin.py`` and
    :func:`test_row_kernels_equal_their_twins`."""
    rng = np.random.default_rng(5)
    for training in (False, True):
        p = random_problem(rng, n_nodes=6, n_accelerators=2, n_cpus=1, memory_fraction=0.5,
                           training=training)
        stage = build_stage_graph(p.graph)
        with monkeypatch.context() as m:  # small lattices would take plain-Python paths
            m.setattr("dnnpart.solvers.dp.ideals.not_compiled", lambda func: False)
            m.setattr(driver, "SMALL_COVER_PAIRS", 0)
            m.setattr(driver, "SMALL_LATTICE", 0)
            fast = enumerate_stage_ideals(stage)
            fast_out = run_dp(p, stage, fast)
        with compiled(lattice_kernels.dfs_topological_order):
            fast_order = lattice_kernels.dfs_topological_order(stage.n_stage_nodes,
                                                               stage.succ_ptr, stage.succ_idx)
        with monkeypatch.context() as m:
            m.setattr("dnnpart.solvers.dp.ideals.enumerate_lattice",
                      lattice_kernels.enumerate_lattice.py_func)
            m.setattr(driver, "fill_plain", dpk.fill_plain.py_func)
            slow = enumerate_stage_ideals(stage)
            slow_out = run_dp(p, stage, slow)
        slow_order = lattice_kernels.dfs_topological_order.py_func(
            stage.n_stage_nodes, stage.succ_ptr, stage.succ_idx)
        assert slow.n_ideals == fast.n_ideals
        for attr in ("parent", "added", "down_ptr", "down_node", "down_lower"):
            np.testing.assert_array_equal(getattr(slow, attr), getattr(fast, attr))
        assert slow_out.value == fast_out.value
        np.testing.assert_array_equal(slow_out.assignment, fast_out.assignment)
        np.testing.assert_array_equal(slow_order, fast_order)


ROW_KERNELS = ("fill_plain", "fill_bounded", "fill_masked", "fill_replicated")


def _row_kernel_runs(problem: Problem, factor: float, seed: int) -> list[tuple[str, dict[str, object]]]:
    """``run_dp`` options that pick each unreplicated row kernel, with the kernel they pick."""
    stage = build_stage_graph(problem.graph)
    lattice = enumerate_stage_ideals(stage)
    plain = run_dp(problem, stage, lattice).value
    upper = factor if not math.isfinite(plain * factor) else plain * factor
    rng = np.random.default_rng(seed)
    rows = max(1, lattice.n_ideals // 2)
    cells = (problem.cluster.n_accelerators + 1, problem.cluster.n_cpus + 1)
    mask = (rng.integers(0, rows, lattice.n_ideals).astype(np.int32),
            (rng.random((rows, *cells)) < 0.7).astype(np.int8))
    bounded = math.isfinite(upper) and work_bound(device_model(problem), stage, lattice) is not None
    finite = math.isfinite(upper)
    return [
        ("fill_plain", {}),
        ("fill_plain", {"upper": upper}),
        ("fill_bounded" if bounded else "fill_plain", {"upper": upper, "work_bound": True}),
        ("fill_masked" if finite else "fill_plain", {"upper": upper, "cell_mask": mask}),
        ("fill_masked" if finite else "fill_plain",
         {"upper": upper, "cell_mask": mask, "work_bound": True}),
    ]


def _run_with(problem: Problem, options: dict[str, object], kernels: dict[str, object],
              used: list[str]) -> dpmod.DpOutcome:
    """``run_dp`` with the row kernels replaced by ``kernels`` (recording which ran); with
    none replaced, the compiled kernels (no small-lattice paths)."""
    stage = build_stage_graph(problem.graph)
    lattice = enumerate_stage_ideals(stage)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(driver, "SMALL_COVER_PAIRS", 0)
        m.setattr(driver, "SMALL_LATTICE", 0)
        for name, func in kernels.items():
            def call(*args: object, _name: str = name, _func: object = func) -> object:
                used.append(_name)
                return _func(*args)  # type: ignore[operator]

            m.setattr(driver, name, call)
        return run_dp(problem, stage, lattice, keep_table=True, **options)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems(), st.sampled_from([1.0, 1.3, math.inf]), st.integers(0, 2**31))
def test_row_kernels_compile_like_their_source(problem: Problem, factor: float, seed: int) -> None:
    """A compilation check: ``.py_func`` runs each kernel's own source in Python, which must
    give the same tables, choices and counts (correctness: :func:`test_row_kernels_equal_their_twins`)."""
    for name, options in _row_kernel_runs(problem, factor, seed):
        used: list[str] = []
        compiled = _run_with(problem, options, {}, used)
        python = _run_with(problem, options, {k: getattr(dpk, k).py_func for k in ROW_KERNELS},
                           used)
        assert set(used) == {name}
        assert compiled.table is not None and python.table is not None
        np.testing.assert_array_equal(python.table, compiled.table)
        assert python.value == compiled.value
        assert (python.slices_priced, python.slices_pruned) == (compiled.slices_priced,
                                                                compiled.slices_pruned)
        if compiled.assignment is not None:
            assert python.assignment is not None
            np.testing.assert_array_equal(python.assignment, compiled.assignment)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems(), st.sampled_from([1.0, 1.3, math.inf]), st.integers(0, 2**31))
def test_row_kernels_equal_their_twins(problem: Problem, factor: float, seed: int) -> None:
    # the twins (dnnpart.testing.dp_row_twins) fill each row from the recurrence's definition; integer
    # times, costs and memory make every sum exact, so the tables agree to the bit
    for name, options in _row_kernel_runs(problem, factor, seed):
        used: list[str] = []
        compiled = _run_with(problem, options, {}, used)
        twin = _run_with(problem, options, {k: getattr(row_twins, k) for k in ROW_KERNELS}, used)
        assert set(used) == {name}
        assert compiled.table is not None and twin.table is not None
        np.testing.assert_array_equal(twin.table, compiled.table)
        assert twin.value == compiled.value
        if name == "fill_plain":
            assert (twin.slices_priced, twin.slices_pruned) == (compiled.slices_priced,
                                                                compiled.slices_pruned)
        else:  # the kernels' cut falls with the row's live cells: fewer slices
            assert compiled.slices_priced <= twin.slices_priced
        plan = twin.plan()
        if plan is not None:
            assert evaluate(problem, plan).objective == pytest.approx(twin.value, rel=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems(), st.booleans())
def test_numpy_rows_equal_the_kernel(problem: Problem, pruned: bool) -> None:
    # before numba is loaded small lattices fill their rows in numpy (dp.small): the same
    # optimum (up to the order of float sums), the same slices priced, a plan worth it
    stage = build_stage_graph(problem.graph)
    lattice = enumerate_stage_ideals(stage)
    upper = run_dp(problem, stage, lattice).value * 1.2 if pruned else math.inf
    kernel = run_dp(problem, stage, lattice, upper=upper)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(driver, "not_compiled", lambda func: True)
        rows = run_dp(problem, stage, lattice, upper=upper)
    assert rows.value == pytest.approx(kernel.value, rel=1e-12)
    if math.isfinite(rows.value):
        plan = rows.plan()
        assert plan is not None
        assert evaluate(problem, plan).objective == pytest.approx(rows.value, rel=1e-9)
    if not problem.graph.is_training:  # training graphs may fall back to the plain twin
        assert rows.slices_priced == kernel.slices_priced


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20), st.integers(1, 30), st.integers(0, 2**31))
def test_row_sums_add_in_numpys_order(width: int, rows: int, seed: int) -> None:
    # the numpy rows sum a slice's transfer columns one array per column: bit for bit what
    # numpy's sum over the stacked rows gives (left to right below 8, pairwise from 8)
    from dnnpart.solvers.dp.small import _row_sums

    rng = np.random.default_rng(seed)
    columns = [rng.random(rows) * 10.0 ** rng.integers(-6, 6, rows) for _ in range(width)]
    np.testing.assert_array_equal(_row_sums(columns), np.stack(columns, axis=1).sum(axis=1))


def test_progress_is_reported() -> None:
    messages: list[tuple[str, float | None]] = []

    class Recorder:
        def update(self, message: str, fraction: float | None = None) -> None:
            messages.append((message, fraction))

    solve(chain_problem([1, 2, 3, 4, 5], n_accelerators=2), "dp", progress=Recorder())
    assert any("ideals enumerated" in m for m, _ in messages)
    assert messages[-1][1] == 1.0
