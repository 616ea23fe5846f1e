"""Plain placement files (operator -> device) and the plan -> operator mapping."""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.frontends.build import ImportedModel
from dnnpart.plan import Plan
from dnnpart.problem import Problem

PLACEMENT_FORMAT = "dnnpart.placement"


def operator_devices(imported: ImportedModel, plan: Plan) -> dict[str, int]:
    """Device of every forward operator, by its source name (fx node / ONNX node name).

    Backward nodes of a training graph are colocated with their forward partners, so the
    forward placement is the whole story for running the model.
    """
    graph = imported.graph
    forward = np.flatnonzero(~graph.is_backward)
    devices = {graph.names[v]: int(plan.assignment[v]) for v in forward}
    if imported.members is not None:  # a node of a --granularity module graph: its operators
        devices = {op: dev for name, dev in devices.items() for op in imported.members.get(name, (name,))}
    return devices


def placement_dict(problem: Problem, imported: ImportedModel, plan: Plan) -> dict[str, Any]:
    """Placement file content: one entry per forward operator, in model order.

    Examples
    --------
    >>> # {"format": "dnnpart.placement", "devices": [...], "nodes": [{"name": "conv1",
    >>> #  "device": "acc0", "op_type": "conv", "module_path": "conv1"}, ...]}
    """
    devices = operator_devices(imported, plan)
    names = [d.name for d in problem.cluster.devices]
    return {
        "format": PLACEMENT_FORMAT,
        "version": 1,
        "model": imported.ir.name,
        "devices": [{"name": d.name, "kind": d.kind} for d in problem.cluster.devices],
        "nodes": [
            {
                "name": op.name,
                "device": names[devices[op.name]],
                "op_type": op.op_type,
                "module_path": op.module_path,
            }
            for op in imported.ir.ops
        ],
    }
