"""The JSON format of paper 1's reference workloads (``dnn-partitioning``).

One object with ``maxSizePerFPGA`` (accelerator memory, bytes), ``maxFPGAs`` (k),
``maxCPUs`` (l), ``nodes[]`` (``id``, ``supportedOnFpga``, ``cpuLatency``, ``fpgaLatency``,
``isBackwardNode``, optional ``colorClass``, ``size``, ``name``, ``layerId``) and ``edges[]``
(``sourceId``, ``destId``, ``cost``). Times are in the file's unit (milliseconds in the
published workloads); dnnpart keeps them as they are.

dnnpart's own extension (format version 2, written as ``"dnnpartFormatVersion": 2``; files
without it are version 1 and load unchanged) adds optional per-node fields, each absent =
the Graph array is ``None``: ``opType``, ``modulePath``, ``memoryClass`` (one of
``normal``/``residual``/``reference``/``control``), ``paramBytes``, ``outputBytes``, ``pin``
(a device-kind name, ``cpu`` or ``accelerator``), ``forwardOf`` (the original id of the
forward node a backward node differentiates) and ``layer`` (``{"kind", "outputShape",
"kernel", "stride", "padding"}``, lists of integers). A field given on some nodes only takes
its default on the others.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.devices.cluster import Cluster
from dnnpart.devices.presets import reference_cluster
from dnnpart.errors import FormatError, InvalidGraphError, UsageError
from dnnpart.graph.core import (
    LAYER_TUPLE_FIELDS,
    MEMORY_CLASSES,
    NO_CLASS,
    NO_FORWARD,
    NO_PIN,
    Graph,
    LayerAttrs,
    build_graph,
)
from dnnpart.io import fields as f
from dnnpart.limits import check_device_count
from dnnpart.problem import Objective, Problem

CLUSTER_KEYS = ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")
#: Version of dnnpart's extension this module writes; files without the key are version 1.
JSON_FORMAT_VERSION = 2
VERSION_KEY = "dnnpartFormatVersion"
_LAYER_KEYS = {"output_shape": "outputShape", "kernel": "kernel", "stride": "stride",
               "padding": "padding", "inputs": "inputs"}


def looks_like_reference(data: Any) -> bool:
    """Whether parsed JSON is in this format (the auto-detection used by the CLI)."""
    return isinstance(data, dict) and "nodes" in data and (
        "edges" in data or any(k in data for k in CLUSTER_KEYS)
    )


def parse_graph(data: Any, source: str = "<data>") -> Graph:
    """Validate parsed JSON and build the graph; errors name the field and the node."""
    root = f.require_mapping(data, source)
    if "nodes" not in root:
        raise FormatError("nodes: missing (required)")
    nodes = f.require_list(root["nodes"], "nodes")
    edges = f.require_list(root.get("edges", []), "edges")
    if not nodes:
        raise FormatError("nodes: the graph has no nodes")
    for i, node in enumerate(nodes):
        f.require_mapping(node, f"nodes[{i}]")
    for i, edge in enumerate(edges):
        f.require_mapping(edge, f"edges[{i}]")

    ids = f.column(nodes, "nodes", "id", f.integer)
    supported = f.column(nodes, "nodes", "supportedOnFpga", f.flag, default=True)
    cpu = f.column(nodes, "nodes", "cpuLatency", f.number)
    # An unsupported node's accelerator time is irrelevant and may be absent.
    acc = [
        f.number(n["fpgaLatency"], f"nodes[{i}].fpgaLatency") if "fpgaLatency" in n
        else _require_if(ok, f"nodes[{i}].fpgaLatency")
        for i, (n, ok) in enumerate(zip(nodes, supported, strict=True))
    ]
    backward = f.column(nodes, "nodes", "isBackwardNode", f.flag, default=False)
    color = f.column(nodes, "nodes", "colorClass", _optional_int, default=NO_CLASS)
    layer = f.column(nodes, "nodes", "layerId", _optional_int, default=NO_CLASS)
    size = f.column(nodes, "nodes", "size", f.number, default=0.0)
    names = f.column(nodes, "nodes", "name", f.text, default=None)
    src = f.column(edges, "edges", "sourceId", f.integer)
    dst = f.column(edges, "edges", "destId", f.integer)
    cost = f.column(edges, "edges", "cost", f.number)
    version = root.get(VERSION_KEY, 1)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= JSON_FORMAT_VERSION:
        raise FormatError(f"{VERSION_KEY}: expected an integer 1..{JSON_FORMAT_VERSION}, got "
                          f"{f.describe(version)}")
    extra = _phase2_columns(nodes)
    ebytes = f.column(edges, "edges", "bytes", f.number, default=math.nan) if any(
        "bytes" in e for e in edges) else None

    seen: dict[int, int] = {}
    for i, node_id in enumerate(ids):
        if node_id in seen:
            raise FormatError(f"nodes[{i}].id: duplicate id {node_id} (also nodes[{seen[node_id]}])")
        seen[node_id] = i
    for role, ends in (("sourceId", src), ("destId", dst)):
        for e, node_id in enumerate(ends):
            if node_id not in seen:
                raise FormatError(f"edges[{e}].{role}: unknown node id {node_id}")

    acc_time = np.where(np.asarray(supported, dtype=bool), np.asarray(acc, dtype=float), math.inf)
    try:
        return build_graph(
            ids, src, dst,
            compute_time=np.column_stack([np.asarray(cpu, dtype=float), acc_time]),
            edge_cost=cost,
            memory_bytes=size,
            is_backward=backward,
            color_class=color,
            layer_id=layer,
            names=[str(i) if n is None else n for i, n in zip(ids, names, strict=True)],
            edge_bytes=ebytes,
            **extra,
        )
    except InvalidGraphError as exc:
        raise FormatError(f"{source}: {exc}") from None


def _phase2_columns(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The optional version-2 node fields as build_graph keyword arguments."""
    def has(key: str) -> bool:
        return any(key in n for n in nodes)

    out: dict[str, Any] = {}
    if has("opType"):
        out["op_types"] = f.column(nodes, "nodes", "opType", f.text, default="")
    if has("modulePath"):
        out["module_paths"] = f.column(nodes, "nodes", "modulePath", f.text, default="")
    if has("memoryClass"):
        out["memory_class"] = f.column(nodes, "nodes", "memoryClass", _memory_class, default=0)
    if has("paramBytes"):
        out["param_bytes"] = f.column(nodes, "nodes", "paramBytes", f.number, default=0.0)
    if has("outputBytes"):
        sizes = f.column(nodes, "nodes", "size", f.number, default=0.0)
        out["output_bytes"] = [
            f.number(n["outputBytes"], f"nodes[{i}].outputBytes") if "outputBytes" in n else sizes[i]
            for i, n in enumerate(nodes)
        ]
    if has("pin"):
        out["pin"] = f.column(nodes, "nodes", "pin", _pin, default=NO_PIN)
    if has("forwardOf"):
        out["forward_of"] = f.column(nodes, "nodes", "forwardOf", _optional_id, default=NO_FORWARD)
    if has("layer"):
        out["layer_attrs"] = _layer_attrs(nodes)
    return out


