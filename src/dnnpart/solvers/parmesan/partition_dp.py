"""Phase 1's DP over fronted subgraphs (Eqs. 2-3).

``T[F, s, d]`` is the best max stage time of splitting the fronted subgraph (ideal) ``F`` into
``s`` non-empty stages on ``d`` devices in all, the last stage ``F - F'`` on ``d - d'``
replicas. Fronted subgraphs are the ideals of the op DAG (paper 1's lattice), enumerated level
by level by :func:`dnnpart.graph.ideals.dag_ideals` after the guard below; the levels list
subsets before supersets, so one pass fills the table.

Choices where the paper is silent or loose (also in ``docs/methods/parmesan.md``):

* ``T[empty, 0, 0] = 0`` and ``T[empty, s, d] = inf`` otherwise (the paper sets all of them to
  0, which would allow empty stages and idle devices): every stage holds at least one op and
  all ``D`` devices are used.
* ``replicas=None`` lets every stage take any number of replicas (the paper's ``d'`` range);
  ``replicas=R`` fixes ``d - d' = R`` (what the paper uses "empirically", Sec. 4.1, and what
  phase 2 needs: ``R`` identical pipeline copies).
* The memory test is per replica at the stage's position, with the memory model's replica
  count for every stage (see :mod:`.opdag`; free replica splits are then charged as if each
  stage had that many).
* **Guard before allocating** (the paper's DP has none): the lattice is counted by the
  streaming counter of :mod:`dnnpart.graph.ideals` against a cap derived from ``max_ideals``,
  ``max_memory_bytes`` (the membership matrix and the ``T`` table, estimated per ideal) and
  ``max_pair_work`` (every ideal is compared with every earlier one: ``N^2 / 2`` pairs of
  ``O(n)`` work); beyond the cap :class:`~dnnpart.errors.ProblemTooLargeError` is raised before
  any per-ideal array exists. Phase 1 then clusters harder (:mod:`.phase1`).
* **Pair terms by linear algebra.** Eq. 3 of ``U = F - F'`` is ``c(F) - c(F') + cut(F) +
  cut(F') - 2 e(F', V - F)`` (``cut``: communication time of the edges leaving a set in either
  direction, ``e``: of the edges between two sets), the stashed input bytes likewise; per ideal
  ``F`` this is a product of the ``N x n`` membership matrix with four ``n``-vectors, so a pair
  costs ``O(n)`` instead of ``O(n + edges)``. On a chain (:func:`partition_chain_dp`, prefixes
  of one linear order) every term is a prefix or suffix sum: ``O(N + edges)`` per ideal.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dnnpart import interrupt
from dnnpart.errors import ProblemTooLargeError, UsageError
from dnnpart.graph.ideals import count_dag_ideals, dag_ideals
from dnnpart.solvers.dp.ideals import DEFAULT_MAX_IDEALS
from dnnpart.solvers.parmesan.opdag import BoolArray, FloatArray, IntArray, MemoryModel, OpDag

#: Memory the DP's per-ideal arrays may take (estimated before allocating).
DEFAULT_MAX_MEMORY_BYTES = 1_000_000_000
#: Pair work (ideal pairs x (4 nodes + stages)) the DP may do: about 5 s on one loaded core
#: (measured: 4,160 ideals of a 128-node hyper-graph, S = 16, 6 s at load 5 on 2 cores).
DEFAULT_MAX_PAIR_WORK = 4e9


@dataclass(frozen=True, slots=True, kw_only=True)
class StagePartition:
    """Stages of an op DAG: ``stage_of`` per node (0..S-1, a chain of ideals), replicas per
    stage and the max stage time (``inf`` with ``stage_of = None`` when infeasible)."""

    stage_of: IntArray | None
    replicas: IntArray | None
    objective: float
    n_ideals: int = 0


def stage_times(dag: OpDag, stage_of: IntArray, replicas: IntArray) -> np.ndarray:
    """Eq. 3 per stage.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(3, cost=0.5))
    >>> stage_times(dag, np.array([0, 0, 1]), np.array([1, 2])).tolist()
    [2.5, 0.75]
    """
    s_n = int(replicas.shape[0])
    u = stage_of[None, :] == np.arange(s_n)[:, None]
    return dag.work(u) / replicas


def stage_memory(dag: OpDag, stage_of: IntArray, n_stages: int, mem: MemoryModel) -> np.ndarray:
    """Per-replica memory of every stage."""
    u = stage_of[None, :] == np.arange(n_stages)[:, None]
    return np.array([float(dag.memory(u[j], mem, j, n_stages)[0]) for j in range(n_stages)])


def ideal_cap(
    n_nodes: int, n_stages: int, n_devices: int, *, max_ideals: int = DEFAULT_MAX_IDEALS,
    max_memory_bytes: float = DEFAULT_MAX_MEMORY_BYTES,
    max_pair_work: float = DEFAULT_MAX_PAIR_WORK,
) -> int:
    """Most ideals :func:`partition_dp` accepts for a DAG of ``n_nodes`` nodes.

    Per ideal: a membership row (``9 n`` bytes: bool and float copies), ten per-ideal sums and
    the ``T`` table with its two argument tables (``(S + 1)(D + 1)`` cells of 8 + 4 + 2 bytes);
    per pair of ideals ``4 n + S`` multiply-adds.

    Examples
    --------
    >>> ideal_cap(100, 4, 16), ideal_cap(100, 4, 16, max_ideals=500)
    (4406, 500)
    """
    per_ideal = 9 * n_nodes + 80 + (n_stages + 1) * (n_devices + 1) * 14
    by_memory = int(max_memory_bytes // per_ideal)
    by_work = math.isqrt(int(2 * max_pair_work // (4 * n_nodes + n_stages + 8)))
    return max(2, min(int(max_ideals), by_memory, by_work))


def _too_large(dag: OpDag, cap: int, max_ideals: int) -> ProblemTooLargeError:
    return ProblemTooLargeError(
        f"phase 1: the op DAG ({dag.n:,} nodes) has more than {cap:,} fronted subgraphs, the "
        f"DP's cap (max_ideals={max_ideals:,}, with the memory and work estimates); cluster "
        "harder (smaller k) or raise max_ideals")


def _check_args(dag: OpDag, s_n: int, d_n: int, replicas: int | None) -> None:
    if s_n < 1 or d_n < s_n:
        raise UsageError(f"need 1 <= stages <= devices, got S={s_n}, D={d_n}")
    if replicas is not None and replicas * s_n != d_n:
        raise UsageError(f"replicas * stages must equal devices: {replicas} * {s_n} != {d_n}")


#: Per ideal ``i``: candidate earlier ideals ``js`` (subsets) and, for ``U = F_i - F_j``, Eq. 3
#: work, parameter bytes, output bytes, stashed input bytes.
PairTerms = Callable[[int], tuple[IntArray, FloatArray, FloatArray, FloatArray, FloatArray]]


def partition_dp(
    dag: OpDag, n_stages: int, n_devices: int, *, replicas: int | None = None,
    memory: MemoryModel | None = None, max_ideals: int = DEFAULT_MAX_IDEALS,
    max_memory_bytes: float = DEFAULT_MAX_MEMORY_BYTES,
    max_pair_work: float = DEFAULT_MAX_PAIR_WORK,
) -> StagePartition:
    """Optimal chain of ``n_stages`` fronted subgraphs on ``n_devices`` devices (Eq. 2).

    Raises
    ------
    ProblemTooLargeError
        When the lattice has more ideals than :func:`ideal_cap` allows (counted first).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(4))
    >>> p = partition_dp(dag, 2, 2)
    >>> p.stage_of.tolist(), p.objective
    ([0, 0, 1, 1], 2.0)
    """
    s_n, d_n = int(n_stages), int(n_devices)
    _check_args(dag, s_n, d_n, replicas)
    cap = ideal_cap(dag.n, s_n, d_n, max_ideals=max_ideals, max_memory_bytes=max_memory_bytes,
                    max_pair_work=max_pair_work)
    if count_dag_ideals(dag.n, dag.src.tolist(), dag.dst.tolist(), limit=cap) > cap:
        raise _too_large(dag, cap, max_ideals)
    bits = dag_ideals(dag.n, dag.src.tolist(), dag.dst.tolist(), limit=cap)
    assert bits is not None  # counted above
    mask = _bit_rows(bits, dag.n)
    terms = _lattice_terms(dag, mask)
    return _run_dp(dag, len(bits), terms, lambda i, j: mask[i] & ~mask[j], s_n, d_n, replicas,
                   memory or MemoryModel())


def partition_chain_dp(
    dag: OpDag, order: IntArray, n_stages: int, n_devices: int, *, replicas: int | None = None,
    memory: MemoryModel | None = None,
) -> StagePartition:
    """:func:`partition_dp` over the prefixes of the linear order ``order`` (a topological order
    of ``dag``) only: PipeDream's path DP, ``n + 1`` ideals, ``O(n (n + edges))`` time.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(4))
    >>> partition_chain_dp(dag, np.arange(4), 2, 2).stage_of.tolist()
    [0, 0, 1, 1]
    """
    s_n, d_n = int(n_stages), int(n_devices)
    _check_args(dag, s_n, d_n, replicas)
    order = np.asarray(order, dtype=np.int64)
    pos = np.empty(dag.n, np.int64)
    pos[order] = np.arange(dag.n)
    if np.any(pos[dag.src] >= pos[dag.dst]):
        raise ValueError("order is not a topological order of the DAG")
    terms = _chain_terms(dag, pos)

    def members(i: int, j: int) -> BoolArray:
        return np.asarray((pos >= j) & (pos < i))

    return _run_dp(dag, dag.n + 1, terms, members, s_n, d_n, replicas, memory or MemoryModel())


def _bit_rows(bits: list[int], n: int) -> BoolArray:
    """Membership matrix of bitset ideals (row ``i``, column ``v``)."""
    width = (n + 7) // 8
    raw = np.frombuffer(b"".join(b.to_bytes(width, "little") for b in bits), np.uint8)
    rows = np.unpackbits(raw.reshape(len(bits), width), axis=1, bitorder="little")
    return np.asarray(rows[:, :n].astype(np.bool_))


def _lattice_terms(dag: OpDag, mask: BoolArray) -> PairTerms:
    n_id, n = mask.shape
    m = mask.astype(np.float64)
    finite = np.isfinite(dag.compute)
    comp = m @ np.where(finite, dag.compute, 0.0)
    n_inf = m @ (~finite).astype(np.float64)
    par, act = m @ dag.params, m @ dag.acts
    a, b, t, byt = dag.c_src, dag.c_dst, dag.c_time, dag.c_stash  # byt: stashed inputs
    cut = np.empty(n_id)
    inner = np.empty(n_id)  # bytes of edges with both ends in the ideal
    for lo in range(0, n_id, 2048):  # chunks bound the (rows x edges) temporaries
        ma, mb = mask[lo:lo + 2048, a], mask[lo:lo + 2048, b]
        cut[lo:lo + 2048] = (ma ^ mb) @ t
        inner[lo:lo + 2048] = (ma & mb) @ byt

    block: dict[str, object] = {"lo": -1}
    size = 64  # ideals whose products with the membership matrix are computed together

    def vectors(i: int) -> tuple[FloatArray, float]:
        x = m[i]
        out_x = 1.0 - x
        # e(F', V - F) = y . w with w[u] = time of u's edges to nodes outside F
        w = np.bincount(a, t * out_x[b], n) + np.bincount(b, t * out_x[a], n)
        # bytes into U = F - F' from outside U (edges a -> b): those from outside F,
        # minus the ones landing in F', plus those from F' into F (y . kin), minus inside F'
        from_out = byt * x[b] * out_x[a]
        h = np.bincount(b, from_out, n)
        kin = np.bincount(a, byt * x[b], n)
        return np.stack((out_x, w, h, kin)), float(from_out.sum())

    def terms(i: int) -> tuple[IntArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        lo = i - i % size
        if block["lo"] != lo:  # one matrix product for the block (BLAS-3, not 64 BLAS-2)
            hi = min(lo + size, n_id)
            vs = [vectors(k) for k in range(lo, hi)]
            block.update(lo=lo, prod=m[:hi] @ np.concatenate([v for v, _ in vs]).T,
                         sums=[f for _, f in vs])
        prod = block["prod"]
        assert isinstance(prod, np.ndarray)
        c = 4 * (i - lo)
        vals = prod[:i, c:c + 4]
        from_out_sum = block["sums"][i - lo]  # type: ignore[index]
        js = np.nonzero(vals[:, 0] == 0.0)[0]
        v = vals[js]
        work = comp[i] - comp[js] + cut[i] + cut[js] - 2.0 * v[:, 1]
        work = np.where(n_inf[i] - n_inf[js] > 0, np.inf, work)
        inputs = from_out_sum - v[:, 2] + v[:, 3] - inner[js]
        return js, work, par[i] - par[js], act[i] - act[js], inputs

    return terms


def _chain_terms(dag: OpDag, pos: IntArray) -> PairTerms:
    n = dag.n
    finite = np.isfinite(dag.compute)

    def prefix(values: FloatArray) -> FloatArray:
        out = np.zeros(n + 1)
        np.cumsum(values[np.argsort(pos)], out=out[1:])
        return out

    comp = prefix(np.where(finite, dag.compute, 0.0))
    n_inf = prefix((~finite).astype(np.float64))
    par, act = prefix(dag.params), prefix(dag.acts)
    pa, pb, t, byt = pos[dag.c_src], pos[dag.c_dst], dag.c_time, dag.c_stash
    lo_e, hi_e = np.minimum(pa, pb), np.maximum(pa, pb)

    def suffix_by(index: IntArray, weights: FloatArray) -> FloatArray:
        """``out[j]`` = sum of ``weights`` whose ``index >= j`` (``j = 0 .. n``)."""
        c = np.bincount(index, weights, n + 1)
        return np.asarray(np.cumsum(c[::-1])[::-1])

    def terms(i: int) -> tuple[IntArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        js = np.arange(i)
        # U = positions j .. i-1; an edge crosses U when exactly one end is in it
        inside_i = hi_e < i  # both ends before i
        spans = ~inside_i & (lo_e < i)  # one end before i, one at or after
        # edges with both ends before i cross U when lo < j <= hi; spanning ones when lo >= j
        cross = (suffix_by(hi_e[inside_i], t[inside_i])[:i]  # lo < j <= hi
                 - suffix_by(lo_e[inside_i], t[inside_i])[:i]
                 + suffix_by(lo_e[spans], t[spans])[:i])  # j <= lo
        # bytes into U: edges a -> b with j <= b < i and a outside U: a >= i, or a < j (then
        # a < b; an edge with b < a < i never enters U: b in U puts a in U too)
        into = pb < i
        from_after = into & (pa >= i)
        before = into & (pa < pb)
        inputs = (suffix_by(pb[from_after], byt[from_after])[:i]
                  + suffix_by(pb[before], byt[before])[:i]  # a < j <= b
                  - suffix_by(pa[before], byt[before])[:i])
        work = comp[i] - comp[js] + cross
        work = np.where(n_inf[i] - n_inf[js] > 0, np.inf, work)
        return js, work, par[i] - par[js], act[i] - act[js], inputs

    return terms


def _run_dp(dag: OpDag, n_id: int, terms: PairTerms,
            members: Callable[[int, int], BoolArray], s_n: int, d_n: int,
            replicas: int | None, mem: MemoryModel) -> StagePartition:
    if replicas is not None:  # the in-flight micro-batches per replica depend on R
        mem = dataclasses.replace(mem, replicas=int(replicas))
    table = np.full((n_id, s_n + 1, d_n + 1), np.inf)
    table[0, 0, 0] = 0.0
    arg_j = np.full((n_id, s_n + 1, d_n + 1), -1, np.int32)
    arg_r = np.zeros((n_id, s_n + 1, d_n + 1), np.int16)
    r_opts = [replicas] if replicas is not None else list(range(1, d_n + 1))
    for i in range(1, n_id):
        if interrupt.stop_requested():  # the loop is quadratic in ideals: stop at once
            raise interrupt.Stopped
        js, work, par, act, inputs = terms(i)
        if js.size == 0:
            continue
        for s in range(1, s_n + 1):
            fits = mem.stage_memory(par, act, inputs, s - 1, s_n) <= mem.device_memory
            # with R replicas everywhere the first s stages use exactly s R devices
            ds = [s * replicas] if replicas is not None else range(s, d_n + 1)
            for d in ds:
                best, bj, br = table[i, s, d], -1, 0
                for r in r_opts:
                    dp = d - r
                    if dp < s - 1 or dp < 0:
                        continue
                    cand = np.maximum(table[js, s - 1, dp], np.where(fits, work / r, np.inf))
                    k = int(np.argmin(cand))
                    if cand[k] < best:
                        best, bj, br = float(cand[k]), int(js[k]), r
                table[i, s, d] = best
                arg_j[i, s, d] = bj
                arg_r[i, s, d] = br
    full = n_id - 1
    obj = float(table[full, s_n, d_n])
    if not math.isfinite(obj):
        return StagePartition(stage_of=None, replicas=None, objective=math.inf, n_ideals=n_id)
    stage_of = np.full(dag.n, -1, np.int64)
    reps = np.zeros(s_n, np.int64)
    i, d = full, d_n
    for s in range(s_n, 0, -1):
        j, r = int(arg_j[i, s, d]), int(arg_r[i, s, d])
        stage_of[members(i, j)] = s - 1
        reps[s - 1] = r
        i, d = j, d - r
    return StagePartition(stage_of=stage_of, replicas=reps, objective=obj, n_ideals=n_id)
