"""Throughput DP over ideals (paper 1, section 5.1.1) and its linearized variant DPL (5.1.2).

Both methods split the graph into contiguous parts, one per device, and minimise the largest
device load (time per sample of a pipelined schedule). Training graphs are preprocessed as in
appendix B (:mod:`dnnpart.graph.stage_graph`); the DP then runs on the forward part, each
forward slice carrying its colocated backward nodes.

Search space
------------
The DP builds a split as a chain of ideals, so its parts are contiguous (Definition 3.1) *and*
can be ordered as a pipeline (every edge goes from an earlier part to a later one or stays
inside a part). Paper 1's DP has the same space. A split whose contiguous parts each need an
output of the other (possible when some nodes cannot run on accelerators) is outside it; the
integer program searches those too.

Objectives
----------
* ``training="pipedream"`` (``max_i FW_i + BW_i``) and every overlap mode of appendix C.1
  (``"none"``, ``"compute-comm"``, ``"full-duplex"``) are optimised exactly.
* ``training="gpipe"`` (``max_i FW_i + max_i BW_i``) is not decomposable over the DP's
  prefixes. The DP optimises the PipeDream form instead and reports the plan as FEASIBLE,
  scored by the evaluator in the GPipe form; its bound is the PipeDream optimum, a valid lower
  bound because ``max_i (FW_i + BW_i) <= max_i FW_i + max_i BW_i`` for every plan.
* Replication (appendix C.2, option ``replication=True``): a slice may run on ``k'' > 1``
  accelerators (or CPUs, the paper's footnote 8) at once, each taking every ``k''``-th
  sample. The transition becomes ``min over k'' of max(dp[J][a - k''][c], acc(I \\ J, k''))``
  with ``acc(S, k'') = acc(S) / k''`` plus (overlap ``"none"``) or max-ed with (other modes)
  the all-reduce ``(k'' - 1) * W_S / (k'' * B)``: ``W_S`` the slice's ``memory_bytes`` (the
  paper's ``m_v``), ``B`` the cluster's bandwidth between two accelerators (between two CPUs
  for CPU replicas), which must be the same for every pair. Inference graphs pay no
  all-reduce (read-only weights). The plan says which devices replicate which
  (:attr:`~dnnpart.plan.Plan.replica_of`) and the evaluator scores it the same way
  (:mod:`dnnpart.evaluate.replication`). Time grows by a factor up to ``max(k, l)``; memory
  by one ``int16`` back-pointer per DP entry; without the option the kernel runs the plain
  transition unchanged.
* Accelerator hierarchies (appendix C.3): on a hierarchical cluster (accelerators in several
  groups) ``dp`` runs :mod:`dnnpart.solvers.dp.hierarchy` instead, exact over contiguous
  pipeline splits with one consecutive run of stages per group (option
  ``max_hierarchy_ideals``). The DP refuses clusters whose accelerators differ otherwise (the
  integer program takes them).

Speed
-----
``dp`` first solves DPL (a few milliseconds) and uses its value as an upper bound ``UB``: a
slice whose compute time alone reaches ``UB`` on every device kind that can hold it cannot be
part of a better split, and since compute time only grows with the slice, the enumeration of
slices below each ideal stops there. This keeps the DP exact while visiting a small fraction
of the ``O(I^2)`` ideal pairs. With replication the cut uses the least load a slice could
have on any number of replicas (compute / k'' with its all-reduce), which also only grows
with the slice. It cuts far less (a slice may hold up to ``k`` times the bound's compute),
so large lattices take several times longer: layer InceptionV3 inference (6 accelerators,
1 CPU) prices 579 M slices in ~150 s CPU instead of 227 M in ~20 s.

Without replication a work bound (not in the paper; exact) skips the cells ``(I, a, c)``
whose ideal's work cannot fit on ``a`` accelerators and ``c`` CPUs below ``UB``, or whose
remaining work cannot fit on the devices left (a CPU counted as the fraction of an
accelerator its fastest node allows); a row's walk stops where the slice's compute reaches
the worst best value so far of the row's live cells. Layer InceptionV3 inference: 36.8 M
slices. Lattices from ``THREADED_IDEALS`` ideals fill the rows of each level (ideals of one
size, which read only smaller ones) in threads; the tables are the same. Small lattices
before numba is loaded fill their rows in numpy (:mod:`dnnpart.solvers.dp.small`).

Lattices from ``PEEL_IDEALS`` ideals first solve a relaxation (option ``peel``, exact
either way; :mod:`dnnpart.solvers.dp.relax`): the graph without its light side components
and one-neighbour leaves has a far smaller lattice and an optimum no larger. Its plan,
extended to the whole graph, is optimal when it scores no more than that bound (BERT-base
with 4 layers: 148,200 ideals, proven from 988 in 1.2 s whole process, 69 s before);
otherwise its prefix and suffix tables skip the cells of the full DP that cannot be on a
better split (BERT-base with 2 layers: 23.7 M slices priced instead of 563 M). Figures and
what was tried: ``docs/performance.md``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart._jit import not_compiled
from dnnpart.errors import ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph.stage_graph import StageGraph, build_stage_graph
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.solvers.dp.hierarchy import (
    DEFAULT_MAX_HIERARCHY_IDEALS,
    HierarchyOutcome,
    hierarchy_model,
    run_hierarchy_dp,
)
from dnnpart.solvers.dp.ideals import (
    DEFAULT_MAX_IDEALS,
    DEFAULT_MAX_MEMORY_BYTES,
    IdealLattice,
    enumerate_stage_ideals,
    linear_ideals,
)
from dnnpart.solvers.dp.kernels import (
    KIND_ACC,
    KIND_BASE,
    KIND_CPU,
    KIND_FEWER_ACC,
    KIND_FEWER_CPU,
    OVERLAP_CODES,
    dfs_topological_order,
    dp_fill,
    ideal_sums,
)
from dnnpart.solvers.method import Progress, Stopwatch
from dnnpart.solvers.result import result_from_plan

__all__ = [
    "DEFAULT_MAX_IDEALS",
    "DpOutcome",
    "IdealLattice",
    "enumerate_stage_ideals",
    "linear_ideals",
    "run_dp",
    "solve_dp",
    "solve_dpl",
]

#: Relative tolerance of the evaluator's memory check (``memory > capacity * (1 + 1e-12)``).
_MEMORY_TOLERANCE = 1e-12


#: Lattices with at most this many cover pairs run the DP's plain twin while numba is not
#: loaded and the numpy rows (:mod:`dnnpart.solvers.dp.small`) do not apply.
SMALL_COVER_PAIRS = 300
#: Lattices of at most this many ideals fill their rows in numpy while numba is not loaded
#: (:mod:`dnnpart.solvers.dp.small`; op BERT-12 inference, 2,906 ideals: 0.3 s).
SMALL_LATTICE = 3000


@dataclass(frozen=True, slots=True)
class _DeviceModel:
    """What the DP needs to know about the (identical) accelerators and CPUs."""

    accelerators: tuple[int, ...]
    cpus: tuple[int, ...]
    acc_time: npt.NDArray[np.float64]
    cpu_time: npt.NDArray[np.float64]
    acc_cap: float
    cpu_cap: float
    comm_scale: float
    overlap: int


def _allreduce_scale(problem: Problem, group: tuple[int, ...], label: str) -> float:
    """Load units per byte of a replicated slice's all-reduce among ``group`` (C.2);
    ``inf`` when the devices have no link (``B = 0``): they cannot be replicas."""
    cluster = problem.cluster
    if len(group) < 2 or not problem.graph.is_training:
        return 0.0
    block = cluster.bandwidth[np.ix_(group, group)][~np.eye(len(group), dtype=np.bool_)]
    if block.min() != block.max():
        raise ValueError(
            f"the DP with replication needs the same bandwidth between any two {label}; "
            f"they range from {block.min():.6g} to {block.max():.6g} B/s"
        )
    if block[0] == 0:
        return math.inf
    return 1.0 / (float(block[0]) * cluster.time_unit_s)


def _device_model(problem: Problem) -> _DeviceModel:
    graph, cluster = problem.graph, problem.cluster
    accs, cpus = cluster.accelerators, cluster.cpus
    for group, label in ((accs, "accelerators"), (cpus, "CPUs")):
        if not group:
            continue
        first = cluster.devices[group[0]]
        for i in group[1:]:
            dev = cluster.devices[i]
            if (dev.memory_bytes, dev.speed) != (first.memory_bytes, first.speed) or (
                cluster.host_link_scale[i] != cluster.host_link_scale[group[0]]
            ):
                raise ValueError(
                    f"the DP needs identical {label} (memory, speed, host link); "
                    f"{first.name} and {dev.name} differ. Use the integer program for "
                    "heterogeneous clusters"
                )
    n = graph.n_nodes
    if accs:
        acc = cluster.devices[accs[0]]
        acc_time = graph.time_on(acc.kind) / acc.speed
        acc_cap = acc.memory_bytes * (1 + _MEMORY_TOLERANCE)
        scale = float(cluster.host_link_scale[accs[0]])
    else:
        acc_time, acc_cap, scale = np.full(n, np.inf), -1.0, 0.0
    if cpus:
        cpu = cluster.devices[cpus[0]]
        cpu_time = graph.time_on(cpu.kind) / cpu.speed
        cpu_cap = cpu.memory_bytes * (1 + _MEMORY_TOLERANCE)
    else:
        cpu_time, cpu_cap = np.full(n, np.inf), -1.0
    return _DeviceModel(
        accelerators=accs, cpus=cpus, acc_time=np.ascontiguousarray(acc_time, np.float64),
        cpu_time=np.ascontiguousarray(cpu_time, np.float64), acc_cap=float(acc_cap),
        cpu_cap=float(cpu_cap), comm_scale=scale, overlap=OVERLAP_CODES[problem.objective.overlap],
    )


@dataclass(frozen=True, slots=True)
class DpOutcome:
    """Raw result of :func:`run_dp`.

    ``value`` is the DP's own max-load (``inf`` when no split below ``upper`` exists, or when
    stopped early); ``assignment`` maps original nodes to devices (``None`` without a split).
    """

    value: float
    assignment: npt.NDArray[np.int32] | None
    finished: bool
    slices_priced: int
    slices_pruned: int
    replica_of: npt.NDArray[np.int32] | None = None
    table: npt.NDArray[np.float64] | None = None

    def plan(self) -> Plan | None:
        """The split as a plan (``None`` without one)."""
        if self.assignment is None:
            return None
        return Plan(assignment=self.assignment, replica_of=self.replica_of)


def run_dp(
    problem: Problem, stage: StageGraph, lattice: IdealLattice, *, upper: float = math.inf,
    clock: Stopwatch | None = None, progress: Progress | None = None, label: str = "DP",
    replication: bool = False, work_bound: bool = False, threads: int = 1,
    costs: tuple[npt.NDArray[Any], ...] | None = None,
    cell_mask: tuple[npt.NDArray[np.int32], npt.NDArray[np.int8]] | None = None,
    keep_table: bool = False,
) -> DpOutcome:
    """Fill the DP table over ``lattice`` (ideals of ``stage``) and rebuild the best split.

    Only splits of max-load ``< upper`` are searched for. With a ``clock`` whose time limit
    expires, stops between rows and returns ``finished=False``. With ``replication`` a slice
    may run on several accelerators (or CPUs) at once (paper 1, appendix C.2); the outcome's
    ``replica_of`` then says which (see :class:`~dnnpart.plan.Plan`).

    ``work_bound`` (no ``replication``, finite ``upper``) skips the DP cells that the work
    bound shows cannot be on a split below ``upper`` (see
    :func:`~dnnpart.solvers.dp.kernels.dp_fill`): same optimum when it is below ``upper``.
    ``threads > 1`` fills the rows of one lattice level (ideals of one size, which never
    read each other) in that many threads (the kernel releases the GIL): same tables.
    Without both this is the DP as it was before issue 20 (its plain twin in the tests).
    ``costs`` (``node_cost, uniform, edge_cost, outdeg``) replaces the graph's transfer
    arrays; with a ``stage`` whose ``stage_of`` is ``-1`` for some nodes it prices the graph
    without them (:mod:`dnnpart.solvers.dp.relax`; their entries in the assignment are
    meaningless). ``cell_mask`` (``mask_of, mask``: no replication, finite ``upper``) skips
    the cells ``(I, a, c)`` with ``mask[mask_of[I], a, c] == 0``, which must be on no split
    below ``upper`` (same optimum below it). ``keep_table`` returns the DP table in the
    outcome's ``table``.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> sg = build_stage_graph(p.graph)
    >>> out = run_dp(p, sg, enumerate_stage_ideals(sg))
    >>> out.value, out.assignment.tolist()
    (5.0, [0, 0, 1, 1])
    """
    graph = problem.graph
    model = _device_model(problem)
    n_acc, n_cpu = len(model.accelerators), len(model.cpus)
    n_ideals = lattice.n_ideals
    if costs is None:
        node_cost, uniform = graph.node_out_cost()
        edge_cost, outdeg = graph.edge_cost, graph.out_degree()
    else:
        node_cost, uniform, edge_cost, outdeg = costs
    dp = np.empty((n_ideals, n_acc + 1, n_cpu + 1), np.float64)
    prev_lower = np.empty((n_ideals, n_acc + 1, n_cpu + 1), np.int32)
    prev_kind = np.empty((n_ideals, n_acc + 1, n_cpu + 1), np.int8)
    ar_acc = _allreduce_scale(problem, model.accelerators, "accelerators") if replication else 0.0
    ar_cpu = _allreduce_scale(problem, model.cpus, "CPUs") if replication else 0.0
    # without a link (inf all-reduce) a replicated slice can never be feasible
    max_rep_acc = max(1, n_acc) if replication and math.isfinite(ar_acc) else 1
    max_rep_cpu = max(1, n_cpu) if replication and math.isfinite(ar_cpu) else 1
    ar_acc, ar_cpu = (x if math.isfinite(x) else 0.0 for x in (ar_acc, ar_cpu))
    count_shape = (n_ideals, n_acc + 1, n_cpu + 1) if replication else (1, 1, 1)
    prev_count = np.ones(count_shape, np.int16)
    bound = (_work_bound(model, stage, lattice)
             if work_bound and not replication and math.isfinite(upper) else None)
    work, total_work, inv_ratio = bound if bound is not None else (np.zeros(1), 0.0, 0.0)
    n, depth = graph.n_nodes, stage.n_stage_nodes + 2
    use_mask = cell_mask is not None and not replication and math.isfinite(upper)
    mask_of, mask = cell_mask if use_mask and cell_mask is not None else (
        np.zeros(1, np.int32), np.ones((1, 1, 1), np.int8))
    # the kernel reads the mask where it tests the work bound (a separate flag there made
    # the loop 4% slower); the mask alone: every cell passes a zero work bound
    live_cell = bound is not None
    if use_mask and bound is None:
        work, total_work, inv_ratio, live_cell = np.zeros(n_ideals), 0.0, 0.0, True

    def scratch() -> tuple[Any, ...]:
        # in_set, n_succ_in, stamp, walk stack (4), counters, live cells, replica loads: one
        # set per thread (the kernel writes each of them)
        return (np.zeros(n, np.int8), np.zeros(n, np.int32), np.full(n_ideals, -1, np.int32),
                np.empty(depth, np.int64), np.empty(depth, np.int64), np.empty(depth, np.int64),
                np.empty((depth, 5), np.float64), np.empty((depth, 2), np.int64),
                np.zeros(2, np.int64), np.zeros((n_acc + 1, n_cpu + 1), np.int8),
                np.empty((2, max(max_rep_acc, max_rep_cpu) + 1), np.float64))

    # small lattices before numba is loaded: the plain twin costs less than loading numba
    small = not_compiled(dp_fill) and lattice.n_cover_pairs <= SMALL_COVER_PAIRS
    fill = getattr(dp_fill, "py_func", dp_fill) if small else dp_fill

    def fill_rows(start: int, stop: int, sc: tuple[Any, ...]) -> None:
        fill(
            start, stop, lattice.down_ptr, lattice.down_node, lattice.down_lower,
            stage.member_ptr, stage.member_idx, graph.succ_ptr, graph.succ_idx,
            graph.pred_ptr, graph.pred_idx, graph.pred_edge, edge_cost, node_cost, uniform,
            outdeg, model.acc_time, model.cpu_time, graph.memory_bytes, model.acc_cap,
            model.cpu_cap, model.comm_scale, model.overlap, float(upper), *sc[:8], dp,
            prev_lower, prev_kind, sc[8], max_rep_acc, max_rep_cpu, ar_acc, ar_cpu, sc[10],
            prev_count, work, total_work, inv_ratio, live_cell, sc[9],
            use_mask, mask_of, mask,
        )

    # rows in chunks between clock checks (time limit, Ctrl-C): a row prices up to every
    # lower ideal, so on a 200k-ideal chain 1% of the rows is tens of seconds
    chunk = max(1, min(n_ideals // 100, 64))
    by_rows = None
    if (not_compiled(dp_fill) and not replication and n_ideals <= SMALL_LATTICE
            and costs is None and not use_mask and not (clock is not None and clock.expired())):
        from dnnpart.solvers.dp.small import fill_small

        by_rows = fill_small(lattice, stage, graph, node_cost, uniform, model.acc_time,
                             model.cpu_time, model.acc_cap, model.cpu_cap, model.comm_scale,
                             model.overlap, float(upper), dp, prev_lower, prev_kind)
    if by_rows is not None:
        scratches = [scratch()]
        scratches[0][8][0] = by_rows
        finished = True
        _report(progress, clock, label, n_ideals, n_ideals)
    elif threads > 1 and not small:
        finished, scratches = _fill_threaded(lattice, stage, fill_rows, scratch, threads, chunk,
                                             clock, progress, label)
    else:
        scratches = [scratch()]
        finished = True
        for start in range(0, n_ideals, chunk):
            if clock is not None and clock.expired():
                finished = False
                break
            stop = min(n_ideals, start + chunk)
            fill_rows(start, stop, scratches[0])
            _report(progress, clock, label, stop, n_ideals)
    counters = sum(sc[8] for sc in scratches)
    priced, pruned = int(counters[0]), int(counters[1])
    if not finished:
        return DpOutcome(math.inf, None, False, priced, pruned)
    full = n_ideals - 1
    value = float(dp[full, n_acc, n_cpu])
    table = dp if keep_table else None
    if not math.isfinite(value):
        return DpOutcome(math.inf, None, True, priced, pruned, table=table)
    stage_device = np.full(stage.n_stage_nodes, -1, np.int32)
    replica_of = np.arange(problem.cluster.n_devices, dtype=np.int32)
    big, a, c = full, n_acc, n_cpu
    while big > 0:
        kind = int(prev_kind[big, a, c])
        if kind == KIND_FEWER_ACC:
            a -= 1
            continue
        if kind == KIND_FEWER_CPU:
            c -= 1
            continue
        assert kind in (KIND_ACC, KIND_CPU) and kind != KIND_BASE, "broken DP back-pointer"
        lower = int(prev_lower[big, a, c])
        count = int(prev_count[big, a, c]) if replication else 1
        part = lattice.nodes(big, stage.n_stage_nodes) & ~lattice.nodes(lower, stage.n_stage_nodes)
        group = model.accelerators if kind == KIND_ACC else model.cpus
        top = a if kind == KIND_ACC else c
        primary = group[top - 1]
        stage_device[part] = primary
        replica_of[list(group[top - count : top])] = primary
        if kind == KIND_ACC:
            a -= count
        else:
            c -= count
        big = lower
    assert np.all(stage_device >= 0), "DP split left stage nodes unplaced"
    return DpOutcome(value, stage_device[stage.stage_of], True, priced, pruned,
                     replica_of if replication else None, table)


def _report(progress: Progress | None, clock: Stopwatch | None, label: str, done: int,
            total: int) -> None:
    if progress is not None:
        elapsed = f", {clock.elapsed:.1f} s" if clock is not None else ""
        progress.update(f"{label}: {done:,}/{total:,} rows filled{elapsed}", done / total)


def _fill_threaded(
    lattice: IdealLattice, stage: StageGraph, fill_rows: Callable[[int, int, Any], None],
    scratch: Callable[[], Any], threads: int, chunk: int, clock: Stopwatch | None,
    progress: Progress | None, label: str,
) -> tuple[bool, list[Any]]:
    """Fill the rows level by level (ideals of one size read only smaller ones), each level
    in pieces spread over ``threads`` threads; the clock is checked between pieces."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
    from queue import SimpleQueue

    n_ideals = lattice.n_ideals
    sizes = ideal_sums(lattice.parent, lattice.added, np.ones(stage.n_stage_nodes))
    assert np.all(np.diff(sizes) >= 0), "ideals must be numbered level by level"
    starts = [0, *(np.flatnonzero(np.diff(sizes)) + 1).tolist(), n_ideals]
    scratches = [scratch() for _ in range(threads)]
    free: SimpleQueue[Any] = SimpleQueue()
    for sc in scratches:
        free.put(sc)

    def task(a: int, b: int) -> None:
        sc = free.get()
        try:
            fill_rows(a, b, sc)
        finally:
            free.put(sc)

    step = chunk * threads
    with ThreadPoolExecutor(threads) as pool:
        for lo, hi in itertools.pairwise(starts):
            for a in range(lo, hi, step):
                if clock is not None and clock.expired():
                    return False, scratches
                b = min(hi, a + step)
                cuts = np.linspace(a, b, threads + 1).astype(int).tolist()
                futures = [pool.submit(task, x, y) for x, y in itertools.pairwise(cuts) if y > x]
                pending = set(futures)
                while pending:  # short waits: Ctrl-C and the watchdog reach this thread
                    _, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
                for f in futures:
                    f.result()
                _report(progress, clock, label, b, n_ideals)
    return True, scratches


