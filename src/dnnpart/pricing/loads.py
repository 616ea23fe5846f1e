"""Per-device loads under paper 1's cost model (section 3 and appendix C.1).

An accelerator's load is its compute plus the transfer cost of every node whose output
crosses its boundary: ``c_u`` once for each of its own nodes with an edge leaving the device
(out) and once for each outside node with an edge into the device (in). A CPU's load is its
compute only: reading or writing host DRAM from a CPU is free in this model.

Nodes whose out-edges carry different costs are charged edge by edge, which is exactly the
edge subdivision of paper 1, appendix B. Transfers count towards the forward or backward part
by the role of the node that produced the tensor.

Hierarchical clusters (accelerators in several groups, paper 1, appendix C.3) price each
transfer by the link it uses, with :meth:`~dnnpart.devices.Cluster.transfer_scale`
(``reference_bandwidth / bandwidth``; for :func:`~dnnpart.devices.two_level_cluster` 1 inside
a group and ``intra / inter`` across groups and to CPUs): a sender pays its output once, at
the slowest of the links to the devices that receive it; each receiving accelerator pays at
its own link from the sender; CPUs pay nothing. ``host_link_scale`` multiplies on top. Flat
clusters keep the single host-link rate, whatever their bandwidth matrix says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart._arrays import unique_ints
from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError
from dnnpart.graph.core import FloatArray, Graph, IntArray


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LoadBreakdown:
    """Compute and transfer totals per device, split into forward (0) and backward (1) rows.

    Each array has shape ``(2, n_devices)``.
    """

    compute: FloatArray
    comm_in: FloatArray
    comm_out: FloatArray


def node_times(graph: Graph, cluster: Cluster, assignment: IntArray) -> FloatArray:
    """Compute time of every node on the device it is assigned to."""
    columns = np.array([graph.device_kinds.index(k) for k in cluster.kinds()], dtype=np.int64)
    a = assignment.astype(np.int64)
    times = graph.compute_time[np.arange(graph.n_nodes), columns[a]]
    result: FloatArray = times / cluster.speeds()[a]
    return result


def load_breakdown(
    graph: Graph, cluster: Cluster, assignment: npt.ArrayLike, replica_of: IntArray | None = None
) -> LoadBreakdown:
    """Forward/backward compute and in/out transfer totals per device.

    With ``replica_of`` (see :class:`~dnnpart.plan.Plan`), a replica gets the totals of the
    whole stage it replicates as if it ran the stage alone (compute at its own speed,
    transfers at its own host link); dividing by the replica count is the caller's business.
    """
    a = np.asarray(assignment, dtype=np.int64)
    d = cluster.n_devices
    role = graph.is_backward.astype(np.int64)
    times = node_times(graph, cluster, a)
    compute = np.zeros((2, d))
    np.add.at(compute, (role, a), times)

    src = graph.edge_sources()
    dst = graph.succ_idx.astype(np.int64)
    cross = a[src] != a[dst]
    e_src, e_dst, e_cost = src[cross], dst[cross], graph.edge_cost[cross]
    node_cost, uniform = graph.node_out_cost()
    per_node = uniform[e_src]

    comm_in = np.zeros((2, d))
    comm_out = np.zeros((2, d))
    if cluster.is_hierarchical:
        _hierarchical_transfers(cluster, a, role, e_src, e_dst, e_cost, node_cost, per_node,
                                comm_in, comm_out)
    else:
        _flat_transfers(d, a, role, e_src, e_dst, e_cost, node_cost, per_node, comm_in, comm_out)

    if replica_of is not None:
        rep = np.flatnonzero(replica_of != np.arange(d))
        primary = replica_of[rep]
        speeds = cluster.speeds()
        compute[:, rep] = compute[:, primary] * (speeds[primary] / speeds[rep])
        comm_in[:, rep] = comm_in[:, primary]
        comm_out[:, rep] = comm_out[:, primary]
    # CPUs pay nothing for transfers; accelerators pay at their host link's speed.
    scale = np.where(cluster.is_accelerator(), cluster.host_link_scale, 0.0)
    return LoadBreakdown(compute=compute, comm_in=comm_in * scale, comm_out=comm_out * scale)


def _flat_transfers(
    d: int, a: IntArray, role: IntArray, e_src: IntArray, e_dst: IntArray, e_cost: FloatArray,
    node_cost: FloatArray, per_node: npt.NDArray[np.bool_], comm_in: FloatArray,
    comm_out: FloatArray,
) -> None:
    # Uniform nodes: out once per node, in once per (node, receiving device).
    senders = unique_ints(e_src[per_node])
    np.add.at(comm_out, (role[senders], a[senders]), node_cost[senders])
    pairs = unique_ints(e_src[per_node] * d + a[e_dst[per_node]])
    pair_src, pair_dev = pairs // d, pairs % d
    np.add.at(comm_in, (role[pair_src], pair_dev), node_cost[pair_src])
    # Non-uniform nodes: every crossing edge is its own transfer.
    edge_src, edge_dst, edge_cost = e_src[~per_node], e_dst[~per_node], e_cost[~per_node]
    np.add.at(comm_out, (role[edge_src], a[edge_src]), edge_cost)
    np.add.at(comm_in, (role[edge_src], a[edge_dst]), edge_cost)


def _hierarchical_transfers(
    cluster: Cluster, a: IntArray, role: IntArray, e_src: IntArray, e_dst: IntArray,
    e_cost: FloatArray, node_cost: FloatArray, per_node: npt.NDArray[np.bool_],
    comm_in: FloatArray, comm_out: FloatArray,
) -> None:
    d = cluster.n_devices
    link = cluster.transfer_scale()
    # Uniform nodes: in once per (node, receiving device) at that link; out once per node at
    # the slowest link among its receivers.
    pairs = unique_ints(e_src[per_node] * d + a[e_dst[per_node]])
    pair_src, pair_dev = pairs // d, pairs % d
    rate = link[a[pair_src], pair_dev]
    np.add.at(comm_in, (role[pair_src], pair_dev), node_cost[pair_src] * rate)
    n = node_cost.shape[0]
    slowest = np.zeros(n)
    np.maximum.at(slowest, pair_src, rate)
    senders = unique_ints(pair_src)
    np.add.at(comm_out, (role[senders], a[senders]), node_cost[senders] * slowest[senders])
    # Non-uniform nodes: every crossing edge is its own transfer, at its own link.
    edge_src, edge_dst, edge_cost = e_src[~per_node], e_dst[~per_node], e_cost[~per_node]
    edge_cost = edge_cost * link[a[edge_src], a[edge_dst]]
    np.add.at(comm_out, (role[edge_src], a[edge_src]), edge_cost)
    np.add.at(comm_in, (role[edge_src], a[edge_dst]), edge_cost)


def combine(compute: FloatArray, comm_in: FloatArray, comm_out: FloatArray, overlap: str) -> FloatArray:
    """Load from its parts under an overlap mode of appendix C.1."""
    if overlap == "none":
        return compute + comm_in + comm_out
    if overlap == "compute-comm":
        return np.maximum(compute, comm_in + comm_out)
    if overlap == "full-duplex":
        return np.maximum(np.maximum(compute, comm_in), comm_out)
    raise UsageError(f"unknown overlap mode {overlap!r}")
