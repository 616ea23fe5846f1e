"""Single-sample latency of a split (paper 1, section 4).

An accelerator runs its subgraphs one after another, in their order. A subgraph ``S`` is
invoked when every input (output of a node outside ``S`` with an edge into ``S``) is in host
DRAM and the device's previous subgraph has finished; it then transfers its inputs in,
computes all its nodes, and transfers its outputs out, after which they are in DRAM. CPU
nodes run as soon as their inputs are in DRAM; CPUs are unlimited, as in the paper's model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError
from dnnpart.graph.core import FloatArray, Graph, IntArray
from dnnpart.graph.kernels import contiguity_violation
from dnnpart.pricing.loads import node_times


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LatencyResult:
    """Latency and the schedule behind it (``inf`` and a reason when it deadlocks)."""

    latency: float
    node_finish: FloatArray  #: time each node's output is in DRAM (nan when never)
    unit_of_node: IntArray  #: index of the unit (subgraph or CPU node) running each node
    unit_start: FloatArray
    unit_finish: FloatArray
    unit_device: IntArray
    problem: str = ""


def derive_subgraphs(graph: Graph, assignment: IntArray, device: int) -> IntArray:
    """Split a device's nodes into contiguous subgraphs, greedily in topological order.

    Returns an ordinal per node of the device (in increasing node id). A contiguous set gives
    a single subgraph. Each subgraph is an interval of the device's nodes in id order, so
    running them in ordinal order respects every dependency inside the device.
    """
    nodes = np.flatnonzero(assignment == device)
    ordinal = np.zeros(nodes.shape[0], np.int64)
    member = np.zeros(graph.n_nodes, np.bool_)
    member[nodes] = True
    if contiguity_violation(graph.n_nodes, graph.succ_ptr, graph.succ_idx, member)[0] < 0:
        return ordinal
    member[:] = False
    current = 0
    for i, v in enumerate(nodes):
        member[v] = True
        u, _ = contiguity_violation(graph.n_nodes, graph.succ_ptr, graph.succ_idx, member)
        if u >= 0:  # v cannot join: close the subgraph and start a new one at v
            member[nodes[(ordinal == current) & (np.arange(len(nodes)) < i)]] = False
            current += 1
        ordinal[i] = current
    return ordinal


def single_sample_latency(
    graph: Graph, cluster: Cluster, assignment: IntArray, subgraph: IntArray | None = None
) -> LatencyResult:
    """Latency of one sample under the section-4 invocation model.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.devices import reference_cluster
    >>> g = chain_graph(2, acc_time=1.0, cost=0.5)
    >>> c = reference_cluster(n_accelerators=1, n_cpus=1, memory_bytes=1e9)
    >>> single_sample_latency(g, c, np.array([0, 0])).latency  # compute 2, no transfers
    2.0

    Hierarchical clusters (paper 1, appendix C.3) raise ``ValueError``: this model prices
    every transfer at the host link and has no per-link rule yet.
    """
    if cluster.is_hierarchical:
        raise UsageError(
            "single-sample latency does not model accelerator hierarchies (accelerators in "
            "several groups); use a flat cluster or the throughput objective"
        )
    n = graph.n_nodes
    a = assignment.astype(np.int64)
    is_acc = cluster.is_accelerator()
    times = node_times(graph, cluster, a)
    scale = cluster.host_link_scale

    # Units: one per (accelerator, subgraph ordinal), one per CPU node.
    unit_of_node = np.empty(n, np.int64)
    unit_device: list[int] = []
    seq_edges: list[tuple[int, int]] = []
    for dev in range(cluster.n_devices):
        nodes = np.flatnonzero(a == dev)
        if nodes.size == 0:
            continue
        if is_acc[dev]:
            ords = (
                derive_subgraphs(graph, a, dev)
                if subgraph is None
                else subgraph[nodes].astype(np.int64)
            )
            distinct = np.unique(ords)
            base = len(unit_device)
            remap = {int(o): base + j for j, o in enumerate(distinct)}
            unit_of_node[nodes] = [remap[int(o)] for o in ords]
            unit_device.extend([dev] * len(distinct))
            seq_edges.extend((base + j, base + j + 1) for j in range(len(distinct) - 1))
        else:
            base = len(unit_device)
            unit_of_node[nodes] = base + np.arange(nodes.size)
            unit_device.extend([dev] * nodes.size)
    n_units = len(unit_device)
    devices = np.asarray(unit_device, dtype=np.int64)

    # Durations: compute plus, for accelerator subgraphs, in/out transfers at subgraph bounds.
    duration = np.zeros(n_units)
    np.add.at(duration, unit_of_node, times)
    src = graph.edge_sources()
    dst = graph.succ_idx.astype(np.int64)
    u_src, u_dst = unit_of_node[src], unit_of_node[dst]
    cross = u_src != u_dst
    node_cost, uniform = graph.node_out_cost()
    acc_unit = is_acc[devices]
    unit_scale = scale[devices]
    for per_node in (True, False):
        sel = cross & (uniform[src] == per_node)
        s, t, c = src[sel], u_dst[sel], graph.edge_cost[sel]
        if per_node:
            outs = np.unique(s)
            ou = unit_of_node[outs]
            np.add.at(duration, ou, np.where(acc_unit[ou], node_cost[outs], 0.0) * unit_scale[ou])
            pairs = np.unique(s * n_units + t)
            ps, pt = pairs // n_units, pairs % n_units
            np.add.at(duration, pt, np.where(acc_unit[pt], node_cost[ps], 0.0) * unit_scale[pt])
        else:
            su = unit_of_node[s]
            np.add.at(duration, su, np.where(acc_unit[su], c, 0.0) * unit_scale[su])
            np.add.at(duration, t, np.where(acc_unit[t], c, 0.0) * unit_scale[t])

    # Unit DAG: data edges between units plus the order of subgraphs on a device.
    dep_src = np.concatenate([u_src[cross], np.asarray([e[0] for e in seq_edges], np.int64)])
    dep_dst = np.concatenate([u_dst[cross], np.asarray([e[1] for e in seq_edges], np.int64)])
    order = np.lexsort((dep_dst, dep_src))
    dep_src, dep_dst = dep_src[order], dep_dst[order]
    ptr = np.zeros(n_units + 1, np.int64)
    np.cumsum(np.bincount(dep_src, minlength=n_units), out=ptr[1:])
    from dnnpart.graph.kernels import kahn_order

    topo, count = kahn_order(n_units, ptr, dep_dst)
    start = np.zeros(n_units)
    finish = np.full(n_units, np.nan)
    if count < n_units:
        stuck = int(np.setdiff1d(np.arange(n_units), topo[:count])[0])
        problem = (
            f"the subgraphs on {cluster.devices[devices[stuck]].name} wait on each other "
            "through other devices (their order deadlocks or a subgraph is not contiguous)"
        )
        return LatencyResult(
            latency=float("inf"),
            node_finish=np.full(n, np.nan),
            unit_of_node=unit_of_node,
            unit_start=start,
            unit_finish=finish,
            unit_device=devices,
            problem=problem,
        )
    for unit in topo:
        finish[unit] = start[unit] + duration[unit]
        for e in range(ptr[unit], ptr[unit + 1]):
            nxt = dep_dst[e]
            if finish[unit] > start[nxt]:
                start[nxt] = finish[unit]
    node_finish = finish[unit_of_node]
    return LatencyResult(
        latency=float(finish.max()) if n_units else 0.0,
        node_finish=node_finish,
        unit_of_node=unit_of_node,
        unit_start=start,
        unit_finish=finish,
        unit_device=devices,
    )
