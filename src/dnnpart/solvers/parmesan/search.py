"""Phase 2: optimal stage-to-device mapping by binary search over a DFS (Alg. 1).

The outer loop keeps an interval ``[lower, upper]`` holding the optimum of Eq. 5 under the
chosen instantiation: ``lower`` starts at Eq. 8 / Eq. 9 strengthened by a bottleneck
assignment (:func:`~.cost.matching_bound`), ``upper`` at the best of the CS,
p2p-first and random mappings. Each round tests ``threads`` targets that divide the interval
evenly (one target per worker process; with one worker this is plain bisection): a target
with a mapping found lowers ``upper`` to that mapping's max stage time, a target proven
infeasible raises ``lower`` to it. It stops when ``upper - lower <= eps * upper`` (status
``optimal``: exact within the relative ``eps``) or when the time limit cuts a round (status
``feasible`` with the final interval and its gap).

Choices where the paper is silent (also in ``docs/methods/parmesan.md``):

* **Timed-out targets** count as unknown, not as "not found": the paper folds them into the
  lower bound, which can make the reported bound wrong; here ``lower`` only moves on proofs.
  A target may use half of the time left (at least 0.5 s); after a round without an
  answer the next targets move towards the ends of the interval (:func:`target_fractions`),
  where infeasibility proofs and mappings come faster.
* **Search order** (completing neighbourhoods early): greedily the unplaced vertex with the
  most placed neighbours in the instantiation's interaction graph (Eq. 6: stage-graph edges of
  one copy; Eq. 7: ring links), ties by the weight to placed neighbours, then by its total
  weight, then by id. Eq. 6 therefore places a pipeline copy neighbourhood by neighbourhood,
  Eq. 7 closes one ring (heaviest first) before starting the next.
* **Symmetry**: under Eq. 6 the ``R`` pipeline copies are interchangeable, so the devices of
  one anchor stage (the first vertex of the order) must increase with the position of its
  replicas; under Eq. 7 each stage's ring is invariant under rotation (and reflection when the
  matrices are symmetric and ``R >= 3``), so its first-placed replica takes the smallest
  device of the ring (and the later of its two ring neighbours a larger device than the
  earlier). Replicas of a stage without any term are interchangeable and placed in increasing
  device order.
* **Parallelism**: targets run in separate processes (``fork``), since the GIL serialises
  Python threads; each round waits for all its targets and combines them in target order, so
  the result does not depend on scheduling. ``deterministic=True`` additionally replaces the
  wall-clock budget of a target by a node budget (``node_limit``), so even a cut search
  gives the same answer on any machine.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.plan import Status
from dnnpart.pricing.pairs import Topology
from dnnpart.pricing.stages import mapping_stage_times, max_stage_time
from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
from dnnpart.solvers.parmesan.cost import (
    Instantiation,
    Terms,
    _stop_point,
    build_terms,
    choose_instantiation,
    lower_bound,
)
from dnnpart.solvers.parmesan.kernels import (
    STATUS_BUDGET,
    STATUS_FOUND,
    STATUS_INFEASIBLE,
    dfs_feasible,
)
from dnnpart.stages import FloatArray, IntArray, PipelineStages

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

#: Default relative tolerance of the binary search.
DEFAULT_EPS = 1e-3
#: Nodes one kernel call expands before the driver looks at the clock.
_CHUNK = 20_000
#: Target used to ask for "any mapping with finite stage times".
_FINITE_TARGET = 1e299


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """The precomputed search: order, checking scheme, symmetry constraints (Alg. 2's input)."""

    n: int
    mode: int
    order: IntArray
    base: FloatArray
    chk_ptr: IntArray
    chk_other: IntArray
    chk_w: FloatArray
    chk_nl: FloatArray
    chk_dir: IntArray
    chk_base: FloatArray
    gt_ptr: IntArray
    gt_other: IntArray
    inv: FloatArray
    lat: FloatArray
    fut: FloatArray
    dmin: FloatArray
    res_ptr: IntArray
    ev_row: IntArray
    res_row: IntArray
    res_tab: FloatArray


def search_order(terms: Terms, n: int) -> IntArray:
    """Greedy max-connectivity order of the ``n`` vertices (see the module docstring).

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0, 0], param_bytes=[0, 0, 0],
    ...                     comm_bytes=[[0, 1, 0], [0, 0, 5], [0, 0, 0]])
    >>> search_order(build_terms(st, "p2p"), 3).tolist()
    [1, 2, 0]
    """
    nbr: list[dict[int, float]] = [{} for _ in range(n)]
    for a, b, w in zip(terms.a.tolist(), terms.b.tolist(), terms.weight.tolist(), strict=True):
        nbr[a][b] = nbr[a].get(b, 0.0) + w
        nbr[b][a] = nbr[b].get(a, 0.0) + w
    total = [sum(x.values()) for x in nbr]
    placed = np.zeros(n, np.bool_)
    n_conn = np.zeros(n, np.int64)
    w_conn = np.zeros(n)
    order: list[int] = []
    for _ in range(n):
        _stop_point()
        best, key = -1, (-1, -1.0, -1.0)
        for v in range(n):
            if placed[v]:
                continue
            k = (int(n_conn[v]), float(w_conn[v]), total[v])
            if k > key:
                best, key = v, k
        placed[best] = True
        order.append(best)
        for u, w in nbr[best].items():
            n_conn[u] += 1
            w_conn[u] += w
    return np.array(order, np.int64)


def _symmetry_pairs(
    stages: PipelineStages, topo: Topology, terms: Terms, pos: IntArray
) -> list[tuple[int, int]]:
    """``(later position, earlier position)`` pairs: device at the later must be larger."""
    s_n, r_n = stages.n_stages, stages.replicas
    pairs: list[tuple[int, int]] = []
    if r_n < 2:
        return pairs
    has_term = np.zeros(s_n, np.bool_)
    if terms.a.size:
        if terms.combine == "sum":
            has_term[terms.a % s_n] = True
            has_term[terms.b % s_n] = True
        else:
            has_term[terms.stage] = True

    def chain(vertices: list[int]) -> None:
        ps = sorted(int(pos[v]) for v in vertices)
        pairs.extend((ps[i], ps[i - 1]) for i in range(1, len(ps)))

    for s in range(s_n):
        if not has_term[s]:
            chain([r * s_n + s for r in range(r_n)])
    if terms.combine == "sum":
        if has_term.any():
            order_pos = np.argsort(pos)
            anchor = next(int(v) % s_n for v in order_pos if has_term[int(v) % s_n])
            chain([r * s_n + anchor for r in range(r_n)])
        return pairs
    for s in np.nonzero(has_term)[0].tolist():
        reps = [r * s_n + s for r in range(r_n)]
        first = min(range(r_n), key=lambda r: int(pos[reps[r]]))
        pairs.extend((int(pos[reps[r]]), int(pos[reps[first]])) for r in range(r_n) if r != first)
        if r_n >= 3 and topo.symmetric:
            a, b = int(pos[reps[(first + 1) % r_n]]), int(pos[reps[(first - 1) % r_n]])
            pairs.append((max(a, b), min(a, b)))
    return pairs


def _csr(n: int, keys: list[int]) -> tuple[IntArray, IntArray]:
    idx = np.argsort(np.array(keys, np.int64), kind="stable").astype(np.int64)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(np.array(keys, np.int64), minlength=n), out=ptr[1:])
    return ptr, idx


