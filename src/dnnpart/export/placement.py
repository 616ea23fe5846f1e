"""Plain placement files (operator -> device) and the plan -> operator mapping.

A plan places the nodes of the graph that was priced; running it places the operators of the
graph module that runs. :func:`operator_devices` reads the first off a plan,
:func:`align_forward` pairs the two graphs' operator names where they differ (training
graphs), and :func:`complete_placement` places what the priced graph did not have.
"""

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


def placement_lines(problem: Problem, plan: Plan) -> list[str]:
    """``name device`` lines, one per node of the graph in node order (PARDNN's output form).

    A node whose name is empty, holds whitespace or repeats another's is written by its
    original id instead, so that every line names exactly one node.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 2.0, 3.0], n_accelerators=2)
    >>> placement_lines(p, Plan(assignment=[0, 0, 1]))
    ['0 acc0', '1 acc0', '2 acc1']
    """
    graph = problem.graph
    names = [d.name for d in problem.cluster.devices]
    counts: dict[str, int] = {}
    for name in graph.names:
        counts[name] = counts.get(name, 0) + 1
    lines = []
    for v, name in enumerate(graph.names):
        if not name or any(ch.isspace() for ch in name) or counts[name] > 1:
            name = str(int(graph.original_ids[v]))
        lines.append(f"{name} {names[int(plan.assignment[v])]}")
    return lines


#: aten ops of the exported module -> the op the training graph's ``make_fx`` replay records
#: for them (aligned as one kind; the replay's extra ``getitem``/``t`` nodes stay unmatched).
_SAME_OP = {
    "conv1d": "convolution", "conv2d": "convolution", "conv3d": "convolution",
    "batch_norm": "native_batch_norm", "_native_batch_norm_legit_no_training": "native_batch_norm",
    "_native_batch_norm_legit_functional": "native_batch_norm",
    "layer_norm": "native_layer_norm", "group_norm": "native_group_norm",
    "max_pool2d": "max_pool2d_with_indices", "dropout": "native_dropout",
    "linear": "mm", "addmm": "mm",
}


def align_forward(gm: Any, ops: list[tuple[str, str]]) -> dict[str, str]:
    """Map forward operator names of a training graph onto the nodes of the graph module run.

    The training graph is a ``make_fx`` replay of the exported module, so its node names are
    its own (``addmm_1`` there need not be ``addmm_1`` in the module) and a few nodes differ
    (casts and assertions dropped, dropout replaced). ``ops`` is ``(name, aten op)`` in model
    order; the two aten-op sequences are aligned (longest matching blocks, ``difflib``; an op
    and its decomposed form, ``conv2d`` and ``convolution``, count as one) and matched nodes
    paired. Unmatched module nodes are left to :func:`complete_placement`.

    Examples
    --------
    >>> align_forward(None, [])
    {}
    """
    import difflib

    from dnnpart.cost.ops import aten_op_name

    if gm is None:
        return {}
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    a = [_SAME_OP.get(t, t) for _, t in ops]
    b = [_SAME_OP.get(t, t) for t in (aten_op_name(n.target) for n in nodes)]
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    pairs: dict[str, str] = {}
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            pairs[ops[block.a + i][0]] = nodes[block.b + i].name
    return pairs


def complete_placement(gm: Any, device_of: dict[str, int]) -> dict[str, int]:
    """Give every operator of ``gm`` missing from ``device_of`` a device: that of the placed
    operators of its innermost module that has any, where they all share one device, else its
    producer's.

    An operator without placed producers takes its first placed consumer's device (device 0
    if it has none). The result has one entry per operator of ``gm``, in graph order. The
    module comes first because an unplaced operator opening a module (a block's first
    ``layer_norm``, which the training graph decomposes and the alignment leaves unmatched)
    belongs with that module's stage, not with the stage of the block before it.

    A model planned on the meta device (``hf:``) is captured again with real weights to run;
    the two captures can differ in a few layout-only nodes (``contiguous`` after a transpose
    whose strides the meta kernels report differently): such a node runs where its producer
    runs.

    Examples
    --------
    >>> import pytest; torch = pytest.importorskip("torch")
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return (x.relu() + 1).sin()
    >>> gm = torch.fx.symbolic_trace(Net())
    >>> [n.name for n in gm.graph.nodes if n.op.startswith("call")]
    ['relu', 'add', 'sin']
    >>> complete_placement(gm, {"add": 1})
    {'relu': 1, 'add': 1, 'sin': 1}
    """
    ops = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]
    placed = dict(device_of)
    by_module = _module_devices(ops, placed)
    missing = []
    for n in ops:
        if n.name in placed:
            continue
        dev = _module_device(n, by_module)
        if dev is None:
            dev = next((placed[a.name] for a in n.all_input_nodes if a.name in placed), None)
        if dev is None:
            missing.append(n)
        else:
            placed[n.name] = dev
    for n in reversed(missing):
        placed[n.name] = next((placed[u.name] for u in n.users if u.name in placed), 0)
    return {n.name: placed[n.name] for n in ops}


def _module_paths(node: Any) -> list[str]:
    """The modules ``node`` lies in, innermost first (``nn_module_stack``; none for fx traces)."""
    stack = node.meta.get("nn_module_stack") or {}
    return [str(v[0]) for v in reversed(list(stack.values())) if v and v[0]]


def _module_devices(ops: list[Any], placed: dict[str, int]) -> dict[str, set[int]]:
    """Devices of the placed operators under every module."""
    out: dict[str, set[int]] = {}
    for n in ops:
        if n.name in placed:
            for path in _module_paths(n):
                out.setdefault(path, set()).add(placed[n.name])
    return out


def _module_device(node: Any, by_module: dict[str, set[int]]) -> int | None:
    """The one device of the innermost module of ``node`` with placed operators, if one."""
    for path in _module_paths(node):
        devices = by_module.get(path)
        if devices:
            return next(iter(devices)) if len(devices) == 1 else None
    return None