def _memory_class(value: Any, where: str) -> int:
    if value not in MEMORY_CLASSES:
        raise FormatError(f"{where}: expected one of {', '.join(MEMORY_CLASSES)}, got "
                          f"{f.describe(value)}")
    return MEMORY_CLASSES.index(value)


def _pin(value: Any, where: str) -> int:
    if value is None:
        return NO_PIN
    if value not in DEVICE_KIND_NAMES:
        raise FormatError(f"{where}: expected null or one of {', '.join(DEVICE_KIND_NAMES)}, got "
                          f"{f.describe(value)}")
    return DEVICE_KIND_NAMES.index(value)


def _optional_id(value: Any, where: str) -> int:
    return NO_FORWARD if value is None else f.integer(value, where)


def _int_tuple(value: Any, where: str) -> tuple[int, ...]:
    items = f.require_list(value, where)
    return tuple(f.integer(x, f"{where}[{i}]") for i, x in enumerate(items))


def _layer_attrs(nodes: list[dict[str, Any]]) -> LayerAttrs:
    n = len(nodes)
    kinds = [""] * n
    tuples: dict[str, list[tuple[int, ...]]] = {name: [()] * n for name in LAYER_TUPLE_FIELDS}
    for i, node in enumerate(nodes):
        if "layer" not in node:
            continue
        layer = f.require_mapping(node["layer"], f"nodes[{i}].layer")
        kinds[i] = f.text(layer.get("kind", ""), f"nodes[{i}].layer.kind")
        for name, key in _LAYER_KEYS.items():
            if key in layer:
                tuples[name][i] = _int_tuple(layer[key], f"nodes[{i}].layer.{key}")
    return LayerAttrs(kind=tuple(kinds), **{k: tuple(v) for k, v in tuples.items()})