#: Cap of the reservation table: above any target, and ``cap - cap = 0`` stays finite.
_RES_CAP = 1e300


def _reservations(
    n: int, terms: Terms, pos: IntArray, chk_ptr: IntArray, chk_idx: IntArray, topo: Topology
) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """Eq. 6 forward-check table (see :mod:`.kernels`): per position ``j`` one row per number
    of its later terms already realised (``res_row``: its index in the table of distinct
    rows); ``ev_row`` per checking-scheme entry."""
    pa, pb = pos[terms.a], pos[terms.b]
    later_terms: list[list[int]] = [[] for _ in range(n)]
    # realisation order: by the position that checks the term, then checking-scheme order
    for k in range(n):
        for e in chk_idx[chk_ptr[k]:chk_ptr[k + 1]].tolist():
            later_terms[int(min(pa[e], pb[e]))].append(e)
    # per device, its cheapest links (either direction) to as many others as a position has
    # neighbours at most, and its lowest latency: row blocks, no (D, D) work array (134 MB
    # each at 4,096 devices)
    order_vertex = np.empty(n, np.int64)
    order_vertex[pos] = np.arange(n)
    most = max((len({int(terms.a[e] + terms.b[e]) - int(order_vertex[j]) for e in lt})
                for j, lt in enumerate(later_terms)), default=0)
    cheap_sorted = np.empty((n, most))
    lat_min = np.zeros(n)
    for lo, hi, block in _symmetric_rows(topo.inv_bandwidth):
        if most:
            near = np.partition(block, most - 1, axis=1)[:, :most] if most < n else block
            cheap_sorted[lo:hi] = np.sort(near, axis=1)
    if n > 1:
        for lo, hi, block in _symmetric_rows(topo.latency):
            lat_min[lo:hi] = block.min(axis=1)
    res_ptr = np.zeros(n, np.int64)
    # one row per position and per number of its later terms realised (n + terms), each the
    # index of its values among the distinct ones: rows depend on the remaining terms' weights
    res_row = np.empty(n + sum(len(lt) for lt in later_terms), np.int64)
    distinct: dict[tuple[float, ...], int] = {}
    values: list[FloatArray] = []
    row = 0
    ev_row = np.zeros(chk_idx.shape[0], np.int64)
    where = np.empty(chk_idx.shape[0], np.int64)
    where[chk_idx] = np.arange(chk_idx.shape[0])
    for j in range(n):
        res_ptr[j] = row
        lt = later_terms[j]
        for m in range(len(lt) + 1):
            rest = lt[m:]
            # terms to the same neighbour share its device: one item per neighbour
            nb: dict[int, float] = {}
            for e in rest:
                other = int(terms.a[e] + terms.b[e]) - int(order_vertex[j])
                nb[other] = nb.get(other, 0.0) + float(terms.weight[e])
            w = np.sort(np.array(list(nb.values()), dtype=np.float64))[::-1]
            latencies = float(terms.n_lat[rest].sum()) if rest else 0.0
            key = (latencies, *w.tolist())
            if key not in distinct:
                if rest:
                    with np.errstate(invalid="ignore"):
                        val = (cheap_sorted[:, : len(w)] * w[None, :]).sum(axis=1) + latencies * lat_min
                    val = np.where(np.isnan(val), np.inf, val)
                else:
                    val = np.zeros(n)
                distinct[key] = len(values)
                values.append(np.minimum(val, _RES_CAP))
            res_row[row] = distinct[key]
            row += 1
            if m < len(lt):
                ev_row[where[lt[m]]] = res_ptr[j] + m
    return res_ptr, ev_row, res_row, np.ascontiguousarray(np.array(values).reshape(-1, n))


