"""Plan files: our versioned ``dnnpart.plan`` JSON, and paper 1's expert split files.

``dnnpart.plan`` (version 2; version 1 files read as before)::

    {"format": "dnnpart.plan", "version": 1,
     "problem": "bert_l-3_inference", "method": "dp", "status": "optimal",
     "objective": 27.92, "bound": 27.92,
     "devices": [{"name": "acc0", "kind": "accelerator", "nodes": [1, 2, 5],
                  "subgraphs": [[1, 2], [5]]},
                 {"name": "acc1", "kind": "accelerator", "nodes": [], "replica_of": "acc0"},
                 ...]}

Nodes are referred to by their original ids; ``subgraphs`` (optional) lists a device's
subgraphs in execution order; ``replica_of`` (optional, paper 1 appendix C.2) names the
device whose stage this device replicates (it then lists no nodes). Version 1 readers that
predate ``replica_of`` ignore it; files without it read as before. ``pipeline_copy``
(optional, paper 4; integer) is the pipeline copy a device of a replication group serves, which
is also its position in the group's all-reduce ring (:class:`~dnnpart.plan.Plan`); a group
numbers its devices ``0 .. r-1``. Files without it keep copies in device-index order.

Version 2 adds ``"cluster"``: the resolved cluster the plan was made for, in the explicit form
of a cluster file (:func:`~dnnpart.io.cluster_file.cluster_to_dict`: devices, matrices as
routed, links), so that a plan keeps its meaning when the defaults behind a ``--cluster SPEC``
change (``4xA100`` once added a host CPU). :func:`plan_cluster` reads it back; the CLI scores
a plan on it when no ``--cluster`` is given.

Version 3 adds ``"layer_configs"`` (layer-wise parallelism, paper 3): one entry per node,
``{"node": ID, "degrees": [n, c, h, w], "devices": ["acc0", "acc1", ...]}`` -- the degrees of
the node's output dimensions and the device of each tile (row-major tile order); the node is
listed under its first tile's device in ``devices``. Plans without layer configurations are
still written as version 2, so readers of version 2 keep reading them.

Expert files (``{"fpgas": [{"nodes": [...]}], "cpus": [...]}``) map ``fpgas[i]`` to the
i-th accelerator and ``cpus[j]`` to the j-th CPU.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import FormatError
from dnnpart.graph.core import NO_CLASS, Graph
from dnnpart.io import fields as f
from dnnpart.io.dnn_partitioning import write_json_atomic
from dnnpart.plan import LayerConfig, Plan, SolveResult
from dnnpart.problem import Problem

PLAN_FORMAT = "dnnpart.plan"
PLAN_VERSION = 2
#: Version of plans with per-layer configurations (``layer_configs``).
PLAN_VERSION_LAYERWISE = 3
#: Plan versions this dnnpart reads (1: without the resolved cluster; 3: layer configurations).
READABLE_VERSIONS = (1, 2, 3)
UNPLACED = -1


def parse_plan(
    data: Any, problem: Problem, source: str = "<plan>", *, fill_by_colocation: bool = False
) -> Plan:
    """Validate a parsed plan (either format) against ``problem``.

    ``fill_by_colocation`` places nodes the file leaves out on the device of their colocation
    class (paper 1 evaluates training graphs with inference splits this way).
    """
    root = f.require_mapping(data, source)
    graph, cluster = problem.graph, problem.cluster
    assignment = np.full(graph.n_nodes, UNPLACED, dtype=np.int64)
    subgraph = np.zeros(graph.n_nodes, dtype=np.int64)
    has_subgraphs = False
    replica_of: np.ndarray | None = None
    copies: dict[int, tuple[str, int]] = {}  # device -> (field path, pipeline copy)
    lists: list[tuple[str, int, list[Any]]] = []  # (field path, device index, ids)
    parts: list[tuple[str, int, list[np.ndarray]]] = []  # (field path, device, subgraph nodes)

    if "fpgas" in root or "cpus" in root:
        for key, devices in (("fpgas", cluster.accelerators), ("cpus", cluster.cpus)):
            for i, entry in enumerate(f.require_list(root.get(key, []), key)):
                where = f"{key}[{i}]"
                ids = f.require_list(f.require_mapping(entry, where).get("nodes", []), f"{where}.nodes")
                if i >= len(devices):
                    if ids:
                        raise FormatError(
                            f"{where}: the cluster has only {len(devices)} "
                            f"{'accelerators' if key == 'fpgas' else 'CPUs'}"
                        )
                    continue
                lists.append((f"{where}.nodes", devices[i], ids))
    elif root.get("format") == PLAN_FORMAT:
        version = f.integer(root.get("version"), "version")
        if version not in READABLE_VERSIONS:
            raise FormatError(f"version: this dnnpart reads plan versions {list(READABLE_VERSIONS)}, "
                              f"got {version}")
        for i, entry in enumerate(f.require_list(root.get("devices"), "devices")):
            where = f"devices[{i}]"
            entry = f.require_mapping(entry, where)
            name = f.text(entry.get("name"), f"{where}.name")
            try:
                dev = cluster.index(name)
            except KeyError as exc:
                raise FormatError(f"{where}.name: {exc.args[0]}") from None
            ids = f.require_list(entry.get("nodes", []), f"{where}.nodes")
            lists.append((f"{where}.nodes", dev, ids))
            if entry.get("replica_of") is not None:
                replica_of = _read_replica(cluster, entry, where, dev, ids, replica_of)
            if entry.get("pipeline_copy") is not None:
                copies[dev] = (f"{where}.pipeline_copy",
                               f.integer(entry["pipeline_copy"], f"{where}.pipeline_copy"))
            if "subgraphs" in entry:
                has_subgraphs = True
                listed = f.require_list(entry["subgraphs"], f"{where}.subgraphs")
                parts.append((f"{where}.subgraphs", dev, [
                    _indices(graph, f.require_list(part, f"{where}.subgraphs[{j}]"),
                             f"{where}.subgraphs[{j}]")
                    for j, part in enumerate(listed)
                ]))
    else:
        raise FormatError(
            f"{source}: not a plan: expected a dnnpart plan (\"format\": \"{PLAN_FORMAT}\") "
            "or an expert split (\"fpgas\"/\"cpus\" lists)"
        )

    for where, dev, ids in lists:
        idx = _indices(graph, ids, where)
        again = idx[assignment[idx] != UNPLACED]
        if again.size:
            raise FormatError(f"{where}: node {graph.label(int(again[0]))} is placed twice")
        assignment[idx] = dev
    for where, dev, device_parts in parts:
        _check_subgraphs(graph, assignment, where, dev, device_parts)
        for j, idx in enumerate(device_parts):
            subgraph[idx] = j

    if fill_by_colocation:
        _fill_by_colocation(problem, assignment)
    missing = np.flatnonzero(assignment == UNPLACED)
    if missing.size:
        hint = "" if fill_by_colocation else (
            "; to place them with their colocation class use --fill-by-colocation"
        )
        raise FormatError(
            f"{source}: {missing.size} node(s) are not placed, e.g. {graph.label(int(missing[0]))}{hint}"
        )
    if replica_of is not None:
        _check_replicas(cluster, replica_of)
    configs = None
    if root.get("format") == PLAN_FORMAT and root.get("layer_configs") is not None:
        configs = _read_layer_configs(problem, root["layer_configs"], assignment)
    pipeline_copy = _pipeline_copies(cluster, replica_of, copies) if copies else None
    return Plan(assignment=assignment.astype(np.int32),
                subgraph=subgraph.astype(np.int32) if has_subgraphs else None,
                replica_of=None if replica_of is None else replica_of.astype(np.int32),
                pipeline_copy=pipeline_copy, layer_configs=configs)


def _pipeline_copies(
    cluster: Cluster, replica_of: np.ndarray | None, copies: dict[int, tuple[str, int]]
) -> np.ndarray:
    """Per device its pipeline copy; every group must number its devices ``0 .. r-1``."""
    if replica_of is None:
        where = next(iter(copies.values()))[0]
        raise FormatError(f"{where}: pipeline copies need replication groups (replica_of)")
    out = np.zeros(cluster.n_devices, dtype=np.int32)
    for dev, (_where, c) in copies.items():
        out[dev] = c
    for p in np.unique(replica_of).tolist():
        members = np.flatnonzero(replica_of == p)
        if members.size == 1 and int(members[0]) not in copies:
            continue
        absent = [int(m) for m in members if int(m) not in copies]
        if absent:
            raise FormatError(f"{cluster.devices[absent[0]].name}: pipeline_copy missing (its group "
                              f"with {cluster.devices[p].name} numbers its copies)")
        got = sorted(out[members].tolist())
        if got != list(range(members.size)):
            raise FormatError(f"{copies[int(members[0])][0]}: the group of "
                              f"{cluster.devices[p].name} must number its {members.size} copies "
                              f"0..{members.size - 1}, got {got}")
    return out



def _read_layer_configs(problem: Problem, data: Any, assignment: np.ndarray) -> tuple[LayerConfig, ...]:
    graph, cluster = problem.graph, problem.cluster
    found: list[LayerConfig | None] = [None] * graph.n_nodes
    for i, entry in enumerate(f.require_list(data, "layer_configs")):
        where = f"layer_configs[{i}]"
        entry = f.require_mapping(entry, where)
        v = int(_indices(graph, [entry.get("node")], f"{where}.node")[0])
        if found[v] is not None:
            raise FormatError(f"{where}.node: node {graph.label(v)} is configured twice")
        degrees = [f.integer(x, f"{where}.degrees[{k}]", minimum=1)
                   for k, x in enumerate(f.require_list(entry.get("degrees"), f"{where}.degrees"))]
        if len(degrees) != 4:
            raise FormatError(f"{where}.degrees: expected 4 degrees (n, c, h, w), got {len(degrees)}")
        devices = []
        for k, name in enumerate(f.require_list(entry.get("devices"), f"{where}.devices")):
            try:
                devices.append(cluster.index(f.text(name, f"{where}.devices[{k}]")))
            except KeyError as exc:
                raise FormatError(f"{where}.devices[{k}]: {exc.args[0]}") from None
        try:
            found[v] = LayerConfig(tuple(degrees), tuple(devices))
        except ValueError as exc:
            raise FormatError(f"{where}: {exc}") from None
        if devices[0] != assignment[v]:
            raise FormatError(f"{where}.devices: node {graph.label(v)}'s first tile is on "
                              f"{cluster.devices[devices[0]].name}, but the plan lists it under "
                              f"{cluster.devices[int(assignment[v])].name}")
    missing = [v for v, c in enumerate(found) if c is None]
    if missing:
        raise FormatError(f"layer_configs: {len(missing)} node(s) have no configuration, "
                          f"e.g. {graph.label(missing[0])}")
    return tuple(c for c in found if c is not None)


def _read_replica(
    cluster: Cluster, entry: dict[str, Any], where: str, dev: int, ids: list[Any],
    replica_of: np.ndarray | None,
) -> np.ndarray:
    name = f.text(entry["replica_of"], f"{where}.replica_of")
    try:
        primary = cluster.index(name)
    except KeyError as exc:
        raise FormatError(f"{where}.replica_of: {exc.args[0]}") from None
    if ids:
        raise FormatError(f"{where}.nodes: a replica (replica_of {name!r}) lists no nodes of its own")
    if cluster.devices[primary].kind != cluster.devices[dev].kind:
        raise FormatError(f"{where}.replica_of: {name!r} is a {cluster.devices[primary].kind}, "
                          f"this device a {cluster.devices[dev].kind}")
    if replica_of is None:
        replica_of = np.arange(cluster.n_devices, dtype=np.int64)
    replica_of[dev] = primary
    return replica_of


def _check_replicas(cluster: Cluster, replica_of: np.ndarray) -> None:
    chained = np.flatnonzero(replica_of[replica_of] != replica_of)
    if chained.size:
        j = int(chained[0])
        raise FormatError(
            f"{cluster.devices[j].name}: replica_of {cluster.devices[replica_of[j]].name!r}, "
            "itself a replica; name the group's primary device (the one holding the nodes)"
        )


def _check_subgraphs(
    graph: Graph, assignment: np.ndarray, where: str, dev: int, parts: list[np.ndarray]
) -> None:
    """A device's subgraphs must partition exactly the nodes the device is given."""
    seen = np.zeros(graph.n_nodes, dtype=bool)
    for j, idx in enumerate(parts):
        foreign = idx[assignment[idx] != dev]
        if foreign.size:
            raise FormatError(f"{where}[{j}]: node {graph.label(int(foreign[0]))} is not among "
                              "this device's nodes")
        twice = idx[seen[idx]]
        if twice.size:
            raise FormatError(f"{where}[{j}]: node {graph.label(int(twice[0]))} is listed in two subgraphs")
        seen[idx] = True
    left_out = np.flatnonzero((assignment == dev) & ~seen)
    if left_out.size:
        raise FormatError(f"{where}: node {graph.label(int(left_out[0]))} of this device is in no subgraph")