def _node_work(model: _DeviceModel) -> tuple[npt.NDArray[np.float64], float] | None:
    """Per original node, a lower bound on its share of some device's load in accelerator
    time units, and ``inv_ratio`` (what a CPU takes in those units per unit of load); ``None``
    when some node runs nowhere (no bound then). See :func:`~dnnpart.solvers.dp.kernels.cell_is_live`."""
    acc, cpu = model.acc_time, model.cpu_time
    both = np.isfinite(acc) & np.isfinite(cpu) & (acc > 0)
    ratio = float(np.min(cpu[both] / acc[both])) if both.any() else 1.0
    if ratio > 0:
        # a CPU with load L has done L / ratio units: every node's CPU time is >= ratio x its
        # accelerator time
        node = np.where(np.isfinite(acc), acc, cpu / ratio)
        inv_ratio = 1.0 / ratio
    else:  # a node free on a CPU: CPUs bound nothing
        node = np.where(np.isfinite(acc), acc, 0.0)
        inv_ratio = math.inf
    if not np.all(np.isfinite(node)) or not math.isfinite(float(node.sum())):
        return None
    return node, inv_ratio


def _work_bound(
    model: _DeviceModel, stage: StageGraph, lattice: IdealLattice,
) -> tuple[npt.NDArray[np.float64], float, float] | None:
    """Per ideal its work (:func:`_node_work` summed), the total, and ``inv_ratio``."""
    per_node = _node_work(model)
    if per_node is None:
        return None
    node, inv_ratio = per_node
    inside = stage.stage_of >= 0  # a peeled graph's stage_of is -1 on the nodes left out
    per_stage = np.bincount(stage.stage_of[inside], weights=node[inside],
                            minlength=stage.n_stage_nodes)
    work = ideal_sums(lattice.parent, lattice.added, per_stage)
    return work, float(per_stage.sum()), inv_ratio


