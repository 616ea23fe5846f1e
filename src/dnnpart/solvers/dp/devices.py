"""What the throughput DP knows about a cluster: identical accelerators and identical CPUs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.problem import Problem
from dnnpart.solvers.dp.kernels import OVERLAP_CODES

#: Relative tolerance of the evaluator's memory check (``memory > capacity * (1 + 1e-12)``).
MEMORY_TOLERANCE = 1e-12


@dataclass(frozen=True, slots=True)
class DeviceModel:
    """What the DP needs to know about the (identical) accelerators and CPUs.

    ``acc_time``/``cpu_time``: each original node's time on one of them (``inf`` where it
    cannot run, and for a kind the cluster lacks); ``acc_cap``/``cpu_cap``: their memory
    with the evaluator's tolerance (``-1`` for a kind the cluster lacks); ``comm_scale``:
    the accelerators' host-link scale of transfer costs; ``overlap``: the objective's
    overlap mode as a kernel code.
    """

    accelerators: tuple[int, ...]
    cpus: tuple[int, ...]
    acc_time: npt.NDArray[np.float64]
    cpu_time: npt.NDArray[np.float64]
    acc_cap: float
    cpu_cap: float
    comm_scale: float
    overlap: int


def device_model(problem: Problem) -> DeviceModel:
    """The DP's view of ``problem``'s cluster; refuses (``ValueError``) clusters whose
    accelerators, or CPUs, differ in memory, speed or host link.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> m = device_model(chain_problem([4, 1], n_accelerators=2))
    >>> m.accelerators, m.cpus, m.acc_time.tolist()
    ((0, 1), (), [4.0, 1.0])
    """
    graph, cluster = problem.graph, problem.cluster
    accs, cpus = cluster.accelerators, cluster.cpus
    for group, label in ((accs, "accelerators"), (cpus, "CPUs")):
        if not group:
            continue
        first = cluster.devices[group[0]]
        for i in group[1:]:
            dev = cluster.devices[i]
            if (dev.memory_bytes, dev.speed) != (first.memory_bytes, first.speed) or (
                cluster.host_link_scale[i] != cluster.host_link_scale[group[0]]
            ):
                raise UsageError(
                    f"the DP needs identical {label} (memory, speed, host link); "
                    f"{first.name} and {dev.name} differ. Use the integer program for "
                    "heterogeneous clusters"
                )
    n = graph.n_nodes
    if accs:
        acc = cluster.devices[accs[0]]
        acc_time = graph.time_on(acc.kind) / acc.speed
        acc_cap = acc.memory_bytes * (1 + MEMORY_TOLERANCE)
        scale = float(cluster.host_link_scale[accs[0]])
    else:
        acc_time, acc_cap, scale = np.full(n, np.inf), -1.0, 0.0
    if cpus:
        cpu = cluster.devices[cpus[0]]
        cpu_time = graph.time_on(cpu.kind) / cpu.speed
        cpu_cap = cpu.memory_bytes * (1 + MEMORY_TOLERANCE)
    else:
        cpu_time, cpu_cap = np.full(n, np.inf), -1.0
    return DeviceModel(
        accelerators=accs, cpus=cpus, acc_time=np.ascontiguousarray(acc_time, np.float64),
        cpu_time=np.ascontiguousarray(cpu_time, np.float64), acc_cap=float(acc_cap),
        cpu_cap=float(cpu_cap), comm_scale=scale, overlap=OVERLAP_CODES[problem.objective.overlap],
    )


def allreduce_scale(problem: Problem, group: tuple[int, ...], label: str) -> float:
    """Load units per byte of a replicated slice's all-reduce among ``group`` (paper 1,
    appendix C.2); ``0`` for inference graphs (read-only weights) and single devices, ``inf``
    when the devices have no link (``B = 0``): they cannot be replicas.

    Refuses (``ValueError``) groups whose pairs have different bandwidths.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> allreduce_scale(chain_problem([4, 1], n_accelerators=2), (0, 1), "accelerators")
    0.0
    """
    cluster = problem.cluster
    if len(group) < 2 or not problem.graph.is_training:
        return 0.0
    block = cluster.bandwidth[np.ix_(group, group)][~np.eye(len(group), dtype=np.bool_)]
    if block.min() != block.max():
        raise UsageError(
            f"the DP with replication needs the same bandwidth between any two {label}; "
            f"they range from {block.min():.6g} to {block.max():.6g} B/s"
        )
    if block[0] == 0:
        return math.inf
    return 1.0 / (float(block[0]) * cluster.time_unit_s)
