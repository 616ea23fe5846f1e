"""Phase 1 flow: clustering -> DP -> refinement, and the stage graph handed to phase 2.

``partition_ops`` runs the three steps of Sec. 4 on a :class:`dnnpart.graph.Graph`; with
``k=None`` it skips clustering (the exact DP over the atomic op DAG, small graphs only) and with
``refine_steps=0`` it skips refinement (the ablations the issue asks for).

:func:`pipeline_stages` turns a partition with ``R`` replicas per stage into phase 2's
:class:`~.stages.PipelineStages`: ``c_u(s)`` is the stage's compute over ``R`` (each replica
runs ``1/R`` of the samples), ``P(s)`` its parameter bytes (a full copy per replica) and
``M(s, s')`` the bytes of the communication edges from ``s`` to ``s'`` over ``R`` (one pipeline
copy carries ``1/R`` of the samples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnpart.graph.core import Graph
from dnnpart.solvers.dp.ideals import DEFAULT_MAX_IDEALS
from dnnpart.solvers.parmesan.clustering import cluster_ops
from dnnpart.solvers.parmesan.opdag import IntArray, MemoryModel, OpDag, atomic_dag, quotient
from dnnpart.solvers.parmesan.partition_dp import partition_dp, stage_memory, stage_times
from dnnpart.solvers.parmesan.refinement import refine
from dnnpart.solvers.parmesan.stages import PipelineStages


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


def partition_ops(
    graph: Graph, n_stages: int, n_devices: int, *, replicas: int | None = None,
    k: int | None = 64, alpha: float = 0.001, memory: MemoryModel | None = None,
    refine_steps: int = 100, max_ideals: int = DEFAULT_MAX_IDEALS,
) -> Phase1Result:
    """Clustering into ``k`` hyper-ops, DP over fronted subgraphs, refinement.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> res = partition_ops(chain_graph(6), 3, 3, k=None)
    >>> res.stage_of.tolist(), res.objective
    ([0, 0, 1, 1, 2, 2], 2.0)
    """
    mem = memory or MemoryModel()
    dag, atom = atomic_dag(graph)
    if k is None or k >= dag.n:
        label = np.arange(dag.n, dtype=np.int64)
    else:
        label = cluster_ops(dag, k, alpha=alpha, memory=mem, n_stages=n_stages)
    hyper = quotient(dag, label)
    part = partition_dp(hyper, n_stages, n_devices, replicas=replicas, memory=mem,
                        max_ideals=max_ideals)
    if part.stage_of is None or part.replicas is None:
        return Phase1Result(stage_of=None, atom_stage=None, replicas=None, objective=np.inf,
                            dp_objective=np.inf, n_hyper_ops=hyper.n, n_ideals=part.n_ideals,
                            n_moves=0, dag=dag, atom=atom)
    atom_stage = part.stage_of[label]
    moves = 0
    if refine_steps > 0:
        atom_stage, moves = refine(dag, atom_stage, part.replicas, memory=mem,
                                   max_steps=refine_steps)
    obj = float(stage_times(dag, atom_stage, part.replicas).max())
    return Phase1Result(stage_of=atom_stage[atom], atom_stage=atom_stage,
                        replicas=part.replicas, objective=obj, dp_objective=part.objective,
                        n_hyper_ops=hyper.n, n_ideals=part.n_ideals, n_moves=moves, dag=dag,
                        atom=atom)


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
    mem = memory or MemoryModel()
    return PipelineStages(compute=onehot @ dag.compute / r, param_bytes=onehot @ dag.params,
                          comm_bytes=comm / r, replicas=r,
                          memory_bytes=stage_memory(dag, atom_stage, s_n, mem))
