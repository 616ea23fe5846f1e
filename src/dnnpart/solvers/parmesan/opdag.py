"""Phase-1 inputs: the atomic op DAG, hyper-op quotients, Eq. 3 stage times, memory model.

**Atomic ops.** Parmesan's DAG has one node per operator whose ``c_u`` covers forward *and*
backward execution (Eq. 1). A dnnpart training graph holds backward ops as nodes of their own,
so the atomic ops are the nodes of paper 1's contracted forward DAG
(:func:`dnnpart.graph.stage_graph.build_stage_graph`: a forward op together with the
backward ops of its colocation class); on a forward-only graph they are the ops themselves.
Its edges carry the structure (fronted subgraphs = ideals of this DAG); every original edge
between two different atomic ops is a *communication edge* with its time ``edge_cost`` (Eq. 3's
``c_m``) and its bytes (``edge_bytes``, the producer's ``output_bytes`` where unknown).

**Stage time (Eq. 3)** of a set ``U`` on ``r`` replicas: ``(sum_{v in U} c_u(v) + sum of
c_m over communication edges with exactly one end in U) / r``; ``c_u`` is the compute time on
the ``accelerator`` device kind.

**Memory per stage replica** (the paper's Appendix F is not in the seed text) is the pipeline
simulator's (:mod:`dnnpart.simulate.pipeline`), so a partition phase 1 accepts is one the
evaluator finds within memory: weights ``P(U)`` (:func:`~dnnpart.pricing.chain.node_weight_bytes`)
plus, when training, their gradients and ``optimizer_states`` copies (Adam: 2); plus the stash
of the micro-batches in flight: ``k * A(U)`` without recomputation, ``k * I(U)`` with it (and
one micro-batch's ``A(U)`` rebuilt during a backward when training). ``A(U)`` is the stashed
activation bytes of ``U`` (:func:`~dnnpart.pricing.chain.node_activation_bytes`: the forward
values the backward reads), ``I(U)`` the bytes its forward part receives (``c_stash``: forward
edges entering ``U``, one per producer and receiving op -- at least the simulator's one per
producer and stage), and ``k`` the micro-batches one replica holds at once: 1 for inference
(a forward frees its micro-batch), under training ``ceil(m / R)`` with GPipe and
``min(ceil(m / R), S - j)`` with 1F1B at stage position ``j`` (replica 0 of a stage runs
micro-batches ``0, R, 2R, ...``). ``tests/solvers/parmesan/test_solver.py`` checks the
simulator's peaks against it. The test is per replica (``memory <= device memory``), not the
paper's ``memory <= replicas * device memory``: replicas copy the parameters, so replication
does not divide them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import Graph
from dnnpart.graph.stage_graph import build_stage_graph

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryModel:
    """Per-replica stage memory (see the module docstring) of stages with ``replicas`` copies.

    Examples
    --------
    >>> MemoryModel(micro_batches=4).in_flight(0, 3), MemoryModel().in_flight(2, 3)
    (3, 1)
    >>> MemoryModel(micro_batches=4, replicas=2).in_flight(0, 3)  # micro-batches 0 and 2
    2
    >>> MemoryModel(training=False, micro_batches=4).in_flight(0, 3)
    1
    """

    device_memory: float = np.inf
    optimizer_states: float = 2.0
    micro_batches: int = 4
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    recompute: bool = False
    training: bool = True
    replicas: int = 1

    def in_flight(self, position: int, n_stages: int) -> int:
        if not self.training:
            return 1
        per_replica = -(-self.micro_batches // max(1, self.replicas))
        if self.schedule == "gpipe":
            return per_replica
        return max(1, min(per_replica, n_stages - position))

    def stage_memory(self, params: FloatArray | float, acts: FloatArray | float,
                     inputs: FloatArray | float, position: int, n_stages: int) -> FloatArray:
        k = self.in_flight(position, n_stages)
        copies = 2.0 + self.optimizer_states if self.training else 1.0
        persistent = copies * np.asarray(params, dtype=np.float64)
        if self.recompute:
            rebuilt = np.asarray(acts) if self.training else 0.0
            return np.asarray(persistent + k * np.asarray(inputs) + rebuilt)
        return np.asarray(persistent + k * np.asarray(acts))


@dataclass(frozen=True, slots=True, kw_only=True)
class OpDag:
    """A DAG of (hyper-)ops with Parmesan's per-node attributes.

    Attributes
    ----------
    n : number of nodes; ids are a topological order of ``src -> dst``.
    src, dst : structural edges (deduplicated).
    compute, params, acts : per node ``c_u``, parameter bytes, forward output bytes.
    c_src, c_dst, c_time, c_bytes : communication edges (one per original edge between two
        different nodes, either direction relative to the structure).
    c_stash : per communication edge, the bytes its receiving stage stashes as forward input
        (forward edges only, one edge per producer and receiving node; memory with
        recomputation).
    """

    n: int
    src: IntArray
    dst: IntArray
    compute: FloatArray
    params: FloatArray
    acts: FloatArray
    c_src: IntArray
    c_dst: IntArray
    c_time: FloatArray
    c_bytes: FloatArray
    c_stash: FloatArray

    # -- Eq. 3 on membership masks (rows of ``u``) ------------------------------------------
    def work(self, u: BoolArray) -> FloatArray:
        """``sum c_u + sum c_m over crossing communication edges`` per row (Eq. 3 times r)."""
        u2 = np.atleast_2d(u)
        cross = u2[:, self.c_src] ^ u2[:, self.c_dst]
        finite = np.isfinite(self.compute)
        # an op the accelerator cannot run (infinite time) makes every set holding it
        # infinite; a plain product would give 0 * inf = nan for the sets without it
        value = u2 @ np.where(finite, self.compute, 0.0) + cross @ self.c_time
        if not finite.all():
            value = np.where(u2[:, ~finite].any(axis=1), np.inf, value)
        return np.asarray(value, dtype=np.float64)

    def memory(self, u: BoolArray, mem: MemoryModel, position: int, n_stages: int) -> FloatArray:
        u2 = np.atleast_2d(u)
        inputs = (u2[:, self.c_dst] & ~u2[:, self.c_src]) @ self.c_stash
        return mem.stage_memory(u2 @ self.params, u2 @ self.acts, inputs, position, n_stages)


def _sum_by(label: IntArray, weights: FloatArray, k: int) -> FloatArray:
    return np.asarray(np.bincount(label, weights=weights, minlength=k), dtype=np.float64)


def atomic_dag(graph: Graph, kind: str = "accelerator") -> tuple[OpDag, IntArray]:
    """The atomic op DAG of ``graph`` and the atomic op of every original node.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> dag, atom = atomic_dag(chain_graph(3, cost=0.5))
    >>> dag.n, dag.compute.tolist(), dag.c_time.tolist()
    (3, [1.0, 1.0, 1.0], [0.5, 0.5])
    """
    sg = build_stage_graph(graph, merge_trivial=False)
    atom = sg.stage_of.astype(np.int64)
    n = sg.n_stage_nodes
    col = graph.device_kinds.index(kind) if kind in graph.device_kinds else -1
    compute = _sum_by(atom, graph.compute_time[:, col], n)
    from dnnpart.pricing.chain import node_activation_bytes, node_weight_bytes
    from dnnpart.simulate.ops import transfer_bytes

    params = _sum_by(atom, node_weight_bytes(graph), n)
    acts = _sum_by(atom, node_activation_bytes(graph), n)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(sg.succ_ptr))
    es, ed = graph.edge_sources(), graph.succ_idx.astype(np.int64)
    cross = atom[es] != atom[ed]
    nbytes = np.where(np.isnan(graph.edge_bytes), graph.node_output_bytes()[es],
                      graph.edge_bytes)
    dag = OpDag(n=n, src=src, dst=sg.succ_idx.astype(np.int64), compute=compute,
                params=params, acts=acts, c_src=atom[es][cross], c_dst=atom[ed][cross],
                c_time=graph.edge_cost[cross].astype(np.float64),
                c_bytes=nbytes[cross].astype(np.float64),
                c_stash=_stash_bytes(graph, atom, transfer_bytes(graph))[cross])
    return dag, atom


def _stash_bytes(graph: Graph, atom: IntArray, moved: FloatArray) -> FloatArray:
    """Per edge, the forward input bytes the receiving stage stashes: ``moved`` on forward
    edges, once per (producer, receiving atomic op) -- the largest such edge keeps it."""
    es, ed = graph.edge_sources(), graph.succ_idx.astype(np.int64)
    fwd = ~graph.is_backward[es] & ~graph.is_backward[ed]
    out = np.where(fwd, moved, 0.0).astype(np.float64)
    seen: dict[tuple[int, int], int] = {}
    for e in np.flatnonzero(fwd & (atom[es] != atom[ed])).tolist():
        key = (int(es[e]), int(atom[ed[e]]))
        first = seen.setdefault(key, e)
        if first != e:
            keep, drop = (first, e) if out[first] >= out[e] else (e, first)
            seen[key] = keep
            out[drop] = 0.0
    return out


def quotient(dag: OpDag, label: IntArray) -> OpDag:
    """Contract the blocks of ``label`` (an acyclic partition numbered topologically)."""
    k = int(label.max()) + 1 if label.size else 0
    s, d = label[dag.src], label[dag.dst]
    keep = s != d
    pairs = np.unique(np.stack([s[keep], d[keep]], axis=1), axis=0) if keep.any() \
        else np.zeros((0, 2), np.int64)
    cs, cd = label[dag.c_src], label[dag.c_dst]
    ck = cs != cd
    return OpDag(n=k, src=pairs[:, 0].astype(np.int64), dst=pairs[:, 1].astype(np.int64),
                 compute=_sum_by(label, dag.compute, k),
                 params=_sum_by(label, dag.params, k),
                 acts=_sum_by(label, dag.acts, k),
                 c_src=cs[ck], c_dst=cd[ck], c_time=dag.c_time[ck], c_bytes=dag.c_bytes[ck],
                 c_stash=dag.c_stash[ck])
