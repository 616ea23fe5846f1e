"""Which physical device runs which pipeline stage, written into every runtime export.

Runtimes give pipeline stage ``k`` to rank ``k`` and rank ``k`` to the ``k``-th visible GPU of
its node. A plan places stage ``k`` on a chosen device (Parmesan's topology-aware mapping
picks them); that choice survives the launch only if the visible GPUs are listed in stage
order. Each export therefore carries the rank order and, per node, the
``CUDA_VISIBLE_DEVICES`` string to launch with.

Choices: a device's GPU index is its position among the accelerators of its node (the
cluster's ``group``) in cluster order, so a preset ``4xA100`` maps ``acc2`` to GPU 2; a node is
a group. The ``deepspeed`` launcher sorts the GPU ids of ``--include`` and
``CUDA_VISIBLE_DEVICES`` (it keeps the set, not the order), so the DeepSpeed export says to
launch with ``torchrun`` (DeepSpeed reads the ranks ``torchrun`` sets).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LAUNCH_FORMAT = "dnnpart.launch"


def launch_map(cluster: Any, stage_devices: Sequence[int]) -> dict[str, Any]:
    """The rank of every stage and the ``CUDA_VISIBLE_DEVICES`` of every node.

    Parameters
    ----------
    cluster : the plan's :class:`~dnnpart.devices.Cluster`.
    stage_devices : the plan's device (index in ``cluster``) of each stage, in stage order.

    Examples
    --------
    >>> from dnnpart.devices import reference_cluster
    >>> m = launch_map(reference_cluster(n_accelerators=4, n_cpus=0, memory_bytes=1e9), [2, 0, 3])
    >>> m["CUDA_VISIBLE_DEVICES"], [r["device"] for r in m["ranks"]]
    ('2,0,3', ['acc2', 'acc0', 'acc3'])
    """
    devices = cluster.devices
    group = [int(g) for g in cluster.group] if len(cluster.group) else [0] * len(devices)
    gpu: dict[int, int] = {}
    seen: dict[int, int] = {}
    for d, dev in enumerate(devices):
        if dev.kind == "accelerator":
            gpu[d] = seen.get(group[d], 0)
            seen[group[d]] = gpu[d] + 1
    ranks = [{"rank": r, "stage": r, "device": devices[d].name, "node": group[d], "gpu": gpu.get(d)}
             for r, d in enumerate(stage_devices)]
    nodes = list(dict.fromkeys(row["node"] for row in ranks))
    per_node = {str(n): ",".join(str(row["gpu"]) for row in ranks if row["node"] == n) for n in nodes}
    contiguous = [row["node"] for row in ranks] == sorted((row["node"] for row in ranks), key=nodes.index)
    notes = []
    if any(row["gpu"] is None for row in ranks):
        notes.append("a stage runs on a CPU; CUDA_VISIBLE_DEVICES lists GPUs only")
    if not contiguous:
        notes.append("the stages alternate between nodes; torchrun numbers ranks node by node, "
                     "so set the node ranks by hand")
    return {
        "format": LAUNCH_FORMAT,
        "version": 1,
        "ranks": ranks,
        "CUDA_VISIBLE_DEVICES": per_node[str(nodes[0])] if len(nodes) == 1 else None,
        "CUDA_VISIBLE_DEVICES_per_node": per_node,
        "notes": notes,
    }


def visible_devices(launch: dict[str, Any]) -> str:
    """The ``CUDA_VISIBLE_DEVICES=...`` prefix of a launch command (first node when several)."""
    value = launch["CUDA_VISIBLE_DEVICES"]
    if value is None:
        value = next(iter(launch["CUDA_VISIBLE_DEVICES_per_node"].values()))
    return f"CUDA_VISIBLE_DEVICES={value}"


def launch_lines(launch: dict[str, Any]) -> list[str]:
    """Human-readable lines: ``rank k -> device (node n, GPU g)`` and the variable to set.

    Examples
    --------
    >>> from dnnpart.devices import reference_cluster
    >>> two = reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=1e9)
    >>> for line in launch_lines(launch_map(two, [1, 0])):
    ...     print(line)
    stage 0 -> rank 0 -> acc1 (GPU 1)
    stage 1 -> rank 1 -> acc0 (GPU 0)
    launch with CUDA_VISIBLE_DEVICES=1,0
    """
    multi = len(launch["CUDA_VISIBLE_DEVICES_per_node"]) > 1
    lines = []
    for row in launch["ranks"]:
        where = "CPU" if row["gpu"] is None else f"GPU {row['gpu']}"
        node = f"node {row['node']}, " if multi else ""
        lines.append(f"stage {row['stage']} -> rank {row['rank']} -> {row['device']} ({node}{where})")
    if multi:
        lines += [f"launch node {n} with CUDA_VISIBLE_DEVICES={v}"
                  for n, v in launch["CUDA_VISIBLE_DEVICES_per_node"].items()]
    else:
        lines.append(f"launch with {visible_devices(launch)}")
    return lines + [f"note: {n}" for n in launch["notes"]]