def load_lower_bound(problem: Problem, stage: StageGraph) -> float:
    """A lower bound on the max-load of every split of ``stage`` (the DP's optimum).

    The larger of the work bound (all work spread over all devices, see :func:`_node_work`)
    and the least compute of the heaviest stage node (it sits on one device whole).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> load_lower_bound(p, build_stage_graph(p.graph))
    5.0
    """
    model = _device_model(problem)
    per_node = _node_work(model)
    lower = 0.0
    if per_node is not None:
        node, inv_ratio = per_node
        cap = len(model.accelerators) + (len(model.cpus) * inv_ratio if model.cpus else 0.0)
        if cap > 0:
            lower = float(node.sum()) / cap
    acc = np.bincount(stage.stage_of, weights=np.where(np.isfinite(model.acc_time),
                                                       model.acc_time, 0.0),
                      minlength=stage.n_stage_nodes)
    cpu = np.bincount(stage.stage_of, weights=np.where(np.isfinite(model.cpu_time),
                                                       model.cpu_time, 0.0),
                      minlength=stage.n_stage_nodes)
    acc_bad = np.bincount(stage.stage_of, weights=~np.isfinite(model.acc_time),
                          minlength=stage.n_stage_nodes) > 0
    cpu_bad = np.bincount(stage.stage_of, weights=~np.isfinite(model.cpu_time),
                          minlength=stage.n_stage_nodes) > 0
    acc = np.where(acc_bad | (len(model.accelerators) == 0), np.inf, acc)
    cpu = np.where(cpu_bad | (len(model.cpus) == 0), np.inf, cpu)
    heaviest = float(np.minimum(acc, cpu).max()) if stage.n_stage_nodes else 0.0
    return max(lower, heaviest) if math.isfinite(heaviest) else lower


