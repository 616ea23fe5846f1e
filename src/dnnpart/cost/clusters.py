"""The ``NxPRESET`` cluster shorthand (``"4xA100"``), cluster files and machine files, with
their pricing.

A **machine file** (what ``dnnpart calibrate`` writes) is a device catalog -- ``devices`` by
name, ``links`` by name, as ``--specs`` reads -- with a ``cluster: NxDEVICE`` entry: given
as ``--cluster FILE`` it is that shorthand over the file's devices, merged over the presets
(and ``--specs``). A cluster file lists its devices (``devices`` is a list), so the two never
read alike; a catalog without ``cluster`` is refused with what to pass instead.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.cost.model import CostModel
from dnnpart.cost.specs import Catalog, load_catalog, merged, parse_catalog
from dnnpart.devices.cluster import ACCELERATOR, CPU, Cluster, Device
from dnnpart.errors import FormatError

_SHORTHAND = re.compile(
    r"^\s*(\d+)\s*[xX*]\s*([A-Za-z0-9_.\-]+?)\s*(?:\+\s*(\d+)\s*cpus?)?\s*$", re.IGNORECASE
)
#: Largest accelerator count of the ``NxPRESET`` shorthand (dense d x d matrices).
MAX_SHORTHAND_DEVICES = 4096


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PricedCluster:
    """A cluster and the cost model its graph should be priced with."""

    cluster: Cluster
    cost_model: CostModel


def shorthand_cluster(
    n_accelerators: int, preset: str, *, catalog: Catalog | None = None, host_cpu: bool = False,
    n_cpus: int | None = None,
) -> PricedCluster:
    """``n`` accelerators of ``preset`` joined by its default link; host CPUs only when asked.

    ``n_cpus`` host CPUs (``4xA100+1cpu``; ``host_cpu=True`` is ``n_cpus=1``) join over the
    preset's host link. Without them the cluster is exactly the ``n`` accelerators, so no plan
    can put a stage on a CPU nobody asked for.

    Device-to-device bandwidth and latency come from the preset's ``default_link``; the
    accelerator <-> CPU entries from its ``host_link`` (also the reference link of the
    graph's edge costs).

    Examples
    --------
    >>> [d.name for d in shorthand_cluster(2, "A100").cluster.devices]
    ['acc0', 'acc1']
    >>> pc = shorthand_cluster(4, "A100", n_cpus=1)
    >>> [d.name for d in pc.cluster.devices]
    ['acc0', 'acc1', 'acc2', 'acc3', 'cpu0']
    >>> float(pc.cluster.bandwidth[0, 1]), float(pc.cluster.bandwidth[0, 4])
    (300000000000.0, 31500000000.0)
    """
    if n_accelerators < 1:
        raise FormatError(f"cluster: need at least 1 accelerator, got {n_accelerators}")
    cpus = (1 if host_cpu else 0) if n_cpus is None else n_cpus
    if n_accelerators + cpus > MAX_SHORTHAND_DEVICES:
        raise FormatError(
            f"cluster: {n_accelerators + cpus} devices exceed the limit of {MAX_SHORTHAND_DEVICES}"
        )
    cat = catalog or load_catalog()
    spec = cat.device(preset)
    if spec.kind != ACCELERATOR:
        raise FormatError(f"cluster: {spec.name} is a {spec.kind}, not an accelerator preset")
    model = CostModel.from_presets(spec.name, catalog=cat)
    peer = cat.link(spec.default_link) if spec.default_link else model.host_link
    host = model.host_link
    devices = [
        Device(name=f"acc{i}", kind=ACCELERATOR, memory_bytes=spec.memory_bytes, spec=spec)
        for i in range(n_accelerators)
    ]
    devices += [Device(name=f"cpu{i}", kind=CPU, memory_bytes=model.cpu.memory_bytes, spec=model.cpu)
                for i in range(cpus)]
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
        name=f"{n_accelerators}x{spec.name}" + (f"+{cpus}cpu" if cpus else ""),
    )
    return PricedCluster(cluster=cluster, cost_model=model)


def with_specs(cluster: Cluster, model: CostModel) -> Cluster:
    """``cluster`` with the cost model's specs on the devices that carry none (accelerators get
    its accelerator's, CPUs its CPU's): the roofline of each device is then the one that
    priced the graph.

    Examples
    --------
    >>> from dnnpart.devices.topology import mesh2d
    >>> c = with_specs(mesh2d(x=2, y=1), CostModel.from_presets("V100"))
    >>> [d.spec.name for d in c.devices]
    ['V100-32GB', 'V100-32GB']
    """
    devices = tuple(
        d if d.spec is not None
        else dataclasses.replace(d, spec=model.accelerator if d.is_accelerator else model.cpu)
        for d in cluster.devices
    )
    return dataclasses.replace(cluster, devices=devices)


def resolve_cluster(
    spec: str, *, catalog: Catalog | None = None, accelerator: str = "A100-40GB"
) -> PricedCluster:
    """The one ``--cluster SPEC`` resolver of every command.

    ``SPEC`` is, in this order: an existing cluster file (JSON/YAML) or machine file (module
    docstring); ``NxPRESET[+Mcpu]``
    (``4xA100`` = four accelerators, ``4xA100+1cpu`` adds a host CPU); or a topology
    generator ``GENERATOR:key=value,...`` (:mod:`dnnpart.devices.topology`, e.g.
    ``torus3d:x=8,y=8,z=8,bw=25e9``). Files and generators are priced with ``accelerator``'s
    preset (``dgx1`` with V100's); a generator's ``device=PRESET`` key picks another one
    (``two-level:nodes=4,gpus=4,intra=20e9,inter=12.5e9,device=P100``, paper 3's cluster), and
    with it the preset's memory capacity unless ``memory=`` is given.

    Examples
    --------
    >>> resolve_cluster("2xV100").cost_model.host_link.name
    'pcie3-x16'
    >>> resolve_cluster("2xA100+1cpu").cluster.n_cpus, resolve_cluster("2xA100").cluster.n_cpus
    (1, 0)
    >>> resolve_cluster("mesh2d:x=2,y=2").cluster.n_devices
    4
    >>> resolve_cluster("two-level:nodes=2,gpus=2,device=P100").cost_model.accelerator.name
    'P100-16GB'
    >>> resolve_cluster("two-level:nodes=2,gpus=2,device=P100").cluster.memory_capacity()[0]
    np.float64(16000000000.0)
    >>> resolve_cluster("2xTPU")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: unknown device preset 'TPU'; known: A100-40GB, ...
    """
    path = Path(spec)
    if path.is_file():
        from dnnpart.io.cluster_file import parse_cluster, read_cluster_data

        data = read_cluster_data(path)
        if is_machine_file(data):
            return machine_cluster(data, str(path), catalog=catalog)
        model = CostModel.from_presets(accelerator, catalog=catalog)
        return PricedCluster(cluster=with_specs(parse_cluster(data, str(path)), model), cost_model=model)
    match = _SHORTHAND.match(spec)
    if match:
        n_cpus = int(match.group(3)) if match.group(3) else 0
        return shorthand_cluster(int(match.group(1)), match.group(2), catalog=catalog, n_cpus=n_cpus)
    from dnnpart.devices.topology import GENERATORS, generate, parse_generator_spec

    name = spec.partition(":")[0].strip()
    if name in GENERATORS:
        from dnnpart.devices.topology import generator_parameters

        try:
            gen, params = parse_generator_spec(spec)
            device = params.pop("device", None)
            model = CostModel.from_presets(device or ("V100" if name == "dgx1" else accelerator),
                                           catalog=catalog)
            # a named device brings its capacity unless memory= says otherwise
            if device is not None and "memory" not in params and "memory" in generator_parameters(gen):
                params["memory"] = repr(model.accelerator.memory_bytes)
            cluster = generate(gen, params)
        except ValueError as exc:
            raise FormatError(f"--cluster {spec!r}: {exc}") from None
        return PricedCluster(cluster=with_specs(cluster, model), cost_model=model)
    raise FormatError(
        f"--cluster {spec!r}: neither an existing cluster file, NxPRESET[+Mcpu] (e.g. 4xA100) nor "
        f"a generator GENERATOR:key=value,... (generators: {', '.join(GENERATORS)})"
    )


def is_machine_file(data: object) -> bool:
    """Whether parsed file content is a device catalog (``devices`` by name), not a cluster
    file (``devices`` listed)."""
    return isinstance(data, dict) and isinstance(data.get("devices"), dict)


def machine_cluster(data: dict[str, Any], source: str, *, catalog: Catalog | None = None) -> PricedCluster:
    """The cluster a machine file names (module docstring), priced by its devices.

    Examples
    --------
    >>> data = {"cluster": "2xbox", "links": {"box-link": {"bandwidth": 1e9, "latency": 1e-5}},
    ...         "devices": {"box": {"kind": "accelerator", "peak_flops": 1e11,
    ...                             "memory_bandwidth": 1e10, "default_link": "box-link",
    ...                             "host_link": "box-link"}}}
    >>> pc = machine_cluster(data, "m.yaml")
    >>> pc.cluster.name, pc.cost_model.accelerator.name, float(pc.cluster.bandwidth[0, 1])
    ('2xbox', 'box', 1000000000.0)
    """
    shorthand = data.get("cluster")
    first = str(next(iter(data["devices"]), "DEVICE"))
    if shorthand is None:
        raise FormatError(
            f"{source}: a device catalog, not a cluster: add `cluster: 2x{first}` to it, or pass it as "
            f"--specs {source} with --cluster Nx{first}")
    match = _SHORTHAND.match(shorthand) if isinstance(shorthand, str) else None
    if match is None:
        raise FormatError(f"{source}: cluster: expected NxDEVICE[+Mcpu] (e.g. 2x{first}), got "
                          f"{str(shorthand)[:60]!r}")
    cat = merged(catalog or load_catalog(), parse_catalog(data, source))
    n_cpus = int(match.group(3)) if match.group(3) else 0
    return shorthand_cluster(int(match.group(1)), match.group(2), catalog=cat, n_cpus=n_cpus)
