"""Replicated stages (paper 1, appendix C.2): validation and the all-reduce term.

A stage replicated over ``r`` devices (one primary holding the nodes, ``r - 1`` replicas,
see :class:`~dnnpart.plan.Plan`) runs every ``r``-th sample on each of them, so each device's
load is the stage's load on that device divided by ``r``. Training synchronises the stage's
weights once per sample with a ring all-reduce, which costs every member

    ``(r - 1) * W / (r * B)``

where ``W`` is the sum of ``memory_bytes`` over the stage's nodes (paper 1's ``m_v``, the
weights associated with the nodes; our graphs carry one memory figure per node) and ``B``
the slowest link between two members (:meth:`~dnnpart.devices.Cluster.group_bandwidth`),
converted to load units by the cluster's ``time_unit_s`` (``inf`` when ``B = 0``). Per
appendix C.1 the two terms are added (overlap ``"none"``) or max-ed (``"compute-comm"``,
``"full-duplex"``). Inference graphs have no backward pass and read-only weights: replicas
need no synchronisation, the term is zero.
"""

from __future__ import annotations

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph.core import FloatArray, IntArray
from dnnpart.plan import Plan
from dnnpart.problem import LATENCY, Problem


def checked_replication(problem: Problem, plan: Plan) -> IntArray | None:
    """``plan.replica_of`` as int64 after checks against the cluster; ``None`` when absent.

    Raises
    ------
    ValueError
        Wrong length, a replica of another device kind, or replication with the latency
        objective (a replica does not shorten a single sample's path).
    """
    if plan.replica_of is None:
        return None
    cluster = problem.cluster
    r: IntArray = plan.replica_of.astype(np.int64)
    if r.shape != (cluster.n_devices,):
        raise UsageError(
            f"plan replica_of has {r.shape[0]} entries, the cluster has {cluster.n_devices} devices"
        )
    kinds = np.array(cluster.kinds())
    bad = np.flatnonzero(kinds[r] != kinds)
    if bad.size:
        j = int(bad[0])
        raise UsageError(
            f"{cluster.devices[j].name} ({kinds[j]}) cannot replicate the stage of "
            f"{cluster.devices[r[j]].name} ({kinds[r[j]]}): replicas must be of the same kind"
        )
    if plan.is_replicated and problem.objective.kind == LATENCY:
        raise UsageError("replicated stages apply to the throughput objective, not latency")
    return r


def allreduce_time(problem: Problem, replica_of: IntArray, stage_bytes: FloatArray) -> FloatArray:
    """Per device, the all-reduce time of its replication group (zero when not replicated).

    ``stage_bytes[p]`` is ``W`` of the stage held by primary ``p`` (``memory_bytes`` summed
    over its nodes); entries of replicas are ignored.

    Examples
    --------
    >>> import numpy as np
    >>> from dnnpart.devices import reference_cluster
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.graph.training import add_backward_pass
    >>> c = reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=1e9, host_bandwidth=4e9)
    >>> p = Problem(graph=add_backward_pass(chain_graph(2)), cluster=c)
    >>> # 2 replicas, W = 4 MB, B = 2 GB/s (via host DRAM): 1/2 * 4e6 / 2e9 s = 1 ms
    >>> allreduce_time(p, np.array([0, 0]), np.array([4e6, 0.0])).tolist()
    [1.0, 1.0]
    """
    cluster = problem.cluster
    d = cluster.n_devices
    out: FloatArray = np.zeros(d)
    if not problem.graph.is_training:
        return out
    counts = np.bincount(replica_of, minlength=d)
    for p in np.flatnonzero(counts > 1):
        members = np.flatnonzero(replica_of == p)
        r = int(members.size)
        bandwidth = cluster.group_bandwidth(members)
        if bandwidth == 0:  # no link between two members: they cannot synchronise
            out[members] = np.inf
            continue
        out[members] = (r - 1) * float(stage_bytes[p]) / (r * bandwidth) / cluster.time_unit_s
    return out


def combine_replicated(
    load: FloatArray, counts: FloatArray, allreduce: FloatArray, overlap: str
) -> FloatArray:
    """A replicated device's load: ``load / r`` and the all-reduce, added or max-ed (C.1)."""
    shared = load / counts
    if overlap == "none":
        result: FloatArray = shared + allreduce
    else:
        result = np.maximum(shared, allreduce)
    return result