def _check_options(options: dict[str, Any], method: str) -> None:
    if options:
        raise ValueError(f"{method}: unknown option(s) {sorted(options)}")


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return bool(value)


def _stage_graph(problem: Problem, merge_trivial: bool) -> StageGraph:
    limit = float(problem.cluster.memory_capacity().min())
    return build_stage_graph(problem.graph, merge_trivial=merge_trivial, memory_limit=limit)


def _linear_lattice(stage: StageGraph) -> IdealLattice:
    order = dfs_topological_order(stage.n_stage_nodes, stage.succ_ptr, stage.succ_idx)
    return linear_ideals(np.asarray(order, dtype=np.int64))


def _space(problem: Problem, what: str) -> str:
    gpipe = problem.graph.is_training and problem.objective.training == "gpipe"
    return what + (" (optimised in the PipeDream form)" if gpipe else "")


def solve_dp(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    max_ideals: int = DEFAULT_MAX_IDEALS, max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    use_upper_bound: bool = True, merge_trivial: bool = True,
    replication: bool = False, max_hierarchy_ideals: int = DEFAULT_MAX_HIERARCHY_IDEALS,
    work_bound: bool = True, threads: int | None = None, peel: bool = True, **options: Any,
) -> SolveResult:
    """Optimal contiguous split by dynamic programming over the ideals of the forward graph.

    Parameters
    ----------
    max_ideals : refuse (``ProblemTooLargeError``) graphs with more ideals than this after
        preprocessing; ``dpl`` or the integer program handle those.
    max_memory_bytes : refuse, before allocating, lattices whose enumeration and DP tables
        (bytes per ideal times ideals, bytes per cover edge times edges) would need more.
    merge_trivial : merge zero-time nodes into their only neighbour (paper 1's code does;
        exact, see :func:`~dnnpart.graph.stage_graph.build_stage_graph`).
    use_upper_bound : solve DPL first and prune with its value (exactness is unaffected;
        ``False`` gives the plain O(I^2) DP, for checks).
    work_bound : with the upper bound, also skip the DP cells whose ideal's work (or the work
        left) cannot fit on their devices below it (exact either way; ``False`` is the DP as
        before issue 20).
    threads : threads filling the rows of lattices of at least ``THREADED_IDEALS`` ideals
        (default: the machine's cores); the result does not depend on it.
    replication : also let a slice run on several identical devices at once, each taking
        every ``r``-th sample, paying the all-reduce of appendix C.2 (training graphs; the
        link's bandwidth is the cluster's). The plan's ``replica_of`` says which devices
        replicate which; the optimum is over contiguous pipeline splits with replicated
        stages. Costs a factor up to ``max(k, l)`` in time (CLI: ``--set replication=true``).
    max_hierarchy_ideals : on a hierarchical cluster (appendix C.3; without ``replication``,
        which there runs the flat DP, reported FEASIBLE only), refuse
        (``ProblemTooLargeError``) lattices with more ideals than this: the hierarchy DP
        (:mod:`dnnpart.solvers.dp.hierarchy`) costs up to ``O(I^4)`` slice prices.

    With the GPipe training form the plan optimises the PipeDream form and is reported
    FEASIBLE with that optimum as its bound (see the module docstring).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> r = solve_dp(chain_problem([4, 1, 1, 4], n_accelerators=2))
    >>> r.status.value, r.objective, r.stats["n_ideals"]
    ('optimal', 5.0, 5)
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2, cost=1.0)
    >>> solve_dp(p).objective                     # 4 + 1 compute + 1 transfer each
    6.0
    >>> r = solve_dp(p, replication=True)         # inference: no weight sync to pay
    >>> r.objective, r.plan.replica_of.tolist()   # both run everything, every other sample
    (5.0, [1, 1])
    """
    _check_options(options, "dp")
    replication = _flag(replication, "replication")
    _check_cap(max_ideals, "max_ideals")
    clock = Stopwatch(time_limit)
    stage = _stage_graph(problem, merge_trivial)
    hierarchical = problem.cluster.is_hierarchical
    if hierarchical and not replication:
        return _solve_hierarchy(problem, stage, clock, max_hierarchy_ideals, use_upper_bound,
                                progress)
    if progress is not None:
        progress.update(f"DP: contracted to {stage.n_stage_nodes:,} forward nodes", 0.0)
    _check_cap(max_memory_bytes, "max_memory_bytes")
    max_threads = _threads(threads)
    lattice = enumerate_stage_ideals(stage, max_ideals=int(max_ideals),
                                     max_memory_bytes=int(max_memory_bytes),
                                     bytes_per_ideal=_table_bytes(problem, replication,
                                                                  max_threads))
    t_enum = clock.elapsed
    if progress is not None:
        progress.update(f"DP: {lattice.n_ideals:,} ideals enumerated, {t_enum:.1f} s", 0.0)
    stats: dict[str, Any] = {
        "n_ideals": lattice.n_ideals,
        "n_stage_nodes": stage.n_stage_nodes,
        "n_artificial_nodes": stage.n_artificial,
        "n_cover_pairs": lattice.n_cover_pairs,
        "enumerate_s": t_enum,
    }
    upper, incumbent = math.inf, None
    if use_upper_bound:
        dpl = run_dp(problem, stage, _linear_lattice(stage), clock=clock, label="DPL bound",
                     replication=replication)
        upper, incumbent = dpl.value, dpl.plan()
        stats["upper_bound"] = upper
    n_threads = max_threads if lattice.n_ideals >= THREADED_IDEALS else 1
    gpipe = problem.graph.is_training and problem.objective.training == "gpipe"
    cells = None
    if (_flag(peel, "peel") and use_upper_bound and not replication and not gpipe
            and lattice.n_ideals >= PEEL_IDEALS):
        peeled = _solve_peeled(problem, stage, lattice, clock, max_threads, upper, incumbent,
                               stats)
        if peeled is not None and peeled.proven:
            stats.update(threads=n_threads, slices_priced=0, slices_pruned=0, timed_out=False)
            return result_from_plan(
                problem, peeled.plan, method="dp", clock=clock, proven=True,
                search_space=_space(problem, "contiguous splits in pipeline order"), **stats)
        if peeled is not None:
            upper, incumbent, cells = peeled.objective, peeled.plan, peeled.cell_mask
            stats["upper_bound"] = upper
    out = run_dp(problem, stage, lattice, upper=upper, clock=clock, progress=progress,
                 replication=replication, work_bound=_flag(work_bound, "work_bound"),
                 threads=n_threads, cell_mask=cells)
    stats["threads"] = n_threads
    stats.update(slices_priced=out.slices_priced, slices_pruned=out.slices_pruned,
                 timed_out=not out.finished)
    # The pruned DP is exact only below the bound; at or above it the incumbent is optimal.
    improved = out.assignment is not None and out.value < upper
    plan = out.plan() if improved else incumbent
    optimal_value = out.value if improved else upper
    # With replication on a hierarchy the DP prices every link at the host rate: its plan is
    # scored by the evaluator's hierarchy pricing but not proven optimal for it.
    proven = out.finished and not gpipe and not hierarchical
    exact_bound = gpipe and out.finished and plan is not None and not hierarchical
    bound = optimal_value if exact_bound else None
    space = "contiguous splits in pipeline order" + (", stages replicated" if replication else "")
    if hierarchical:
        space += " (priced at the host link, not the hierarchy: not proven optimal)"
    return result_from_plan(problem, plan, method="dp", clock=clock, proven=proven, bound=bound,
                            search_space=_space(problem, space), **stats)



