"""Op-level emulator (paper 2, section 3.2.1): a framework scheduler, transfers and memory.

Semantics (``docs/simulate.md``; the paper leaves them loose, PAPER-NOTES):

* an op runs on its assigned device for ``compute_time[kind] / speed``; one op at a time per
  device; an idle device takes the ready op with the least (ready time, topological id);
* an op is ready when every input is on its device: a local input when its producer
  finishes, a remote one when its transfer arrives;
* a finished op sends its tensor once per destination device (not once per consumer), taking
  ``latency + bytes / bandwidth`` of the routed device pair (the cluster's matrices); bytes
  are the edge's ``edge_bytes``, or where unknown (``nan``) the producer's output bytes;
  edges out of ``control`` nodes carry latency only;
* optional contention: every directed physical link on a transfer's routed path (or, for a
  cluster whose matrices are given, the device pair) carries one transfer at a time; a
  transfer starts when all its links are free and holds them until it arrives (first come,
  first served); without it transfers overlap freely (the fast path);
* memory per device over time by Eq. 2 (:mod:`dnnpart.simulate.memory`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.devices.cluster import Cluster
from dnnpart.devices.links import LinkTable
from dnnpart.errors import UsageError
from dnnpart.graph.core import CONTROL, Graph
from dnnpart.plan import Plan
from dnnpart.pricing.loads import node_times
from dnnpart.problem import Problem
from dnnpart.simulate.memory import track_memory
from dnnpart.simulate.op_kernels import emulate_kernel
from dnnpart.simulate.timeline import COMPUTE, TRANSFER, MemoryCurve, Timeline

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class OpSchedule:
    """Result of :func:`emulate_ops`.

    Attributes
    ----------
    start, finish, ready : per node (graph time unit).
    makespan : last finish (0 for an empty graph).
    peak_memory : ``(d,)`` peak of Eq. 2 per device, bytes.
    memory : memory curve per device (``None`` on the fast path).
    transfers : ``(src node, dst device, begin, end)`` arrays, one row per tensor shipped.
    """

    start: FloatArray
    finish: FloatArray
    ready: FloatArray
    makespan: float
    peak_memory: FloatArray
    memory: list[MemoryCurve] | None
    transfers: tuple[IntArray, IntArray, FloatArray, FloatArray]
    assignment: IntArray
    graph: Graph = field(repr=False)
    cluster: Cluster = field(repr=False)

    def timeline(self) -> Timeline:
        """Compute intervals per device, transfers per directed device pair, memory curves."""
        g, c, a = self.graph, self.cluster, self.assignment
        names = [dev.name for dev in c.devices]
        xs, xd, xb, xe = self.transfers
        pair_key = a[xs] * c.n_devices + xd
        pairs = np.unique(pair_key)
        link_names = [f"{names[k // c.n_devices]}->{names[k % c.n_devices]}" for k in pairs.tolist()]
        link_res = np.searchsorted(pairs, pair_key) + len(names)
        labels = tuple(g.names) + tuple(f"{g.names[u]} -> {names[d]}"
                                        for u, d in zip(xs.tolist(), xd.tolist(), strict=True))
        memory = {} if self.memory is None else dict(zip(names, self.memory, strict=True))
        return Timeline(
            resources=tuple(names + link_names),
            resource=np.concatenate((a, link_res)).astype(np.int64),
            start=np.concatenate((self.start, xb)),
            end=np.concatenate((self.finish, xe)),
            kind=(COMPUTE,) * g.n_nodes + (TRANSFER,) * xs.shape[0],
            what=labels,
            memory=memory,
            time_unit_s=c.time_unit_s,
        )


def transfer_bytes(graph: Graph) -> FloatArray:
    """Bytes each edge moves: ``edge_bytes``, else the producer's output bytes; 0 from control.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> transfer_bytes(chain_graph(3, memory_bytes=2.0)).tolist()
    [2.0, 2.0]
    """
    src = graph.edge_sources()
    out = np.where(np.isnan(graph.edge_bytes), graph.node_output_bytes()[src], graph.edge_bytes)
    out = np.where(graph.memory_classes()[src] == CONTROL, 0.0, out)
    result: FloatArray = out.astype(np.float64)
    return result


def contention_resources(graph: Graph, cluster: Cluster,
                         assignment: IntArray) -> tuple[IntArray, IntArray, int]:
    """Per used device pair, the resources a transfer holds: ``(ptr, res, n_res)`` CSR.

    A routed cluster (``cluster.routed``): the directed physical links of the pair's routed
    path (:func:`~dnnpart.devices.routing.route_path`; link ``k`` crossed from its ``a`` to
    its ``b`` is resource ``2k``, the other way ``2k + 1``: links are full duplex). Otherwise
    (matrices given): the directed pair itself.

    Examples
    --------
    >>> from dnnpart.devices.topology import mesh2d
    >>> from dnnpart.testing import chain_graph
    >>> ptr, res, n = contention_resources(chain_graph(2), mesh2d(x=1, y=3), np.array([0, 2]))
    >>> res[ptr[2]:ptr[3]].tolist(), n                   # acc0 -> acc2 crosses links 0 and 1
    ([0, 2], 4)
    """
    from dnnpart.devices.routing import route_path

    d = cluster.n_devices
    src = graph.edge_sources()
    pairs = np.unique(assignment[src] * d + assignment[graph.succ_idx])
    paths: dict[int, list[int]] = {}
    links = cluster.links
    assert isinstance(links, LinkTable)  # Cluster stores a table: routed from its arrays
    ends_a, ends_b = links.a.tolist(), links.b.tolist()
    for p in pairs.tolist():
        u, v = divmod(p, d)
        if u == v:
            continue
        if cluster.routed:
            hops = route_path(links, d, u, v, float(cluster.bandwidth[u, v]),
                              rule=cluster.routing)
            at, res = u, []
            for k in hops:  # direction of each hop along the path
                forward = ends_a[k] == at
                res.append(2 * k if forward else 2 * k + 1)
                at = ends_b[k] if forward else ends_a[k]
            paths[p] = res
        else:
            paths[p] = [p]
    counts = np.zeros(d * d + 1, np.int64)
    for p, res in paths.items():
        counts[p + 1] = len(res)
    ptr = np.cumsum(counts)
    flat = np.zeros(int(ptr[-1]), np.int64)
    for p, res in paths.items():
        flat[ptr[p]:ptr[p + 1]] = res
    n_res = 2 * len(cluster.links) if cluster.routed else d * d
    return ptr, flat, n_res


def _inputs(graph: Graph, cluster: Cluster, assignment: npt.ArrayLike) -> tuple[IntArray, FloatArray]:
    a = np.asarray(assignment, dtype=np.int64).reshape(-1)
    if a.shape != (graph.n_nodes,):
        raise UsageError(f"assignment has {a.shape[0]} entries, the graph has {graph.n_nodes} nodes")
    if a.size and (a.min() < 0 or a.max() >= cluster.n_devices):
        v = int(np.argmax((a < 0) | (a >= cluster.n_devices)))
        raise UsageError(f"node {graph.label(v)} is on device {a[v]}; the cluster has "
                         f"{cluster.n_devices} devices")
    dur = node_times(graph, cluster, a)
    bad = np.flatnonzero(~np.isfinite(dur))
    if bad.size:
        v = int(bad[0])
        raise UsageError(f"node {graph.label(v)} cannot run on {cluster.devices[a[v]].name} "
                         "(no compute time for that device kind)")
    return a, dur


def emulate_ops(
    graph: Graph, cluster: Cluster, assignment: npt.ArrayLike, *, memory: bool = True,
    curves: bool = True, contention: bool = False,
) -> OpSchedule:
    """Emulate the schedule of ``assignment`` (node -> device); see the module docstring.

    ``memory=False`` skips the tracker (peaks are then 0); ``curves=False`` keeps the peaks
    but builds no curves (what heuristics want inside a loop; see :func:`emulate_makespan`).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.devices import reference_cluster
    >>> g = chain_graph(3, acc_time=1.0)
    >>> c = reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=1e9)
    >>> s = emulate_ops(g, c, [0, 0, 1])
    >>> s.start.tolist(), s.makespan
    ([0.0, 1.0, 2.0], 3.0)
    """
    a, dur = _inputs(graph, cluster, assignment)
    d = cluster.n_devices
    if contention:
        path_ptr, path_res, n_res = contention_resources(graph, cluster, a)
    else:
        path_ptr, path_res, n_res = np.zeros(d * d + 1, np.int64), np.zeros(0, np.int64), 0
    start, finish, ready, xs, xd, xb, xe, nx = emulate_kernel(
        graph.succ_ptr.astype(np.int64), graph.succ_idx.astype(np.int64),
        graph.in_degree().astype(np.int64), a, dur, transfer_bytes(graph), d,
        np.ascontiguousarray(cluster.bandwidth), np.ascontiguousarray(cluster.latency),
        float(cluster.time_unit_s), bool(contention), path_ptr, path_res, n_res,
    )
    if nx < 0:
        raise UsageError("the graph has a cycle; the emulator needs a DAG")
    if xe.size and not np.all(np.isfinite(xe)):
        k = int(np.argmax(~np.isfinite(xe)))
        src, dst = cluster.devices[a[xs[k]]].name, cluster.devices[xd[k]].name
        bw = cluster.bandwidth[a[xs[k]], xd[k]]
        raise UsageError(f"no usable link from {src} to {dst} (bandwidth {bw})")
    if memory:
        peaks, mem_curves = track_memory(graph, a, start, finish, d, curves=curves)
    else:
        peaks, mem_curves = np.zeros(d), None
    return OpSchedule(
        start=start, finish=finish, ready=ready,
        makespan=float(finish.max()) if finish.size else 0.0,
        peak_memory=peaks, memory=mem_curves, transfers=(xs, xd, xb, xe),
        assignment=a, graph=graph, cluster=cluster,
    )


def emulate_makespan(
    graph: Graph, cluster: Cluster, assignment: npt.ArrayLike, *, contention: bool = False,
) -> tuple[float, FloatArray]:
    """Fast path for heuristics: ``(makespan, per-device peak memory)`` and nothing else.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.devices import reference_cluster
    >>> c = reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=1e9)
    >>> emulate_makespan(chain_graph(3, acc_time=1.0), c, [0, 1, 1])[0]
    3.0
    """
    s = emulate_ops(graph, cluster, assignment, curves=False, contention=contention)
    return s.makespan, s.peak_memory


def emulate_plan(problem: Problem, plan: Plan | npt.ArrayLike, **options: bool) -> OpSchedule:
    """:func:`emulate_ops` on a problem's graph and cluster (``plan``: a Plan or an assignment).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> emulate_plan(chain_problem([1.0, 2.0], n_accelerators=2), [0, 1]).makespan
    3.0
    """
    assignment = plan.assignment if isinstance(plan, Plan) else plan
    return emulate_ops(problem.graph, problem.cluster, assignment, **options)
