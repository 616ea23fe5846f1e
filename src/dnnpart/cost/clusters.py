"""The ``NxPRESET`` cluster shorthand (``"4xA100"``) and cluster files, with their pricing."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dnnpart.cost.model import CostModel
from dnnpart.cost.specs import Catalog, load_catalog
from dnnpart.devices.cluster import ACCELERATOR, CPU, Cluster, Device
from dnnpart.errors import FormatError

_SHORTHAND = re.compile(r"^\s*(\d+)\s*[xX*]\s*([A-Za-z0-9_.\-]+)\s*$")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PricedCluster:
    """A cluster and the cost model its graph should be priced with."""

    cluster: Cluster
    cost_model: CostModel


def shorthand_cluster(
    n_accelerators: int, preset: str, *, catalog: Catalog | None = None, host_cpu: bool = True
) -> PricedCluster:
    """``n`` accelerators of ``preset`` joined by its default link, plus a host CPU.

    Device-to-device bandwidth and latency come from the preset's ``default_link``; the
    accelerator <-> CPU entries from its ``host_link`` (also the reference link of the
    graph's edge costs).

    Examples
    --------
    >>> pc = shorthand_cluster(4, "A100")
    >>> [d.name for d in pc.cluster.devices]
    ['acc0', 'acc1', 'acc2', 'acc3', 'cpu0']
    >>> float(pc.cluster.bandwidth[0, 1]), float(pc.cluster.bandwidth[0, 4])
    (300000000000.0, 31500000000.0)
    """
    if n_accelerators < 1:
        raise FormatError(f"cluster: need at least 1 accelerator, got {n_accelerators}")
    cat = catalog or load_catalog()
    spec = cat.device(preset)
    if spec.kind != ACCELERATOR:
        raise FormatError(f"cluster: {spec.name} is a {spec.kind}, not an accelerator preset")
    model = CostModel.from_presets(spec.name, catalog=cat)
    peer = cat.link(spec.default_link) if spec.default_link else model.host_link
    host = model.host_link
    devices = [
        Device(name=f"acc{i}", kind=ACCELERATOR, memory_bytes=spec.memory_bytes)
        for i in range(n_accelerators)
    ]
    if host_cpu:
        devices.append(Device(name="cpu0", kind=CPU, memory_bytes=model.cpu.memory_bytes))
    d = len(devices)
    bandwidth = np.full((d, d), host.bandwidth)
    latency = np.full((d, d), host.latency)
    bandwidth[:n_accelerators, :n_accelerators] = peer.bandwidth
    latency[:n_accelerators, :n_accelerators] = peer.latency
    np.fill_diagonal(bandwidth, np.inf)
    np.fill_diagonal(latency, 0.0)
    cluster = Cluster(
        devices=tuple(devices),
        bandwidth=bandwidth,
        latency=latency,
        name=f"{n_accelerators}x{spec.name}" + (" + host CPU" if host_cpu else ""),
    )
    return PricedCluster(cluster=cluster, cost_model=model)


def resolve_cluster(
    spec: str, *, catalog: Catalog | None = None, accelerator: str = "A100-40GB"
) -> PricedCluster:
    """``"NxPRESET"`` shorthand, or a cluster file (priced with ``accelerator``'s preset).

    Examples
    --------
    >>> resolve_cluster("2xV100").cost_model.host_link.name
    'pcie3-x16'
    >>> resolve_cluster("2xTPU")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: unknown device preset 'TPU'; known: A100-40GB, ...
    """
    match = _SHORTHAND.match(spec)
    if match:
        return shorthand_cluster(int(match.group(1)), match.group(2), catalog=catalog)
    path = Path(spec)
    if not path.exists():
        raise FormatError(f"--cluster {spec!r}: neither NxPRESET (e.g. 4xA100) nor an existing cluster file")
    from dnnpart.io.cluster_file import read_cluster

    return PricedCluster(
        cluster=read_cluster(path), cost_model=CostModel.from_presets(accelerator, catalog=catalog)
    )
