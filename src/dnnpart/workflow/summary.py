"""Figures that describe an input: a graph's structure, an imported model, a cluster.

Each is a JSON-ready dict (what ``dnnpart info``, ``dnnpart import`` and ``dnnpart cluster
show`` print, or give with ``--json``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import ProblemTooLargeError
from dnnpart.problem import Problem

if TYPE_CHECKING:
    from dnnpart.frontends.build import ImportedModel


def graph_summary(problem: Problem, *, ideal_limit: int) -> dict[str, Any]:
    """Structural figures of a problem's graph: size, depth, width, ideals, CCR, parallelism.

    Ideals are counted up to ``ideal_limit`` (``None`` beyond it).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> s = graph_summary(chain_problem([1.0, 2.0, 3.0], n_accelerators=2), ideal_limit=100)
    >>> s["nodes"], s["edges"], s["width"], s["ideals"]
    (3, 2, 1, 4)
    """
    from dnnpart.graph import algorithms as alg

    g, c = problem.graph, problem.cluster
    counted = True
    try:
        n_ideals: int | None = alg.count_ideals(g, limit=ideal_limit)
    except ProblemTooLargeError as exc:
        n_ideals, counted = None, "not counted" not in str(exc)
    dp_ideals = _dp_ideals(problem, ideal_limit)
    width, exact = alg.width(g)
    classes = g.color_class[g.color_class >= 0]
    multi = int(np.count_nonzero(np.bincount(classes) > 1)) if classes.size else 0
    acc = g.time_on("accelerator")
    return {
        "name": problem.name,
        "nodes": g.n_nodes,
        "edges": g.n_edges,
        "backward_nodes": int(g.is_backward.sum()),
        "colocation_classes_with_several_nodes": multi,
        "unsupported_on_accelerator": int(np.count_nonzero(~np.isfinite(acc))),
        "total_cpu_time": float(g.time_on("cpu").sum()),
        "total_accelerator_time": float(acc[np.isfinite(acc)].sum()),
        "total_memory_bytes": float(g.memory_bytes.sum()),
        "critical_path_accelerator": alg.critical_path(g) if np.isfinite(acc).all() else None,
        "depth_levels": int(alg.topological_levels(g).max()) + 1,
        "width": width,
        "width_exact": exact,
        "ideals": n_ideals,
        "dp_ideals": dp_ideals,
        "ideal_limit": ideal_limit,
        "ideals_counted": counted,
        "ccr": alg.communication_to_computation_ratio(g),
        "degree_of_parallelism": alg.degree_of_parallelism(g) if np.isfinite(acc).all() else None,
        "cluster": {
            "name": c.name,
            "devices": [
                {"name": d.name, "kind": d.kind, "memory_bytes": d.memory_bytes, "speed": d.speed}
                for d in c.devices
            ],
        },
    }


#: Memory the summary's count of the DP's ideals may take (the solver's own budget is 1 GB):
#: a lattice past it is reported as too large, in bounded time (`info` on 100,000 nodes: 3 s,
#: was 50 s).
SUMMARY_LATTICE_BYTES = 256_000_000


def _dp_ideals(problem: Problem, limit: int) -> int | None:
    """Ideals the exact DP enumerates: those of the graph after its contraction (appendix B)."""
    from dnnpart.graph.stage_graph import build_stage_graph
    from dnnpart.solvers.dp import enumerate_stage_ideals

    stage = build_stage_graph(problem.graph,
                              memory_limit=float(problem.cluster.memory_capacity().min()))
    try:  # a count for the summary: a small memory budget keeps info fast on huge graphs
        return enumerate_stage_ideals(stage, max_ideals=limit,
                                      max_memory_bytes=SUMMARY_LATTICE_BYTES).n_ideals
    except ProblemTooLargeError:
        return None


def model_summary(imported: ImportedModel, cluster: Cluster) -> dict[str, Any]:
    """What an imported model is: operators, graph size, FLOPs, times, memory, pricing.

    ``cluster`` is the cluster it was priced for (named in the summary).
    """
    g = imported.graph
    return {
        "model": imported.ir.name,
        "frontend": imported.ir.source,
        "operators": imported.n_operators,
        "nodes": g.n_nodes,
        "edges": g.n_edges,
        "backward_nodes": int(g.is_backward.sum()),
        "training_graph": "autograd" if imported.autograd else ("synthesised" if g.is_training else None),
        "orphan_backward_nodes": list(imported.orphans),
        "parameter_bytes": float(g.node_param_bytes().sum()),
        "gflops": imported.total_flops / 1e9,
        "cpu_time_ms": float(g.time_on("cpu").sum()),
        "cpu_time_source": "measured" if imported.measured else "estimated",
        "accelerator_time_ms": float(g.time_on("accelerator").sum()),
        "memory_bytes": float(g.memory_bytes.sum()),
        "unknown_operator_types": imported.unknown_ops,
        "pricing": imported.cost_model.describe(),
        "cluster": cluster.name,
    }


def cluster_summary(cluster: Cluster) -> dict[str, Any]:
    """Devices, links and matrices of a cluster (what ``dnnpart cluster show`` prints).

    Examples
    --------
    >>> from dnnpart.cost import resolve_cluster
    >>> s = cluster_summary(resolve_cluster("2xA100").cluster)
    >>> [d["name"] for d in s["devices"]], s["routed"]
    (['acc0', 'acc1'], False)
    """
    return {
        "name": cluster.name,
        "devices": [{"name": d.name, "kind": d.kind, "memory_bytes": d.memory_bytes,
                     "speed": d.speed, "group": int(g)}
                    for d, g in zip(cluster.devices, cluster.group.tolist(), strict=True)],
        "links": [{"a": cluster.devices[x.a].name, "b": cluster.devices[x.b].name,
                   "bandwidth": x.bandwidth, "latency": x.latency, "kind": x.kind}
                  for x in cluster.links],
        "routed": bool(cluster.links),
        "bandwidth": cluster.bandwidth.tolist(),
        "latency": cluster.latency.tolist(),
    }
