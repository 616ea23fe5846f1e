"""Compact ideal lattices for the throughput DP.

An ideal is stored as its parent ideal plus one node (``parent``/``added``), so a lattice of
``N`` ideals costs O(N) memory whatever the graph's size; the DP needs only the cover
relations ``J = I - m`` (``down_*``, CSR by ``I``), which it walks downwards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart._jit import not_compiled
from dnnpart.errors import ProblemTooLargeError, UsageError
from dnnpart.graph.stage_graph import StageGraph
from dnnpart.solvers.dp.lattice_kernels import dfs_topological_order, enumerate_lattice

IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]

#: Default cap on the number of ideals the exact DP enumerates.
DEFAULT_MAX_IDEALS = 2_000_000
_ZOBRIST_SEED = 0x5EED_1DEA


@dataclass(frozen=True, slots=True, eq=False)
class IdealLattice:
    """Ideals of a DAG numbered so that every subset comes before its supersets.

    Attributes
    ----------
    n_ideals : number of ideals, the empty one (index 0) and the full set (last) included.
    parent, added : ideal ``i > 0`` is ideal ``parent[i]`` plus node ``added[i]``.
    down_ptr, down_node, down_lower : for ideal ``i``, entries
        ``down_ptr[i] <= e < down_ptr[i+1]`` say that removing ``down_node[e]`` (a maximal
        node of ``i``) leaves ideal ``down_lower[e]``.
    """

    n_ideals: int
    parent: Int32Array
    added: Int32Array
    down_ptr: IntArray
    down_node: Int32Array
    down_lower: Int32Array

    @property
    def n_cover_pairs(self) -> int:
        return int(self.down_node.shape[0])

    def nodes(self, i: int, n_nodes: int) -> npt.NDArray[np.bool_]:
        """Membership mask of ideal ``i`` over ``n_nodes`` nodes."""
        mask = np.zeros(n_nodes, dtype=np.bool_)
        while i > 0:
            mask[self.added[i]] = True
            i = int(self.parent[i])
        return mask


def _down_csr(
    n_ideals: int, upper: Int32Array, node: Int32Array, lower: Int32Array
) -> tuple[IntArray, Int32Array, Int32Array]:
    order = np.argsort(upper, kind="stable")
    ptr = np.zeros(n_ideals + 1, np.int64)
    np.cumsum(np.bincount(upper, minlength=n_ideals), out=ptr[1:])
    return ptr, node[order].astype(np.int32), lower[order].astype(np.int32)


#: Default cap on the memory the lattice and the DP tables may take (``max_memory_bytes``).
DEFAULT_MAX_MEMORY_BYTES = 1_000_000_000


def lattice_budget(n_nodes: int, max_memory_bytes: int, bytes_per_ideal: int = 0) -> tuple[int, int]:
    """Caps ``(ideals, cover edges)`` that keep the enumeration within ``max_memory_bytes``.

    An ideal costs its parent/added/CSR entries (20 bytes) plus ``bytes_per_ideal`` (the DP
    tables of the caller); a cover edge its three ``int32`` and their sorted copies (~40
    bytes) or, while its level is open, a frontier pair with the ideal's bit set
    (``8 * ceil(n / 64) + 32`` bytes): the larger is charged.

    Examples
    --------
    >>> lattice_budget(64, 10**6)
    (50000, 20833)
    """
    per_edge = max(40, 8 * ((n_nodes + 63) // 64) + 40)
    return max(1, max_memory_bytes // (20 + bytes_per_ideal)), max(1, max_memory_bytes // per_edge)


def enumerate_stage_ideals(
    stage: StageGraph, *, max_ideals: int = DEFAULT_MAX_IDEALS,
    max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES, bytes_per_ideal: int = 0,
) -> IdealLattice:
    """All ideals of the stage DAG with their cover relations.

    Raises
    ------
    ProblemTooLargeError
        When there are more than ``max_ideals`` ideals, or when the lattice (with
        ``bytes_per_ideal`` more per ideal for the caller's tables) would need more than
        ``max_memory_bytes`` (both found before memory grows past the limit's worth).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> enumerate_stage_ideals(build_stage_graph(chain_graph(3))).n_ideals
    4
    """
    if max_ideals < 1:
        raise UsageError(f"max_ideals must be >= 1, got {max_ideals!r}")
    n = stage.n_stage_nodes
    by_memory, max_edges = lattice_budget(n, int(max_memory_bytes), bytes_per_ideal)
    cap = int(min(max_ideals, by_memory))
    small = None
    # a DAG of n nodes has at least n + 1 ideals: past the plain walk's cap it cannot finish,
    # and each of its steps copies a frontier that can hold every node
    if not_compiled(enumerate_lattice) and n < min(cap, SMALL_IDEALS):  # try plain Python
        small = enumerate_small(n, stage.pred_ptr, stage.pred_idx, stage.succ_ptr,
                                stage.succ_idx, min(cap, SMALL_IDEALS), int(max_edges))
    if small is not None:
        n_ideals, parent, added, e_up, e_node, e_low = small
    else:
        # numpy.random (~10 ms to import) only here: the plain walk needs no hashes
        zobrist = np.random.default_rng(_ZOBRIST_SEED).integers(
            0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True
        )
        n_ideals, parent, added, e_up, e_node, e_low = enumerate_lattice(
            n, stage.pred_ptr, stage.pred_idx, stage.succ_ptr, stage.succ_idx, zobrist,
            cap, int(max_edges),
        )
    if n_ideals == -2 or (n_ideals == -1 and by_memory < max_ideals):
        raise ProblemTooLargeError(
            f"the contracted forward graph ({n} nodes) has too many ideals for the exact DP "
            f"within max_memory_bytes={max_memory_bytes:,} (estimated before allocating). Use "
            "'dpl' (DP on a linearized graph, polynomial) or the integer program, or raise "
            "max_memory_bytes"
        )
    if n_ideals < 0:
        raise ProblemTooLargeError(
            f"the contracted forward graph ({n} nodes) has more than {max_ideals:,} ideals; "
            "the exact DP would need too much time and memory. Use 'dpl' (DP on a "
            "linearized graph, polynomial) or the integer program, or raise max_ideals"
        )
    ptr, node, lower = _down_csr(int(n_ideals), e_up, e_node, e_low)
    return IdealLattice(n_ideals=int(n_ideals), parent=parent.copy(), added=added.copy(),
                        down_ptr=ptr, down_node=node, down_lower=lower)


#: Lattices up to this many ideals are enumerated in plain Python while the numba kernel is not
#: loaded: loading numba costs ~0.6 s, more than the plain walk over a few thousand ideals.
SMALL_IDEALS = 4000


def enumerate_small(
    n: int, pred_ptr: IntArray, pred_idx: IntArray, succ_ptr: IntArray, succ_idx: IntArray,
    max_ideals: int, max_edges: int,
) -> tuple[int, Int32Array, Int32Array, Int32Array, Int32Array, Int32Array] | None:
    """:func:`~dnnpart.solvers.dp.lattice_kernels.enumerate_lattice` over Python-int bitmasks.

    Same ideals, numbering and cover edges in the same order (first discovery, layer by
    layer, frontiers in the kernel's order); ``None`` when more than ``max_ideals`` ideals or
    ``max_edges`` edges would be needed (the caller then runs the kernel, which reports).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> s = build_stage_graph(chain_graph(3))
    >>> enumerate_small(3, s.pred_ptr, s.pred_idx, s.succ_ptr, s.succ_idx, 100, 100)[0]
    4
    """
    preds = [pred_idx[pred_ptr[v]:pred_ptr[v + 1]].tolist() for v in range(n)]
    succs = [succ_idx[succ_ptr[v]:succ_ptr[v + 1]].tolist() for v in range(n)]
    parent, added = [-1], [-1]
    e_up: list[int] = []
    e_node: list[int] = []
    e_low: list[int] = []
    cur: list[tuple[int, int, list[int]]] = [(0, 0, [v for v in range(n) if not preds[v]])]
    while cur:
        index: dict[int, int] = {}
        nxt: list[tuple[int, int, list[int]]] = []
        for mask, g, front in cur:
            for v in front:
                new = mask | (1 << v)
                c = index.get(new)
                if c is None:
                    if len(parent) >= max_ideals:
                        return None
                    c = len(nxt)
                    index[new] = c
                    ready = [x for x in succs[v] if all((new >> q) & 1 for q in preds[x])]
                    nxt.append((new, len(parent), [x for x in front if x != v] + ready))
                    parent.append(g)
                    added.append(v)
                if len(e_up) >= max_edges:
                    return None
                e_up.append(nxt[c][1])
                e_node.append(v)
                e_low.append(g)
        cur = nxt

    def arr(x: list[int]) -> Int32Array:
        return np.asarray(x, dtype=np.int32)

    return len(parent), arr(parent), arr(added), arr(e_up), arr(e_node), arr(e_low)


def linear_ideals(order: IntArray) -> IdealLattice:
    """The ``len(order) + 1`` prefixes of a linear order: the ideals after linearization.

    Examples
    --------
    >>> lat = linear_ideals(np.array([0, 2, 1]))
    >>> lat.n_ideals, lat.nodes(2, 3).tolist()
    (4, [True, False, True])
    """
    n = int(order.shape[0])
    idx = np.arange(n + 1, dtype=np.int32)
    parent = idx - 1
    added = np.concatenate(([-1], order)).astype(np.int32)
    ptr = np.concatenate(([0, 0], np.arange(1, n + 1))).astype(np.int64)
    return IdealLattice(n_ideals=n + 1, parent=parent, added=added, down_ptr=ptr,
                        down_node=order.astype(np.int32), down_lower=idx[:-1].copy())


def dfs_lattice(stage: StageGraph) -> IdealLattice:
    """DPL's lattice (paper 1, section 5.1.2): the prefixes of a depth-first topological
    order of the stage DAG (:func:`~dnnpart.solvers.dp.lattice_kernels.dfs_topological_order`).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> dfs_lattice(build_stage_graph(chain_graph(3))).n_ideals
    4
    """
    order = dfs_topological_order(stage.n_stage_nodes, stage.succ_ptr, stage.succ_idx)
    return linear_ideals(np.asarray(order, dtype=np.int64))
