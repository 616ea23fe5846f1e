"""Ready-made clusters: paper 1's reference setting and two-level hierarchies."""

from __future__ import annotations

import math

import numpy as np

from dnnpart.devices.cluster import ACCELERATOR, CPU, Cluster, Device
from dnnpart.errors import UsageError
from dnnpart.limits import check_device_count

#: PCIe 3.0 x16, the host link of paper 1's experiments (bytes/s, ~16 GB/s theoretical).
PCIE3_X16_BANDWIDTH = 15.75e9


def reference_cluster(
    *,
    n_accelerators: int,
    n_cpus: int,
    memory_bytes: float,
    host_bandwidth: float = PCIE3_X16_BANDWIDTH,
) -> Cluster:
    """Paper 1's setting: ``k`` identical accelerators and ``l`` CPUs on one host link.

    Accelerators come first (``acc0..``), then CPUs (``cpu0..``). Accelerators talk through
    host DRAM, so device-to-device bandwidth is the host link's.

    Examples
    --------
    >>> reference_cluster(n_accelerators=3, n_cpus=1, memory_bytes=16e9).n_devices
    4
    """
    check_device_count(n_accelerators + n_cpus, "accelerators + cpus")
    if n_accelerators < 0 or n_cpus < 0:
        raise UsageError(f"device counts must be >= 0, got {n_accelerators} accelerators, {n_cpus} CPUs")
    devices = [
        Device(name=f"acc{i}", kind=ACCELERATOR, memory_bytes=memory_bytes)
        for i in range(n_accelerators)
    ]
    devices += [Device(name=f"cpu{i}", kind=CPU) for i in range(n_cpus)]
    d = len(devices)
    bandwidth = np.full((d, d), host_bandwidth / 2)  # via DRAM: one write, one read
    np.fill_diagonal(bandwidth, math.inf)
    return Cluster(
        devices=tuple(devices),
        bandwidth=bandwidth,
        name=f"{_count(n_accelerators, 'accelerator')} + {_count(n_cpus, 'CPU')}",
    )


def two_level_cluster(
    *,
    n_groups: int,
    accelerators_per_group: int,
    memory_bytes: float,
    intra_bandwidth: float,
    inter_bandwidth: float,
    n_cpus: int = 0,
    inter_latency: float = 0.0,
) -> Cluster:
    """A hierarchy: ``n_groups`` machines of ``accelerators_per_group`` accelerators each.

    Accelerators in one group share ``intra_bandwidth``; across groups ``inter_bandwidth``.
    CPUs sit outside the groups: every accelerator reaches them at ``inter_bandwidth`` (their
    ``group`` entry is 0 and means nothing). The graph's edge costs are read as times at the
    *intra-group* link (``reference_bandwidth = intra_bandwidth``), so a transfer between
    groups, or to or from a CPU, costs ``intra_bandwidth / inter_bandwidth`` times more
    (see :func:`dnnpart.pricing.loads.load_breakdown`).

    Examples
    --------
    >>> c = two_level_cluster(n_groups=2, accelerators_per_group=4, memory_bytes=32e9,
    ...                       intra_bandwidth=150e9, inter_bandwidth=12.5e9)
    >>> c.group.tolist()
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    check_device_count(n_groups * accelerators_per_group + n_cpus, "groups x accelerators + cpus")
    if n_groups < 1 or accelerators_per_group < 1:
        raise UsageError("n_groups and accelerators_per_group must be >= 1")
    devices = [
        Device(name=f"g{g}acc{i}", kind=ACCELERATOR, memory_bytes=memory_bytes)
        for g in range(n_groups)
        for i in range(accelerators_per_group)
    ]
    devices += [Device(name=f"cpu{i}", kind=CPU) for i in range(n_cpus)]
    group = np.array([g for g in range(n_groups) for _ in range(accelerators_per_group)] + [0] * n_cpus)
    is_acc = np.arange(len(devices)) < n_groups * accelerators_per_group
    same = (group[:, None] == group[None, :]) & is_acc[:, None] & is_acc[None, :]
    bandwidth = np.where(same, intra_bandwidth, inter_bandwidth).astype(np.float64)
    latency = np.where(same, 0.0, inter_latency).astype(np.float64)
    np.fill_diagonal(bandwidth, math.inf)
    np.fill_diagonal(latency, 0.0)
    return Cluster(
        devices=tuple(devices),
        bandwidth=bandwidth,
        latency=latency,
        group=group,
        name=f"{n_groups}x{accelerators_per_group} accelerators",
        reference_bandwidth=intra_bandwidth,
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