def read_plan(path: str | Path, problem: Problem, *, fill_by_colocation: bool = False) -> Plan:
    """Read a plan file (format auto-detected)."""
    return parse_plan(f.read_json(path), problem, str(path), fill_by_colocation=fill_by_colocation)


def plan_to_dict(problem: Problem, plan: Plan, result: SolveResult | None = None) -> dict[str, Any]:
    """Our versioned plan format."""
    graph, cluster = problem.graph, problem.cluster
    ids = graph.original_ids
    devices = []
    for d, dev in enumerate(cluster.devices):
        nodes = plan.device_nodes(d)
        entry: dict[str, Any] = {"name": dev.name, "kind": dev.kind, "nodes": ids[nodes].tolist()}
        if plan.subgraph is not None and nodes.size:
            ords = plan.subgraph[nodes]
            entry["subgraphs"] = [ids[nodes[ords == o]].tolist() for o in np.unique(ords)]
        if plan.replica_of is not None and plan.replica_of[d] != d:
            entry["replica_of"] = cluster.devices[int(plan.replica_of[d])].name
        if plan.pipeline_copy is not None and plan.replicas(d).size > 1:
            entry["pipeline_copy"] = int(plan.pipeline_copy[d])
        devices.append(entry)
    version = PLAN_VERSION if plan.layer_configs is None else PLAN_VERSION_LAYERWISE
    out: dict[str, Any] = {"format": PLAN_FORMAT, "version": version, "problem": problem.name}
    if result is not None:
        out.update(
            method=result.method,
            status=result.status.value,
            objective=result.objective if math.isfinite(result.objective) else None,
            bound=result.bound,
            search_space=result.search_space,
            provenance=result.provenance or result.method,
        )
        if result.stats.get("stopped"):  # "interrupted" or "time-limit": the best plan so far
            out["stopped"] = result.stats["stopped"]
    out["devices"] = devices
    if plan.layer_configs is not None:
        out["layer_configs"] = [
            {"node": int(ids[v]), "degrees": list(c.degrees),
             "devices": [cluster.devices[d].name for d in c.devices]}
            for v, c in enumerate(plan.layer_configs)
        ]
    from dnnpart.io.cluster_file import cluster_to_dict

    out["cluster"] = cluster_to_dict(cluster)
    return out


