"""Phase 1's DP over fronted subgraphs (Eqs. 2-3).

``T[F, s, d]`` is the best max stage time of splitting the fronted subgraph (ideal) ``F`` into
``s`` non-empty stages on ``d`` devices in all, the last stage ``F - F'`` on ``d - d'``
replicas. Fronted subgraphs are the ideals of the op DAG, enumerated by paper 1's lattice
enumeration with its ``max_ideals`` guard; the lattice lists subsets before supersets, so one
pass fills the table.

Choices where the paper is silent or loose (also in ``docs/parmesan.md``):

* ``T[empty, 0, 0] = 0`` and ``T[empty, s, d] = inf`` otherwise (the paper sets all of them to
  0, which would allow empty stages and idle devices): every stage holds at least one op and
  all ``D`` devices are used.
* ``replicas=None`` lets every stage take any number of replicas (the paper's ``d'`` range);
  ``replicas=R`` fixes ``d - d' = R`` (what the paper uses "empirically", Sec. 4.1, and what
  phase 2 needs: ``R`` identical pipeline copies).
* The memory test is per replica at the stage's position (see :mod:`.opdag`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dnnpart import interrupt
from dnnpart.solvers.dp.ideals import DEFAULT_MAX_IDEALS
from dnnpart.solvers.parmesan.opdag import IntArray, MemoryModel, OpDag


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


def partition_dp(
    dag: OpDag, n_stages: int, n_devices: int, *, replicas: int | None = None,
    memory: MemoryModel | None = None, max_ideals: int = DEFAULT_MAX_IDEALS,
) -> StagePartition:
    """Optimal chain of ``n_stages`` fronted subgraphs on ``n_devices`` devices (Eq. 2).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.solvers.parmesan.opdag import atomic_dag
    >>> dag, _ = atomic_dag(chain_graph(4))
    >>> p = partition_dp(dag, 2, 2)
    >>> p.stage_of.tolist(), p.objective
    ([0, 0, 1, 1], 2.0)
    """
    mem = memory or MemoryModel()
    s_n, d_n = int(n_stages), int(n_devices)
    if s_n < 1 or d_n < s_n:
        raise ValueError(f"need 1 <= stages <= devices, got S={s_n}, D={d_n}")
    if replicas is not None and replicas * s_n != d_n:
        raise ValueError(f"replicas * stages must equal devices: {replicas} * {s_n} != {d_n}")
    lat, mask = dag.ideals(max_ideals)
    n_id = lat.n_ideals
    table = np.full((n_id, s_n + 1, d_n + 1), np.inf)
    table[0, 0, 0] = 0.0
    arg_j = np.full((n_id, s_n + 1, d_n + 1), -1, np.int64)
    arg_r = np.zeros((n_id, s_n + 1, d_n + 1), np.int64)
    r_opts = [replicas] if replicas is not None else list(range(1, d_n + 1))
    for i in range(1, n_id):
        if interrupt.stop_requested():  # the loop is quadratic in ideals: stop at once
            raise interrupt.Stopped
        sub = ~np.any(mask & ~mask[i], axis=1)
        sub[i] = False
        js = np.nonzero(sub)[0]
        u = mask[i][None, :] & ~mask[js]
        work = dag.work(u)
        for s in range(1, s_n + 1):
            fits = dag.memory(u, mem, s - 1, s_n) <= mem.device_memory
            prev_all = table[js, s - 1, :]  # (m, D+1)
            for d in range(s, d_n + 1):
                best, bj, br = table[i, s, d], -1, 0
                for r in r_opts:
                    dp = d - r
                    if dp < s - 1 or dp < 0:
                        continue
                    cand = np.maximum(prev_all[:, dp], np.where(fits, work / r, np.inf))
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
        stage_of[mask[i] & ~mask[j]] = s - 1
        reps[s - 1] = r
        i, d = j, d - r
    return StagePartition(stage_of=stage_of, replicas=reps, objective=obj, n_ideals=n_id)
