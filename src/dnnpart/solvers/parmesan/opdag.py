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

**Memory per stage replica** (the paper's Appendix F is not in the seed text):
``(2 + optimizer_states) * P(U)`` (weights, gradients, optimizer state; Adam: 2 states) plus
in-flight activations: ``k * A(U)`` without recomputation, ``k * I(U) + A(U)`` with it, where
``A(U)`` is the output bytes of ``U``'s forward ops, ``I(U)`` the bytes entering ``U`` over
communication edges (the stashed stage input) and ``k`` the micro-batches in flight at stage
position ``j`` of ``S``: ``min(micro_batches, S - j)`` under 1F1B, ``micro_batches`` under
GPipe. The test is per replica (``memory <= device memory``), not the paper's ``memory <=
replicas * device memory``: replicas copy the parameters, so replication does not divide them.
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
    """Per-replica stage memory (see the module docstring).

    Examples
    --------
    >>> MemoryModel(micro_batches=4).in_flight(0, 3), MemoryModel().in_flight(2, 3)
    (3, 1)
    """

    device_memory: float = np.inf
    optimizer_states: float = 2.0
    micro_batches: int = 4
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    recompute: bool = False

    def in_flight(self, position: int, n_stages: int) -> int:
        if self.schedule == "gpipe":
            return self.micro_batches
        return max(1, min(self.micro_batches, n_stages - position))

    def stage_memory(self, params: FloatArray | float, acts: FloatArray | float,
                     inputs: FloatArray | float, position: int, n_stages: int) -> FloatArray:
        k = self.in_flight(position, n_stages)
        persistent = (2.0 + self.optimizer_states) * np.asarray(params, dtype=np.float64)
        if self.recompute:
            return np.asarray(persistent + k * np.asarray(inputs) + np.asarray(acts))
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
        inputs = (u2[:, self.c_dst] & ~u2[:, self.c_src]) @ self.c_bytes
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
    from dnnpart.simulate.stages import node_weight_bytes

    params = _sum_by(atom, node_weight_bytes(graph), n)
    fwd = ~graph.is_backward
    acts = _sum_by(atom[fwd], graph.node_output_bytes()[fwd], n)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(sg.succ_ptr))
    es, ed = graph.edge_sources(), graph.succ_idx.astype(np.int64)
    cross = atom[es] != atom[ed]
    nbytes = np.where(np.isnan(graph.edge_bytes), graph.node_output_bytes()[es],
                      graph.edge_bytes)
    dag = OpDag(n=n, src=src, dst=sg.succ_idx.astype(np.int64), compute=compute,
                params=params, acts=acts, c_src=atom[es][cross], c_dst=atom[ed][cross],
                c_time=graph.edge_cost[cross].astype(np.float64),
                c_bytes=nbytes[cross].astype(np.float64))
    return dag, atom


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
                 c_src=cs[ck], c_dst=cd[ck], c_time=dag.c_time[ck], c_bytes=dag.c_bytes[ck])
