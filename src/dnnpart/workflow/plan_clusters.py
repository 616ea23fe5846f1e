"""The cluster a plan file was made for, as it was priced.

A plan file (version 2 on) keeps its resolved cluster, so that it keeps its meaning when the
defaults behind a ``--cluster SPEC`` change. Plans written before devices carried their
roofline (``DeviceSpec``) stored it in ``objective_spec.device`` instead, or, for the iteration
objective, relied on the ``P100`` default: :func:`legacy_specs` puts that back on the devices.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import FormatError
from dnnpart.problem import Objective


def read_plan_data(path: str | Path) -> Any:
    """A plan file's JSON, or ``None`` where it is none (an expert split's errors come later)."""
    from dnnpart.io import fields as f

    try:
        return f.read_json(path)
    except FormatError:
        return None


def legacy_specs(cluster: Cluster, data: Any, objective: Objective) -> Cluster:
    """A plan's stored cluster with the device specs that plans written before devices carried
    them imply: their ``objective_spec.device`` preset (the roofline of the iteration
    objective), or, for the iteration objective without it, ``P100`` (the default those plans
    were scored by).

    Examples
    --------
    >>> from dnnpart.devices.topology import mesh2d
    >>> old = mesh2d(x=2, y=1)  # devices without specs, as old plan files stored them
    >>> data = {"objective_spec": {"kind": "iteration", "device": "V100-32GB"}}
    >>> [d.spec.name for d in legacy_specs(old, data, Objective(kind="iteration")).devices]
    ['V100-32GB', 'V100-32GB']
    >>> [d.spec.name for d in legacy_specs(old, {}, Objective(kind="iteration")).devices]
    ['P100-16GB', 'P100-16GB']
    >>> legacy_specs(old, {}, Objective()) is old
    True
    """
    from dnnpart.cost import CostModel
    from dnnpart.cost.clusters import with_specs

    if all(d.spec is not None for d in cluster.devices):
        return cluster
    spec = data.get("objective_spec") if isinstance(data, dict) else None
    device = spec.get("device") if isinstance(spec, dict) else None
    if isinstance(device, str):
        return with_specs(cluster, CostModel.from_presets(device))
    if objective.kind == "iteration":
        return with_specs(cluster, CostModel.from_presets("P100"))
    return cluster


def stored_cluster(path: str | Path, objective: Objective | None = None, data: Any = None) -> Cluster | None:
    """The cluster plan file ``path`` stores (``None`` for plans without one), legacy specs
    applied (:func:`legacy_specs`; ``data``: the file's JSON when already read)."""
    from dnnpart.io.plan_files import plan_cluster

    cluster = plan_cluster(path)
    if cluster is None:
        return None
    return legacy_specs(cluster, read_plan_data(path) if data is None else data,
                        objective or Objective())
