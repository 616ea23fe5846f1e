"""The throughput DP over one ideal lattice: its tables, the kernel that fills them (one per
feature: :mod:`dnnpart.solvers.dp.kernels`), and the split read back from them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from dnnpart._jit import not_compiled
from dnnpart.graph.stage_graph import StageGraph
from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.solvers.dp.bounds import work_bound as work_per_ideal
from dnnpart.solvers.dp.devices import DeviceModel, allreduce_scale, device_model
from dnnpart.solvers.dp.ideals import IdealLattice
from dnnpart.solvers.dp.kernels import (
    KIND_ACC,
    KIND_BASE,
    KIND_CPU,
    KIND_FEWER_ACC,
    KIND_FEWER_CPU,
    fill_bounded,
    fill_masked,
    fill_plain,
    fill_replicated,
)
from dnnpart.solvers.dp.rows import fill_by_levels, fill_in_order, report
from dnnpart.solvers.method import Progress, Stopwatch

#: Lattices with at most this many cover pairs run the DP's plain twin while numba is not
#: loaded and the numpy rows (:mod:`dnnpart.solvers.dp.small`) do not apply.
SMALL_COVER_PAIRS = 300
#: Lattices of at most this many ideals fill their rows in numpy while numba is not loaded
#: (:mod:`dnnpart.solvers.dp.small`; op BERT-12 inference, 2,906 ideals: 0.3 s).
SMALL_LATTICE = 3000


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
        """The split as a plan (``None`` without one).

        Examples
        --------
        >>> DpOutcome(5.0, np.array([0, 1], np.int32), True, 3, 0).plan().assignment.tolist()
        [0, 1]
        """
        if self.assignment is None:
            return None
        return Plan(assignment=self.assignment, replica_of=self.replica_of)


class _Scratch(NamedTuple):
    """What one thread's kernel calls write besides the tables."""

    walk: tuple[Any, ...]
    counters: npt.NDArray[np.int64]
    live: npt.NDArray[np.int8]
    rep_load: npt.NDArray[np.float64]


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
    :func:`~dnnpart.solvers.dp.kernels.fill_bounded`): same optimum when it is below
    ``upper``. ``threads > 1`` fills the rows of one lattice level (ideals of one size, which
    never read each other) in that many threads (the kernels release the GIL): same tables.
    Without both this is paper 1's DP (:func:`~dnnpart.solvers.dp.kernels.fill_plain`).
    ``costs`` (``node_cost, uniform, edge_cost, outdeg``) replaces the graph's transfer
    arrays; with a ``stage`` whose ``stage_of`` is ``-1`` for some nodes it prices the graph
    without them (:mod:`dnnpart.solvers.dp.relax`; their entries in the assignment are
    meaningless). ``cell_mask`` (``mask_of, mask``: no replication, finite ``upper``) skips
    the cells ``(I, a, c)`` with ``mask[mask_of[I], a, c] == 0``, which must be on no split
    below ``upper`` (same optimum below it). ``keep_table`` returns the DP table in the
    outcome's ``table``.

    Examples
    --------
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.solvers.dp.ideals import enumerate_stage_ideals
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> sg = build_stage_graph(p.graph)
    >>> out = run_dp(p, sg, enumerate_stage_ideals(sg))
    >>> out.value, out.assignment.tolist()
    (5.0, [0, 0, 1, 1])
    """
    graph = problem.graph
    model = device_model(problem)
    n_acc, n_cpu = len(model.accelerators), len(model.cpus)
    n_ideals = lattice.n_ideals
    if costs is None:
        node_cost, uniform = graph.node_out_cost()
        edge_cost, outdeg = graph.edge_cost, graph.out_degree()
    else:
        node_cost, uniform, edge_cost, outdeg = costs
    shape = (n_ideals, n_acc + 1, n_cpu + 1)
    table = (np.empty(shape, np.float64), np.empty(shape, np.int32), np.empty(shape, np.int8))
    prev_count = np.ones(shape if replication else (1, 1, 1), np.int16)
    max_rep_acc, max_rep_cpu, ar_acc, ar_cpu = (_replica_limits(problem, model) if replication
                                                else (1, 1, 0.0, 0.0))
    bound = (work_per_ideal(model, stage, lattice)
             if work_bound and not replication and math.isfinite(upper) else None)
    mask = cell_mask if not replication and math.isfinite(upper) else None
    if mask is not None and bound is None:
        bound = (np.zeros(n_ideals), 0.0, 0.0)  # every cell passes a zero work bound
    # the kernel for the features in use; replication with one device of each kind (or no
    # link between them) is the plain DP
    kernel: Any = fill_plain
    if max_rep_acc > 1 or max_rep_cpu > 1:
        kernel = fill_replicated
    elif mask is not None:
        kernel = fill_masked
    elif bound is not None:
        kernel = fill_bounded
    n, depth = graph.n_nodes, stage.n_stage_nodes + 2

    def scratch() -> _Scratch:
        # in_set, n_succ_in, stamp and the walk stack (4 arrays); one set per thread
        walk = (np.zeros(n, np.int8), np.zeros(n, np.int32), np.full(n_ideals, -1, np.int32),
                np.empty(depth, np.int64), np.empty(depth, np.int64), np.empty(depth, np.int64),
                np.empty((depth, 5), np.float64), np.empty((depth, 2), np.int64))
        return _Scratch(walk, np.zeros(2, np.int64), np.zeros((n_acc + 1, n_cpu + 1), np.int8),
                        np.empty((2, max(max_rep_acc, max_rep_cpu) + 1), np.float64))

    # small lattices before numba is loaded: the plain twin costs less than loading numba
    numba_unused = _rows_not_compiled()
    small = numba_unused and lattice.n_cover_pairs <= SMALL_COVER_PAIRS
    fill = getattr(kernel, "py_func", kernel) if small else kernel
    arrays = ((lattice.down_ptr, lattice.down_node, lattice.down_lower),
              (stage.member_ptr, stage.member_idx, graph.succ_ptr, graph.succ_idx,
               graph.pred_ptr, graph.pred_idx, graph.pred_edge, edge_cost, node_cost, uniform,
               outdeg, graph.memory_bytes),
              (model.acc_time, model.cpu_time, model.acc_cap, model.cpu_cap, model.comm_scale,
               model.overlap))

    def own_arguments(sc: _Scratch) -> tuple[Any, ...]:
        # the arguments of the chosen kernel's feature, with this thread's scratch
        if kernel is fill_replicated:
            return ((max_rep_acc, max_rep_cpu, ar_acc, ar_cpu, sc.rep_load, prev_count),)
        if kernel is fill_masked:
            return (bound, sc.live, mask)
        if kernel is fill_bounded:
            return (bound, sc.live)
        return ()

    def fill_rows(start: int, stop: int, sc: _Scratch) -> None:
        fill(start, stop, float(upper), *arrays, sc.walk, table, sc.counters, *own_arguments(sc))

    by_rows = None
    if (numba_unused and not replication and n_ideals <= SMALL_LATTICE and costs is None
            and mask is None and not (clock is not None and clock.expired())):
        from dnnpart.solvers.dp.small import fill_small

        by_rows = fill_small(lattice, stage, graph, node_cost, uniform, model.acc_time,
                             model.cpu_time, model.acc_cap, model.cpu_cap, model.comm_scale,
                             model.overlap, float(upper), *table)
    if by_rows is not None:
        scratches = [scratch()]
        scratches[0].counters[0] = by_rows
        finished = True
        report(progress, clock, label, n_ideals, n_ideals)
    elif threads > 1 and not small:
        finished, scratches = fill_by_levels(lattice, stage, fill_rows, scratch, threads, clock,
                                             progress, label)
    else:
        scratches = [scratch()]
        finished = fill_in_order(n_ideals, fill_rows, scratches[0], clock, progress, label)
    priced = sum(int(sc.counters[0]) for sc in scratches)
    pruned = sum(int(sc.counters[1]) for sc in scratches)
    if not finished:
        return DpOutcome(math.inf, None, False, priced, pruned)
    dp = table[0]
    value = float(dp[n_ideals - 1, n_acc, n_cpu])
    kept = dp if keep_table else None
    if not math.isfinite(value):
        return DpOutcome(math.inf, None, True, priced, pruned, table=kept)
    stage_device, replica_of = _read_split(problem, stage, lattice, model, table, prev_count,
                                           replication)
    return DpOutcome(value, stage_device[stage.stage_of], True, priced, pruned,
                     replica_of if replication else None, kept)


def _rows_not_compiled() -> bool:
    """Whether numba has compiled none of the row kernels in this process (each kernel
    compiled or loaded from the cache later costs a fraction of that first load)."""
    return all(not_compiled(k) for k in (fill_plain, fill_replicated, fill_bounded, fill_masked))


def _replica_limits(problem: Problem, model: DeviceModel) -> tuple[int, int, float, float]:
    """``(max_rep_acc, max_rep_cpu, ar_acc, ar_cpu)`` of
    :func:`~dnnpart.solvers.dp.kernels.fill_replicated`: up to every device of a kind, at
    the all-reduce of :func:`~dnnpart.solvers.dp.devices.allreduce_scale`."""
    n_acc, n_cpu = len(model.accelerators), len(model.cpus)
    ar_acc = allreduce_scale(problem, model.accelerators, "accelerators")
    ar_cpu = allreduce_scale(problem, model.cpus, "CPUs")
    # without a link (inf all-reduce) a replicated slice can never be feasible
    max_rep_acc = max(1, n_acc) if math.isfinite(ar_acc) else 1
    max_rep_cpu = max(1, n_cpu) if math.isfinite(ar_cpu) else 1
    return (max_rep_acc, max_rep_cpu, ar_acc if math.isfinite(ar_acc) else 0.0,
            ar_cpu if math.isfinite(ar_cpu) else 0.0)


def _read_split(
    problem: Problem, stage: StageGraph, lattice: IdealLattice, model: DeviceModel,
    table: tuple[npt.NDArray[Any], ...], prev_count: npt.NDArray[np.int16], replication: bool,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """The best split of the whole graph, from the back-pointers: each stage node's device
    and each device's primary replica."""
    _, prev_lower, prev_kind = table
    stage_device = np.full(stage.n_stage_nodes, -1, np.int32)
    replica_of = np.arange(problem.cluster.n_devices, dtype=np.int32)
    big, a, c = lattice.n_ideals - 1, len(model.accelerators), len(model.cpus)
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
    return stage_device, replica_of