def phase2_node_fields(g: Graph, v: int) -> dict[str, Any]:
    """The version-2 fields of node ``v`` that ``g`` carries (for writers)."""
    node: dict[str, Any] = {}
    if g.op_types is not None:
        node["opType"] = g.op_types[v]
    if g.module_paths is not None:
        node["modulePath"] = g.module_paths[v]
    if g.memory_class is not None:
        node["memoryClass"] = MEMORY_CLASSES[int(g.memory_class[v])]
    if g.param_bytes is not None:
        node["paramBytes"] = float(g.param_bytes[v])
    if g.output_bytes is not None:
        node["outputBytes"] = float(g.output_bytes[v])
    if g.pin is not None:
        pin = int(g.pin[v])
        node["pin"] = None if pin == NO_PIN else g.device_kinds[pin]
    if g.forward_of is not None:
        fwd = int(g.forward_of[v])
        node["forwardOf"] = None if fwd == NO_FORWARD else int(g.original_ids[fwd])
    if g.layer_attrs is not None:
        a = g.layer_attrs
        node["layer"] = {"kind": a.kind[v]} | {
            key: list(getattr(a, name)[v]) for name, key in _LAYER_KEYS.items()
        }
    return node


def parse_cluster(data: Any) -> Cluster | None:
    """The reference cluster of the file (``None`` when the file carries no cluster)."""
    root = f.require_mapping(data, "<root>")
    if not any(k in root for k in CLUSTER_KEYS):
        return None
    memory = f.number(root.get("maxSizePerFPGA", math.inf), "maxSizePerFPGA", allow_inf=True)
    k = f.integer(root.get("maxFPGAs", 0), "maxFPGAs", minimum=0)
    cpus = f.integer(root.get("maxCPUs", 0), "maxCPUs", minimum=0)
    if k + cpus == 0:
        raise FormatError("maxFPGAs, maxCPUs: the cluster has no devices (both are 0)")
    check_device_count(k + cpus, "maxFPGAs + maxCPUs")
    return reference_cluster(n_accelerators=k, n_cpus=cpus, memory_bytes=memory)


def parse_problem(
    data: Any, source: str = "<data>", *, cluster: Cluster | None = None,
    objective: Objective | None = None,
) -> Problem:
    """Graph and cluster from parsed JSON; ``cluster`` overrides the file's."""
    graph = parse_graph(data, source)
    file_cluster = parse_cluster(data)
    chosen = cluster if cluster is not None else file_cluster
    if chosen is None:
        raise FormatError(
            f"{source}: no cluster in the file (maxFPGAs/maxCPUs/maxSizePerFPGA); pass one"
        )
    return Problem(graph=graph, cluster=chosen, objective=objective or Objective(),
                   name=Path(source).stem)