def plan_cluster(path: str | Path) -> Cluster | None:
    """The resolved cluster stored in a version-2 plan file, ``None`` for other plans.

    Examples
    --------
    >>> import json, tempfile, os
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0], n_accelerators=2)
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.json")
    >>> write_plan(p, Plan(assignment=[0, 1]), path)
    >>> [d.name for d in plan_cluster(path).devices]
    ['acc0', 'acc1']
    """
    root = f.read_json(path)
    if not isinstance(root, dict) or root.get("format") != PLAN_FORMAT or "cluster" not in root:
        return None
    from dnnpart.io.cluster_file import parse_cluster

    return parse_cluster(root["cluster"], f"{path}: cluster")


def write_plan(problem: Problem, plan: Plan, path: str | Path, result: SolveResult | None = None) -> None:
    """Write a plan in our versioned format, atomically."""
    write_json_atomic(plan_to_dict(problem, plan, result), path)


def _indices(graph: Graph, ids: list[Any], where: str) -> npt.NDArray[np.int64]:
    parsed = [f.integer(x, f"{where}[{i}]") for i, x in enumerate(ids)]
    try:
        idx = graph.index_of(parsed)
    except KeyError:
        known = set(graph.original_ids.tolist())
        i = next(i for i, x in enumerate(parsed) if x not in known)
        raise FormatError(f"{where}[{i}]: unknown node id {parsed[i]}") from None
    if np.unique(idx).size != idx.size:
        raise FormatError(f"{where}: lists a node id twice")
    return idx


def _fill_by_colocation(problem: Problem, assignment: np.ndarray) -> None:
    cls = problem.graph.color_class
    placed = (assignment != UNPLACED) & (cls != NO_CLASS)
    device_of_class = dict(zip(cls[placed].tolist(), assignment[placed].tolist(), strict=True))
    for v in np.flatnonzero((assignment == UNPLACED) & (cls != NO_CLASS)):
        dev = device_of_class.get(int(cls[v]))
        if dev is not None:
            assignment[v] = dev