#: Lattices from this many ideals first try the peeled relaxation (:mod:`.relax`).
PEEL_IDEALS = 20_000
#: ... when it has at most this fraction of the ideals.
PEEL_RATIO = 0.25


@dataclass(frozen=True, slots=True)
class _Peeled:
    """What the peeled relaxation found: its best plan of ``G`` and objective, whether that
    is proven optimal, and the cell mask for the DP over ``G`` (``None`` when proven)."""

    plan: Plan
    objective: float
    proven: bool
    cell_mask: tuple[npt.NDArray[np.int32], npt.NDArray[np.int8]] | None


def _solve_peeled(
    problem: Problem, stage: StageGraph, lattice: IdealLattice, clock: Stopwatch, threads: int,
    upper: float, incumbent: Plan | None, stats: dict[str, Any],
) -> _Peeled | None:
    """The peeled relaxation (:mod:`dnnpart.solvers.dp.relax`), or ``None`` when nothing is
    worth peeling or a DP did not finish. ``upper``/``incumbent``: DPL's. Adds ``peel_*``
    stats."""
    from dnnpart.solvers.dp import relax

    model = _device_model(problem)
    acc = np.bincount(stage.stage_of, weights=model.acc_time, minlength=stage.n_stage_nodes)
    cpu = np.bincount(stage.stage_of, weights=model.cpu_time, minlength=stage.n_stage_nodes)
    # light on every kind of device it can run on: wherever the extension puts it
    heaviest = np.maximum(np.where(np.isfinite(acc), acc, 0.0), np.where(np.isfinite(cpu), cpu, 0.0))
    light = heaviest <= relax.LIGHT_FRACTION * load_lower_bound(problem, stage)
    # the side components alone (the closer bound) when that leaves a small lattice, else
    # the one-neighbour leaves too if that leaves fewer ideals
    found: tuple[relax.Peeling, IdealLattice] | None = None
    limit = max(2, int(lattice.n_ideals * PEEL_RATIO))
    for leaves in (False, True):
        groups = relax.peel_set(stage, light, leaves=leaves)
        if not groups:
            continue
        peeling = relax.peel(stage, groups)
        try:
            found = peeling, enumerate_stage_ideals(peeling.stage, max_ideals=limit)
        except ProblemTooLargeError:
            continue
        if found[1].n_ideals < PEEL_IDEALS:
            break
        limit = found[1].n_ideals - 1
    if found is None:
        return None
    peeling, sub_lattice = found
    groups = peeling.groups
    sub_stage = peeling.stage
    costs = relax.peeled_costs(problem.graph, peeling.removed_nodes)

    def sub_dp(sg: StageGraph, lat: IdealLattice, bound: float, label: str,
               keep: bool = True) -> DpOutcome:
        n_threads = threads if lat.n_ideals >= THREADED_IDEALS else 1
        return run_dp(problem, sg, lat, upper=bound, clock=clock, label=label, work_bound=True,
                      threads=n_threads, costs=costs, keep_table=keep)

    dpl = run_dp(problem, sub_stage, _linear_lattice(sub_stage), clock=clock,
                 label="peeled DPL", costs=costs)
    sub = sub_dp(sub_stage, sub_lattice, dpl.value, "peeled DP", keep=False)
    stats.update(peel_stage_nodes=int(sum(g.size for g in groups)),
                 peel_ideals=sub_lattice.n_ideals, peel_slices_priced=sub.slices_priced)
    if not sub.finished:
        return None
    best = sub if sub.assignment is not None and sub.value < dpl.value else dpl
    if best.assignment is None:  # G' has no split: neither has G (memory only drops)
        return None
    lower = best.value
    plan: Plan | None = relax.extend_plan(problem, stage, peeling, best.assignment)
    assert plan is not None
    ev = evaluate(problem, plan)
    objective = ev.objective if ev.feasible else math.inf
    stats.update(peel_lower_bound=lower, peel_objective=objective)
    if upper <= objective:
        plan, objective = incumbent, upper
    if plan is None or not math.isfinite(objective):
        return None
    if objective <= lower * (1 + relax.MATCH_SLACK):
        return _Peeled(plan, objective, True, None)
    # the cells of G whose restriction to G' cannot be split below the incumbent, on the
    # ideal's devices or on the rest's, are on no better split of G
    prefix = sub_dp(sub_stage, sub_lattice, objective, "peeled prefix")
    rev_stage = relax.reverse_stage(sub_stage)
    rev_lattice = enumerate_stage_ideals(rev_stage)
    suffix = sub_dp(rev_stage, rev_lattice, objective, "peeled suffix")
    if not (prefix.finished and suffix.finished) or prefix.table is None or suffix.table is None:
        return None
    complement = relax.complement_map(sub_lattice, rev_lattice, sub_stage.n_stage_nodes)
    mask = relax.cell_mask(prefix.table, suffix.table, complement, objective)
    new_id = np.full(stage.n_stage_nodes, -1, np.int64)
    new_id[peeling.kept] = np.arange(peeling.kept.size)
    mask_of = relax.restriction_map(lattice, sub_lattice, new_id, sub_stage.n_stage_nodes)
    stats["peel_live_cells"] = float(mask[mask_of].mean())
    return _Peeled(plan, objective, False, (mask_of, mask))