def read_problem(
    path: str | Path, *, cluster: Cluster | None = None, objective: Objective | None = None
) -> Problem:
    """Read a dnn-partitioning JSON file.

    Examples
    --------
    >>> import json, tempfile, os
    >>> doc = {"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 1,
    ...        "nodes": [{"id": 1, "cpuLatency": 5, "fpgaLatency": 1},
    ...                  {"id": 2, "cpuLatency": 5, "fpgaLatency": 1}],
    ...        "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]}
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "g.json")
    ...     _ = open(p, "w").write(json.dumps(doc))
    ...     problem = read_problem(p)
    >>> problem.graph.n_nodes, problem.cluster.n_accelerators
    (2, 2)
    """
    return parse_problem(f.read_json(path), str(path), cluster=cluster, objective=objective)


def problem_to_dict(problem: Problem) -> dict[str, Any]:
    """The problem in the reference format (reference clusters only: k identical accelerators)."""
    g, c = problem.graph, problem.cluster
    acc_mem = {c.devices[i].memory_bytes for i in c.accelerators}
    if len(acc_mem) > 1:
        raise UsageError("the reference format needs identical accelerator memories")
    cpu, acc = g.time_on("cpu"), g.time_on("accelerator")
    nodes = []
    for v in range(g.n_nodes):
        node: dict[str, Any] = {
            "id": int(g.original_ids[v]), "name": g.names[v],
            "supportedOnFpga": bool(np.isfinite(acc[v])),
            "cpuLatency": float(cpu[v]),
            "fpgaLatency": float(acc[v]) if np.isfinite(acc[v]) else 0.0,
            "isBackwardNode": bool(g.is_backward[v]),
            "size": float(g.memory_bytes[v]),
        }
        if g.color_class[v] != NO_CLASS:
            node["colorClass"] = int(g.color_class[v])
        if g.layer_id[v] != NO_CLASS:
            node["layerId"] = int(g.layer_id[v])
        node.update(phase2_node_fields(g, v))
        nodes.append(node)
    src = g.original_ids[g.edge_sources()]
    dst = g.original_ids[g.succ_idx]
    edges: list[dict[str, Any]] = [
        {"sourceId": int(s), "destId": int(t), "cost": float(w)}
        for s, t, w in zip(src, dst, g.edge_cost, strict=True)
    ]
    for edge, b in zip(edges, g.edge_bytes.tolist(), strict=True):
        if b == b:  # not nan: the bytes are known
            edge["bytes"] = b
    memory = acc_mem.pop() if acc_mem else 0.0
    return {
        VERSION_KEY: JSON_FORMAT_VERSION,
        "maxSizePerFPGA": memory if math.isfinite(memory) else 1e300,
        "maxFPGAs": c.n_accelerators,
        "maxCPUs": c.n_cpus,
        "nodes": nodes,
        "edges": edges,
    }


def write_problem(problem: Problem, path: str | Path) -> None:
    """Write the problem in the reference format, atomically."""
    write_json_atomic(problem_to_dict(problem), path)


def write_json_atomic(data: Any, path: str | Path, *, option: str = "--out") -> None:
    """Write JSON to ``path`` through the one output writer (:mod:`dnnpart.io.output_files`:
    atomic for a file, in place for a device or FIFO, ``-`` for standard output)."""
    # json.dumps without indent uses the C encoder (json.dump never does): ~10x faster
    write_text_atomic(json.dumps(data) + "\n", path, option=option)


def write_text_atomic(text: str, path: str | Path, *, option: str = "--out") -> None:
    """Write ``text`` to ``path`` through :func:`dnnpart.io.output_files.write_output`."""
    from dnnpart.io.output_files import write_output

    write_output(text, path, option=option)


#: Device-kind names a JSON ``pin`` may name (the Graph's default columns).
DEVICE_KIND_NAMES = ("cpu", "accelerator")


def _optional_int(value: Any, where: str) -> int:
    return NO_CLASS if value is None else f.integer(value, where)


def _require_if(needed: bool, where: str) -> float:
    if needed:
        raise FormatError(f"{where}: missing (required for nodes supported on accelerators)")
    return math.inf