#: Rows per block of the (D, D) matrices' row-wise minima (2 MB of float64 at 1,024 devices).
_BLOCK_ROWS = 256


def _symmetric_rows(matrix: FloatArray) -> Iterator[tuple[int, int, FloatArray]]:
    """``min(M, M^T)`` a block of rows at a time, with ``inf`` on the diagonal (a device's link
    to itself never counts): ``(first row, end row, block)``."""
    n = matrix.shape[0]
    for lo in range(0, n, _BLOCK_ROWS):
        hi = min(n, lo + _BLOCK_ROWS)
        block = np.minimum(matrix[lo:hi], matrix[:, lo:hi].T)
        block[np.arange(hi - lo), np.arange(lo, hi)] = np.inf
        yield lo, hi, block


def _off_diagonal_minima(matrix: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Each row's and each column's minimum of ``matrix`` off its diagonal, a block of rows at
    a time."""
    n = matrix.shape[0]
    rows, cols = np.empty(n), np.full(n, np.inf)
    for lo in range(0, n, _BLOCK_ROWS):
        hi = min(n, lo + _BLOCK_ROWS)
        block = matrix[lo:hi].copy()
        block[np.arange(hi - lo), np.arange(lo, hi)] = np.inf
        rows[lo:hi] = block.min(axis=1)
        np.minimum(cols, block.min(axis=0), out=cols)
    return rows, cols


def build_search_space(
    stages: PipelineStages, topo: Topology, kind: Instantiation, *, symmetry: bool = True
) -> SearchSpace:
    """Order, checking scheme and symmetry constraints for :func:`dfs_feasible`."""
    n = stages.n_devices
    terms = build_terms(stages, kind)
    order = search_order(terms, n)
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    pa, pb = pos[terms.a], pos[terms.b]
    later = np.maximum(pa, pb)
    ptr, idx = _csr(n, later.tolist())
    other = np.minimum(pa, pb)[idx]
    # dir = 1: the later vertex is the term's sender a
    chk_dir = (pa >= pb).astype(np.int64)[idx]
    s_n = stages.n_stages
    pairs = _symmetry_pairs(stages, topo, terms, pos) if symmetry else []
    # forward-check data (see the kernel): later terms per earlier position, cheapest links
    fut = np.zeros((n, 4))
    early = np.minimum(pa, pb)
    sender = pa < pb
    for e in range(terms.a.shape[0]):
        c = 0 if sender[e] else 2
        j = int(early[e])
        if terms.combine == "sum":
            fut[j, c] += terms.weight[e]
            fut[j, c + 1] += terms.n_lat[e]
        else:
            fut[j, c] = max(fut[j, c], terms.weight[e])
            fut[j, c + 1] = max(fut[j, c + 1], terms.n_lat[e])
    if n > 1:
        inv_rows, inv_cols = _off_diagonal_minima(topo.inv_bandwidth)
        lat_rows, lat_cols = _off_diagonal_minima(topo.latency)
        dmin = np.stack([inv_rows, lat_rows, inv_cols, lat_cols], axis=1)
    else:
        dmin = np.zeros((n, 4))
    # no route at all out of / into a device: a huge finite cost keeps 0 * cost = 0
    dmin = np.minimum(dmin, 1e300)
    res_ptr, ev_row, res_row, res_tab = _reservations(n, terms, pos, ptr, idx, topo)
    gptr, gidx = _csr(n, [p[0] for p in pairs])
    gt_other = np.array([p[1] for p in pairs], np.int64)[gidx] if pairs else np.zeros(0, np.int64)
    return SearchSpace(
        n=n, mode=0 if terms.combine == "sum" else 1, order=order,
        base=stages.compute[order % s_n].astype(np.float64),
        chk_ptr=ptr, chk_other=other.astype(np.int64), chk_w=terms.weight[idx],
        chk_nl=terms.n_lat[idx], chk_dir=chk_dir,
        chk_base=stages.compute[terms.stage[idx]].astype(np.float64) if idx.size else np.zeros(0),
        gt_ptr=gptr, gt_other=gt_other,
        inv=np.ascontiguousarray(topo.inv_bandwidth), lat=np.ascontiguousarray(topo.latency),
        fut=fut, dmin=np.ascontiguousarray(dmin), res_ptr=res_ptr, ev_row=ev_row,
        res_row=res_row, res_tab=res_tab,
    )


def feasible(
    space: SearchSpace, t: float, *, deadline: float | None = None,
    node_limit: int | None = None, python: bool = False,
) -> tuple[int, IntArray | None, int]:
    """Is there a mapping with every stage time ``<= t``? ``(status, device per vertex, nodes)``.

    ``python=True`` runs the kernel's uncompiled source (compilation checks; the brute-force
    twin is in ``tests/solvers/parmesan/test_dfs_twin.py``).
    """
    n = space.n
    state = np.zeros(2, np.int64)
    dev_at = np.full(n, -1, np.int64)
    used = np.zeros(n, np.bool_)
    loads = np.zeros((n + 1, n))
    cand = np.zeros((n, n), np.int64)
    ncand = np.zeros(n, np.int64)
    ci = np.zeros(n, np.int64)
    fn: Callable[..., Any] = dfs_feasible.py_func if python else dfs_feasible
    total = 0
    while True:
        chunk = _CHUNK if node_limit is None else max(1, min(_CHUNK, node_limit - total))
        status, nodes = fn(n, space.mode, float(t), space.base, space.chk_ptr, space.chk_other,
                           space.chk_w, space.chk_nl, space.chk_dir, space.chk_base,
                           space.gt_ptr, space.gt_other, space.inv, space.lat, space.fut,
                           space.dmin, space.res_ptr, space.ev_row, space.res_row, space.res_tab, state,
                           dev_at, used, loads, cand, ncand, ci, chunk)
        total += int(nodes)
        if status != STATUS_BUDGET:
            break
        if node_limit is not None and total >= node_limit:
            return STATUS_BUDGET, None, total
        if deadline is not None and time.monotonic() >= deadline:
            return STATUS_BUDGET, None, total
    if status == STATUS_INFEASIBLE:
        return STATUS_INFEASIBLE, None, total
    vertex_dev = np.empty(n, np.int64)
    vertex_dev[space.order] = dev_at
    return STATUS_FOUND, vertex_dev, total


@dataclass(frozen=True, slots=True, kw_only=True)
class MappingResult:
    """Outcome of :func:`map_stages`.

    Attributes
    ----------
    device_of : ``(R, S)`` device of replica ``r`` of stage ``s`` (``None`` when none found).
    objective : max stage time (Eq. 5) of ``device_of`` under ``instantiation``.
    bound : proven lower bound on the optimum under ``instantiation`` (``t_l``).
    status : ``OPTIMAL`` (``objective <= bound * (1 + eps)``-ish: ``upper - lower <= eps *
        upper``), ``FEASIBLE`` (cut by the time limit), ``INFEASIBLE`` (every mapping needs a
        missing link), ``UNKNOWN`` (cut before any finite mapping was found).
    gap : ``(objective - bound) / objective``.
    rings : ``(S, R)`` devices of each stage's all-reduce ring, in ring order (replica index).
    stage_times : ``(R, S)`` stage times under ``instantiation``.
    baselines : objective of the CS, p2p-first and random mappings.
    """

    device_of: IntArray | None
    objective: float
    bound: float
    status: Status
    gap: float
    instantiation: Instantiation
    rings: IntArray | None
    stage_times: FloatArray | None
    baselines: dict[str, float] = field(default_factory=dict)
    initial_bound: float = 0.0
    n_nodes: int = 0
    n_targets: int = 0
    wall_time_s: float = 0.0


#: Rounds in a row without an answer before a search gives up (targets then lie within
#: ``2**-7`` of the interval's ends).
_MAX_LEVEL = 12


def target_fractions(workers: int, level: int) -> list[float]:
    """Where in ``[lower, upper]`` a round puts its targets (fractions of the width).

    Level 0 divides the interval evenly; after ``level`` rounds without an answer the targets
    move towards the lower end (odd levels) or the upper end (even levels).

    Examples
    --------
    >>> target_fractions(1, 0), target_fractions(1, 1), target_fractions(1, 2)
    ([0.5], [0.25], [0.75])
    >>> target_fractions(3, 0)
    [0.25, 0.5, 0.75]
    """
    base = [(i + 1) / (workers + 1) for i in range(workers)]
    if level == 0:
        return base
    p = 2 ** ((level + 1) // 2)
    if level % 2 == 1:
        return [f**p for f in base]
    return [1 - (1 - f) ** p for f in base]


_WORKER_SPACE: SearchSpace | None = None


def _init_worker(space: SearchSpace | None) -> None:
    global _WORKER_SPACE
    # Ctrl-C reaches the whole process group: the parent stops the search (and these
    # workers); a worker that took it itself would print a KeyboardInterrupt traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER_SPACE = space


def start_pool(workers: int, space: SearchSpace | None) -> ProcessPoolExecutor:
    """The mapper's worker processes, each holding ``space`` and ignoring SIGINT."""
    import multiprocessing  # lazy, like the pool: the method catalog imports this module
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(space,))


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """End the pool's worker processes now (they ignore SIGINT; see :func:`_init_worker`)."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            proc.terminate()


def _worker(t: float, deadline: float | None, node_limit: int | None) -> tuple[int, Any, int]:
    assert _WORKER_SPACE is not None
    return feasible(_WORKER_SPACE, t, deadline=deadline, node_limit=node_limit)


def _gap(obj: float, bound: float) -> float:
    if not math.isfinite(obj):
        return math.inf
    if obj <= 0:
        return 0.0
    return max(0.0, (obj - bound) / obj)


def map_stages(
    stages: PipelineStages,
    topo: Topology,
    *,
    instantiation: Instantiation | Literal["auto"] = "auto",
    eps: float = DEFAULT_EPS,
    time_limit: float | None = None,
    threads: int = 1,
    deterministic: bool = False,
    node_limit: int | None = None,
    seed: int | None = 0,
    symmetry: bool = True,
) -> MappingResult:
    """Map ``R`` copies of a stage graph bijectively onto the devices, minimising Eq. 5.

    Parameters
    ----------
    instantiation : ``"p2p"`` (Eq. 6), ``"allreduce"`` (Eq. 7) or ``"auto"`` (Sec. 5.2 rule).
    eps : relative width of the final interval.
    time_limit : seconds for the whole search (``None`` = until exact within ``eps``).
    threads : worker processes testing targets in parallel.
    deterministic : budget each target by ``node_limit`` nodes (default 2,000,000) instead of
        the clock.
    seed : seed of the random baseline mapping.

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0, 0, 0], param_bytes=[0] * 4,
    ...                     comm_bytes=[[0, 1, 0, 0], [0, 0, 3, 0], [0, 0, 0, 1], [0] * 4])
    >>> bw = [[0, 100, 10, 10], [100, 0, 10, 10], [10, 10, 0, 100], [10, 10, 100, 0]]
    >>> res = map_stages(st, Topology.from_matrices(bw))
    >>> res.status.value, round(res.objective, 6)
    ('optimal', 0.13)
    """
    clock0 = time.monotonic()
    deadline = None if time_limit is None else clock0 + float(time_limit)
    if stages.n_devices != topo.n_devices:
        raise UsageError(f"the pipeline needs S * R = {stages.n_devices} devices, the topology "
                         f"has {topo.n_devices}")
    if not eps > 0:
        raise UsageError(f"eps must be > 0, got {eps!r}")
    kind: Instantiation = (choose_instantiation(stages) if instantiation == "auto"
                           else instantiation)
    if deterministic and node_limit is None:
        node_limit = 2_000_000
    # the bound's tables first: their (D, D) work arrays are gone before the search space's
    # forward-check table (hundreds of MB at 4,096 devices) is made
    lower = lower_bound(stages, topo, kind, matching=True)
    space = build_search_space(stages, topo, kind, symmetry=symmetry)
    initial_bound = lower
    candidates = {"cs": cs_mapping(stages), "p2p-first": p2p_first_mapping(stages),
                  "random": random_mapping(stages, seed)}
    base_obj = {k: max_stage_time(stages, topo, m, kind) for k, m in candidates.items()}
    best_key = min(base_obj, key=lambda k: base_obj[k])
    best: IntArray | None = candidates[best_key]
    upper = base_obj[best_key]
    n_nodes = 0
    n_targets = 0
    cut = False
    level = 0
    workers = max(1, int(threads))
    pool: ProcessPoolExecutor | None = None
    if workers > 1:
        pool = start_pool(workers, space)

    def run_targets(targets: list[float]) -> list[tuple[int, Any, int]]:
        budget_deadline = None
        if deadline is not None and not deterministic:
            # one target may take half of the time left (at least half a second), so
            # that a hard target leaves time for easier ones
            left = deadline - time.monotonic()
            budget_deadline = time.monotonic() + max(0.5 * left, min(left, 0.5))
        if pool is None:
            return [feasible(space, t, deadline=budget_deadline, node_limit=node_limit)
                    for t in targets]
        futs = [pool.submit(_worker, t, budget_deadline, node_limit) for t in targets]
        return [f.result() for f in futs]

    try:
        if not math.isfinite(upper):
            # no heuristic mapping avoids missing links: look for any finite mapping first
            status, vdev, nodes = run_targets([_FINITE_TARGET])[0]
            n_nodes += nodes
            n_targets += 1
            if status == STATUS_INFEASIBLE:
                return MappingResult(device_of=None, objective=math.inf, bound=math.inf,
                                     status=Status.INFEASIBLE, gap=math.inf,
                                     instantiation=kind, rings=None, stage_times=None,
                                     baselines=base_obj, initial_bound=initial_bound,
                                     n_nodes=n_nodes, n_targets=n_targets,
                                     wall_time_s=time.monotonic() - clock0)
            if status == STATUS_BUDGET:
                cut = True
                best = None
            else:
                best = vdev.reshape(stages.replicas, stages.n_stages)
                upper = max_stage_time(stages, topo, best, kind)
        while not cut and math.isfinite(upper) and upper - lower > eps * upper:
            if deadline is not None and time.monotonic() >= deadline:
                cut = True
                break
            width = upper - lower
            targets = [lower + width * f for f in target_fractions(workers, level)]
            results = run_targets(targets)
            n_targets += len(targets)
            progressed = False
            for t, (status, vdev, nodes) in zip(targets, results, strict=True):
                n_nodes += nodes
                if status == STATUS_FOUND:
                    m = vdev.reshape(stages.replicas, stages.n_stages)
                    val = max_stage_time(stages, topo, m, kind)
                    if val < upper:
                        best, upper = m, val
                    progressed = True
                elif status == STATUS_INFEASIBLE:
                    lower = max(lower, t)
                    progressed = True
            # after a round without any answer, aim nearer the ends of the interval, where
            # proofs (near lower) and mappings (near upper) come faster
            level = 0 if progressed else level + 1
            if level > _MAX_LEVEL or (node_limit is not None and deterministic
                                      and level > 2):
                cut = True
    except BaseException:
        if pool is not None:  # Ctrl-C or a backstop: stop the workers, not wait for their targets
            kill_workers(pool)
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    lower = min(lower, upper)
    if best is None:
        return MappingResult(device_of=None, objective=math.inf, bound=lower,
                             status=Status.UNKNOWN, gap=math.inf, instantiation=kind,
                             rings=None, stage_times=None, baselines=base_obj,
                             initial_bound=initial_bound, n_nodes=n_nodes,
                             n_targets=n_targets, wall_time_s=time.monotonic() - clock0)
    within = upper - lower <= eps * upper
    return MappingResult(
        device_of=best, objective=upper, bound=lower,
        status=Status.OPTIMAL if within else Status.FEASIBLE, gap=_gap(upper, lower),
        instantiation=kind, rings=np.ascontiguousarray(best.T),
        stage_times=mapping_stage_times(stages, topo, best, kind), baselines=base_obj,
        initial_bound=initial_bound, n_nodes=n_nodes, n_targets=n_targets,
        wall_time_s=time.monotonic() - clock0,
    )


def ring_orders(device_of: npt.ArrayLike) -> IntArray:
    """``(S, R)``: the devices of each stage's ring in ring order (replica index order).

    Examples
    --------
    >>> ring_orders([[0, 2], [1, 3]]).tolist()
    [[0, 1], [2, 3]]
    """
    return np.ascontiguousarray(np.asarray(device_of, np.int64).T)