#: Lattices from this many ideals are filled by several threads (below, a level's rows take
#: less time than handing them out).
THREADED_IDEALS = 20_000


def _threads(threads: object) -> int:
    if threads is None:
        import os

        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else (os.cpu_count() or 1))
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    return int(threads)


def _table_bytes(problem: Problem, replication: bool, threads: int = 1) -> int:
    """Bytes per ideal of :func:`run_dp`'s tables (value, back-pointers, counts), one stamp
    per thread, the work bound's and the levels' per-ideal sums, and the peeled
    relaxation's cell mask (:func:`_solve_peeled`)."""
    cells = (problem.cluster.n_accelerators + 1) * (problem.cluster.n_cpus + 1)
    # + the peeled relaxation's map to its lattice and its cell mask (<= PEEL_RATIO of the
    # ideals); its own tables (<= 2 x PEEL_RATIO of these) are freed before these exist
    return cells * (8 + 4 + 1 + 1 + (2 if replication else 0)) + 4 * threads + 16 + 4


def _check_cap(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _solve_hierarchy(
    problem: Problem, stage: StageGraph, clock: Stopwatch, max_ideals: int,
    use_upper_bound: bool, progress: Progress | None,
) -> SolveResult:
    _check_cap(max_ideals, "max_hierarchy_ideals")
    model = _device_model(problem)
    levels = hierarchy_model(problem, model.comm_scale)
    try:
        lattice = enumerate_stage_ideals(stage, max_ideals=int(max_ideals))
    except ProblemTooLargeError as exc:
        raise ProblemTooLargeError(
            f"dp on a hierarchical cluster: more than {max_ideals:,} ideals (the hierarchy DP "
            "costs up to O(I^4)); raise max_hierarchy_ideals, or run the flat dp on a reference "
            f"cluster, or dpl ({exc})"
        ) from None
    if progress is not None:
        progress.update(f"DP (hierarchy): {lattice.n_ideals:,} ideals", 0.0)
    stats: dict[str, Any] = {"n_ideals": lattice.n_ideals, "n_stage_nodes": stage.n_stage_nodes,
                             "n_groups": len(levels.groups)}

    def run(upper: float) -> HierarchyOutcome:
        return run_hierarchy_dp(problem, stage, lattice, levels, acc_time=model.acc_time,
                                cpu_time=model.cpu_time, acc_cap=model.acc_cap,
                                cpu_cap=model.cpu_cap, upper=upper, clock=clock,
                                progress=progress)

    upper = math.inf
    if use_upper_bound:
        # The flat DP's split, priced on the hierarchy, bounds the optimum only if it lies in
        # the space; so a run below it that finds nothing is repeated without it.
        flat = run_dp(problem, stage, lattice, clock=clock, label="flat DP bound").plan()
        if flat is not None:
            upper = evaluate(problem, flat).objective
        stats["upper_bound"] = upper
    out = run(upper)
    priced = out.slices_priced
    if out.finished and out.assignment is None and math.isfinite(upper):
        out = run(math.inf)
        priced += out.slices_priced
    stats.update(slices_priced=priced, timed_out=not out.finished)
    plan = None if out.assignment is None else Plan(assignment=out.assignment)
    gpipe = problem.graph.is_training and problem.objective.training == "gpipe"
    proven = out.finished and not gpipe
    bound = out.value if (gpipe and out.finished and plan is not None) else None
    space = "contiguous splits in pipeline order, one segment per group (CPU stages between groups)"
    return result_from_plan(problem, plan, method="dp", clock=clock, proven=proven, bound=bound,
                            search_space=_space(problem, space), **stats)


def solve_dpl(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    merge_trivial: bool = True, replication: bool = False, **options: Any,
) -> SolveResult:
    """DP over the prefixes of a depth-first topological order of the forward graph.

    The linearization adds artificial chain edges, so the graph has only ``n + 1`` ideals;
    the split is contiguous but not guaranteed optimal (status FEASIBLE, no bound).
    ``replication`` as for :func:`solve_dp`.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> r = solve_dpl(chain_problem([4, 1, 1, 4], n_accelerators=2))
    >>> r.status.value, r.objective
    ('feasible', 5.0)
    """
    _check_options(options, "dpl")
    replication = _flag(replication, "replication")
    clock = Stopwatch(time_limit)
    stage = _stage_graph(problem, merge_trivial)
    lattice = _linear_lattice(stage)
    out = run_dp(problem, stage, lattice, clock=clock, progress=progress, label="DPL",
                 replication=replication)
    plan = out.plan()
    # Not proven: linearization drops splits, so "no plan" does not prove infeasibility.
    return result_from_plan(
        problem, plan, method="dpl", clock=clock, proven=False,
        search_space=_space(problem, "contiguous splits along one linear order"),
        n_ideals=lattice.n_ideals, n_stage_nodes=stage.n_stage_nodes,
        slices_priced=out.slices_priced, timed_out=not out.finished,
    )
