"""Phase 1 flow: clustering -> DP -> refinement, and the stage graph handed to phase 2.

``partition_ops`` runs the three steps of Sec. 4 on a :class:`dnnpart.graph.Graph`; with
``k=None`` it skips clustering (the exact DP over the atomic op DAG, small graphs only) and with
``refine_steps=0`` it skips refinement (the ablations the issue asks for).

Choices (also in ``docs/methods/parmesan.md``):

* **Cluster harder until the lattice fits.** After clustering to ``k`` hyper-ops, the
  hyper-graph's fronted subgraphs are counted by the streaming counter
  (:func:`dnnpart.graph.ideals.count_dag_ideals`) against the DP's cap
  (:func:`.partition_dp.ideal_cap`: ``max_ideals`` and the memory and work estimates); while
  they do not fit, clustering continues on the hyper-graph to ``3/4`` of its size (never below
  ``S``). The paper fixes ``K`` by hand; a wide op graph (Swin-L's autograd graph: 4,160
  fronted subgraphs at ``K = 128``) would otherwise exhaust memory or time in the DP.
  ``Phase1Result.n_coarsenings`` counts the extra rounds.
* **Respecting a given partition** (``respect``): clustering never fuses two ops that
  ``respect`` puts in different stages, so every prefix of that partition is a union of
  hyper-ops and a fronted subgraph of the hyper-graph: the DP sees that chain among its
  candidates and returns a max stage time no larger (refinement never increases it). The
  ``parmesan`` method passes the layer-level (PipeDream) partition, which makes the op-level
  partition at least as good as the layer-level DP's by construction.
* **Path fallback** (``too_large="chain"``, PipeDream's layer path): when the lattice does not
  fit even unclustered, the DP runs over the prefixes of one linear order
  (:func:`linear_order`, PipeDream's own path DP) instead of failing.

:func:`pipeline_stages` turns a partition with ``R`` replicas per stage into phase 2's
:class:`~.stages.PipelineStages`: ``c_u(s)`` is the stage's compute over ``R`` (each replica
runs ``1/R`` of the samples), ``P(s)`` its parameter bytes (a full copy per replica) and
``M(s, s')`` the bytes of the communication edges from ``s`` to ``s'`` over ``R`` (one pipeline
copy carries ``1/R`` of the samples).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dnnpart.errors import ProblemTooLargeError
from dnnpart.graph.core import Graph
from dnnpart.graph.ideals import count_dag_ideals
from dnnpart.solvers.dp.ideals import DEFAULT_MAX_IDEALS
from dnnpart.solvers.parmesan.clustering import cluster_ops, smallest_first_numbering
from dnnpart.solvers.parmesan.opdag import IntArray, MemoryModel, OpDag, atomic_dag, quotient
from dnnpart.solvers.parmesan.partition_dp import (
    StagePartition,
    ideal_cap,
    partition_chain_dp,
    partition_dp,
    stage_memory,
    stage_times,
)
from dnnpart.solvers.parmesan.refinement import refine
from dnnpart.stages import PipelineStages


@dataclass(frozen=True, slots=True, kw_only=True)
class Phase1Result:
    """Outcome of :func:`partition_ops`.

    ``stage_of`` is per original node (``None`` when no partition fits); ``dp_objective`` the
    max stage time right after the DP, ``objective`` after refinement (Eq. 3 times).
    """

    stage_of: IntArray | None
    atom_stage: IntArray | None
    replicas: IntArray | None
    objective: float
    dp_objective: float
    n_hyper_ops: int
    n_ideals: int
    n_moves: int
    dag: OpDag
    atom: IntArray
    n_coarsenings: int = 0
    lattice: str = "ideals"


def linear_order(dag: OpDag) -> IntArray:
    """A topological order of ``dag`` for a path DP, each op as close before its consumers as
    possible: a depth-first walk from the sinks (in id order) that emits a node after its
    predecessors, visiting the deepest predecessor first, so side inputs (parameters, their
    transposes) come right before the op that reads them, not wherever their ids put them,
    and a cut of the path does not strand them far from it.

    Examples
    --------
    >>> from dnnpart.solvers.parmesan.opdag import OpDag
    >>> z, e = np.zeros(4), np.zeros(0, np.int64)
    >>> dag = OpDag(n=4, src=np.array([0, 1, 2]), dst=np.array([3, 2, 3]), compute=z, params=z,
    ...             acts=z, c_src=e, c_dst=e, c_time=np.zeros(0), c_bytes=np.zeros(0),
    ...             c_stash=np.zeros(0))
    >>> linear_order(dag).tolist()  # the side input 0 waits until just before its consumer 3
    [1, 2, 0, 3]
    """
    n = dag.n
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(dag.src.tolist(), dag.dst.tolist(), strict=True):
        preds[b].append(a)
    depth = [0] * n
    for v in range(n):  # ids are topological
        if preds[v]:
            depth[v] = 1 + max(depth[u] for u in preds[v])
    for v in range(n):
        preds[v].sort(key=lambda u: (-depth[u], u))
    has_succ = np.zeros(n, np.bool_)
    has_succ[dag.src] = True
    done = [False] * n
    order: list[int] = []
    for root in [v for v in range(n) if not has_succ[v]]:
        if done[root]:
            continue
        stack = [(root, 0)]
        while stack:
            v, i = stack.pop()
            if i < len(preds[v]):
                stack.append((v, i + 1))
                u = preds[v][i]
                if not done[u]:
                    stack.append((u, 0))
                continue
            if not done[v]:
                done[v] = True
                order.append(v)
    return np.asarray(order, dtype=np.int64)


def _coarsen_to_fit(dag: OpDag, label: IntArray, n_stages: int, n_devices: int,
                    max_ideals: int, alpha: float, mem: MemoryModel,
                    respect: IntArray | None) -> tuple[IntArray, OpDag, int]:
    """Cluster the quotient further (to 3/4 of its size each round) until its fronted
    subgraphs fit the DP's cap or clustering cannot go on."""
    hyper = quotient(dag, label)
    rounds = 0
    while True:
        cap = ideal_cap(hyper.n, n_stages, n_devices, max_ideals=max_ideals)
        if count_dag_ideals(hyper.n, hyper.src.tolist(), hyper.dst.tolist(), limit=cap) <= cap:
            return label, hyper, rounds
        target = max(n_stages, (3 * hyper.n) // 4)
        if target >= hyper.n:
            return label, hyper, rounds
        side = None
        if respect is not None:
            side = np.empty(hyper.n, np.int64)
            side[label] = respect
        sub = cluster_ops(hyper, target, alpha=alpha, memory=mem, n_stages=n_stages,
                          respect=side)
        if int(sub.max()) + 1 >= hyper.n and side is not None:
            sub = _fuse_pieces(hyper, side, mem, n_stages)
        if int(sub.max()) + 1 >= hyper.n:
            return label, hyper, rounds
        label = sub[label]
        hyper = quotient(dag, label)
        rounds += 1


def _fuse_pieces(hyper: OpDag, side: IntArray, mem: MemoryModel, n_stages: int) -> IntArray:
    """One round of joining, in every stage of ``side`` with several weakly connected pieces
    (within the stage), the two cheapest pieces: their cheapest hyper-ops whose union fits in
    memory become one. No path joins two pieces of one stage (it could not leave the stage and
    come back: the stages are a chain of fronted subgraphs), so the fused hyper-op is convex
    and the hyper-graph stays acyclic. Used when clustering (adjacent pairs only) stalls with a
    lattice still too wide: a stage of the layer partition can hold disconnected pieces, whose
    subsets multiply."""
    n = hyper.n
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(hyper.src.tolist(), hyper.dst.tolist(), strict=True):
        if side[a] == side[b]:
            parent[find(a)] = find(b)
    by_stage: dict[int, dict[int, list[int]]] = {}
    for v in range(n):
        by_stage.setdefault(int(side[v]), {}).setdefault(find(v), []).append(v)
    key = np.arange(n, dtype=np.int64)
    for stage_pieces in by_stage.values():
        if len(stage_pieces) < 2:
            continue
        order = sorted(stage_pieces.values(),
                       key=lambda m: (float(hyper.compute[m].sum()), min(m)))
        done = False
        for x in range(len(order)):
            for y in range(x + 1, len(order)):
                for u in sorted(order[x], key=lambda v: (float(hyper.compute[v]), v)):
                    for w in sorted(order[y], key=lambda v: (float(hyper.compute[v]), v)):
                        mask = np.zeros(n, np.bool_)
                        mask[[u, w]] = True
                        if hyper.memory(mask, mem, 0, max(1, n_stages))[0] <= mem.device_memory:
                            key[[u, w]] = min(u, w)
                            done = True
                            break
                    if done:
                        break
                if done:
                    break
            if done:
                break
    return _topological_labels(hyper, key)


def _topological_labels(hyper: OpDag, key: IntArray) -> IntArray:
    """Blocks ``key`` (a representative per node) numbered in a topological order of the
    quotient (Kahn, smallest representative first)."""
    reps = sorted(set(key.tolist()))
    succ: dict[int, set[int]] = {r: set() for r in reps}
    indeg = dict.fromkeys(reps, 0)
    for a, b in zip(key[hyper.src].tolist(), key[hyper.dst].tolist(), strict=True):
        if a != b and b not in succ[a]:
            succ[a].add(b)
            indeg[b] += 1
    number = smallest_first_numbering(succ, indeg)
    return np.array([number[int(k)] for k in key.tolist()], dtype=np.int64)


def partition_ops(
    graph: Graph, n_stages: int, n_devices: int, *, replicas: int | None = None,
    k: int | None = 64, alpha: float = 0.001, memory: MemoryModel | None = None,
    refine_steps: int = 100, max_ideals: int = DEFAULT_MAX_IDEALS,
    respect: IntArray | None = None, too_large: Literal["raise", "chain"] = "raise",
) -> Phase1Result:
    """Clustering into ``k`` hyper-ops, DP over fronted subgraphs, refinement.

    ``respect``: a stage per original node that clustering must not cut across (module
    docstring); ``too_large``: what to do when the lattice does not fit the DP's cap
    (``"raise"`` :class:`~dnnpart.errors.ProblemTooLargeError`, or ``"chain"``: DP over the
    prefixes of :func:`linear_order`).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> res = partition_ops(chain_graph(6), 3, 3, k=None)
    >>> res.stage_of.tolist(), res.objective
    ([0, 0, 1, 1, 2, 2], 2.0)
    """
    mem = memory or MemoryModel()
    if replicas is not None:  # the in-flight micro-batches per replica depend on R
        mem = dataclasses.replace(mem, replicas=int(replicas))
    dag, atom = atomic_dag(graph)
    side = None
    if respect is not None:
        side = np.empty(dag.n, np.int64)
        side[atom] = np.asarray(respect, dtype=np.int64)
    rounds = 0
    if k is None or k >= dag.n:
        label = np.arange(dag.n, dtype=np.int64)
        hyper = quotient(dag, label)
    else:
        label = cluster_ops(dag, k, alpha=alpha, memory=mem, n_stages=n_stages, respect=side)
        label, hyper, rounds = _coarsen_to_fit(dag, label, n_stages, n_devices, max_ideals,
                                               alpha, mem, side)
    lattice = "ideals"
    part: StagePartition
    try:
        part = partition_dp(hyper, n_stages, n_devices, replicas=replicas, memory=mem,
                            max_ideals=max_ideals)
    except ProblemTooLargeError:
        if too_large != "chain":
            raise
        part = partition_chain_dp(hyper, linear_order(hyper), n_stages, n_devices,
                                  replicas=replicas, memory=mem)
        lattice = "linear order"
    if part.stage_of is None or part.replicas is None:
        return Phase1Result(stage_of=None, atom_stage=None, replicas=None, objective=np.inf,
                            dp_objective=np.inf, n_hyper_ops=hyper.n, n_ideals=part.n_ideals,
                            n_moves=0, dag=dag, atom=atom, n_coarsenings=rounds,
                            lattice=lattice)
    atom_stage = part.stage_of[label]
    moves = 0
    if refine_steps > 0:
        atom_stage, moves = refine(dag, atom_stage, part.replicas, memory=mem,
                                   max_steps=refine_steps)
    obj = float(stage_times(dag, atom_stage, part.replicas).max())
    return Phase1Result(stage_of=atom_stage[atom], atom_stage=atom_stage,
                        replicas=part.replicas, objective=obj, dp_objective=part.objective,
                        n_hyper_ops=hyper.n, n_ideals=part.n_ideals, n_moves=moves, dag=dag,
                        atom=atom, n_coarsenings=rounds, lattice=lattice)


def pipeline_stages(
    dag: OpDag, atom_stage: IntArray, replicas: int, *, memory: MemoryModel | None = None
) -> PipelineStages:
    """Phase 2's stage graph of a partition with ``replicas`` per stage.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(4, memory_bytes=8.0))
    >>> st = pipeline_stages(dag, np.array([0, 0, 1, 1]), 2)
    >>> st.compute.tolist(), st.comm_bytes.tolist()
    ([1.0, 1.0], [[0.0, 4.0], [0.0, 0.0]])
    """
    s_n = int(atom_stage.max()) + 1
    r = int(replicas)
    onehot = atom_stage[None, :] == np.arange(s_n)[:, None]
    comm = np.zeros((s_n, s_n))
    a, b = atom_stage[dag.c_src], atom_stage[dag.c_dst]
    cross = a != b
    np.add.at(comm, (a[cross], b[cross]), dag.c_bytes[cross])
    mem = dataclasses.replace(memory or MemoryModel(), replicas=r)
    return PipelineStages(compute=onehot @ dag.compute / r, param_bytes=onehot @ dag.params,
                          comm_bytes=comm / r, replicas=r,
                          memory_bytes=stage_memory(dag, atom_stage, s_n, mem))
