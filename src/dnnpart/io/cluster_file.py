"""Cluster files (JSON or YAML).

Three forms::

    preset: reference          # paper 1: k accelerators + l CPUs on one host link
    accelerators: 6
    cpus: 1
    memory_bytes: 16e9

    preset: two-level          # machines of accelerators, fast inside, slow between
    groups: 2
    accelerators_per_group: 4
    memory_bytes: 32e9
    intra_bandwidth: 150e9
    inter_bandwidth: 12.5e9
    cpus: 1

    devices:                   # explicit; `count` expands name into name0, name1, ...
      - {name: gpu, count: 4, kind: accelerator, memory_bytes: 16e9, speed: 1.0}
      - {name: host, kind: cpu}
    bandwidth: [[...]]         # optional (d, d) bytes/s

Numbers may be written as strings (YAML 1.1 reads ``16e9`` as text).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.devices.cluster import Cluster, Device
from dnnpart.devices.presets import reference_cluster, two_level_cluster
from dnnpart.errors import FormatError
from dnnpart.io import fields as f
from dnnpart.limits import check_device_count, check_nesting, read_bounded


def _num(value: Any, where: str, *, minimum: float = 0.0, allow_inf: bool = False) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise FormatError(f"{where}: expected a number, got {f.describe(value)}") from None
    return f.number(value, where, minimum=minimum, allow_inf=allow_inf)


def _int(value: Any, where: str, minimum: int = 0) -> int:
    return f.integer(value, where, minimum=minimum)


def parse_cluster(data: Any, source: str = "<cluster>") -> Cluster:
    """Validate a parsed cluster description.

    Examples
    --------
    >>> parse_cluster({"preset": "reference", "accelerators": 2, "cpus": 1,
    ...                "memory_bytes": "16e9"}).n_devices
    3
    """
    root = f.require_mapping(data, source)
    cluster = _cluster(root, source)
    if "time_unit_s" in root:  # seconds per unit of the graph's times (default: ms)
        unit = _num(root["time_unit_s"], "time_unit_s")
        if unit <= 0:
            raise FormatError(f"time_unit_s: expected a number > 0, got {unit}")
        cluster = dataclasses.replace(cluster, time_unit_s=unit)
    return cluster


def _cluster(root: dict[str, Any], source: str) -> Cluster:
    preset = root.get("preset")
    try:
        if preset == "reference":
            return reference_cluster(
                n_accelerators=_int(root.get("accelerators", 0), "accelerators"),
                n_cpus=_int(root.get("cpus", 0), "cpus"),
                memory_bytes=_num(root.get("memory_bytes", math.inf), "memory_bytes", allow_inf=True),
            )
        if preset == "two-level":
            return two_level_cluster(
                n_groups=_int(root.get("groups"), "groups", 1),
                accelerators_per_group=_int(root.get("accelerators_per_group"), "accelerators_per_group", 1),
                memory_bytes=_num(root.get("memory_bytes", math.inf), "memory_bytes", allow_inf=True),
                intra_bandwidth=_num(root.get("intra_bandwidth"), "intra_bandwidth"),
                inter_bandwidth=_num(root.get("inter_bandwidth"), "inter_bandwidth"),
                n_cpus=_int(root.get("cpus", 0), "cpus"),
            )
        if preset is not None:
            raise FormatError(f"preset: expected 'reference' or 'two-level', got {f.describe(preset)}")
        return _explicit(root)
    except ValueError as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError(f"{source}: {exc}") from None


def _explicit(root: dict[str, Any]) -> Cluster:
    if "devices" not in root:
        raise FormatError("devices: missing (give a device list or a preset)")
    devices: list[Device] = []
    scales: list[float] = []
    groups: list[int] = []
    for i, entry in enumerate(f.require_list(root["devices"], "devices")):
        where = f"devices[{i}]"
        entry = f.require_mapping(entry, where)
        name = f.text(entry.get("name"), f"{where}.name")
        kind = entry.get("kind")
        if kind not in ("accelerator", "cpu"):
            raise FormatError(f"{where}.kind: expected 'accelerator' or 'cpu', got {f.describe(kind)}")
        count = _int(entry.get("count", 1), f"{where}.count", 1)
        memory = _num(entry.get("memory_bytes", math.inf), f"{where}.memory_bytes", allow_inf=True)
        speed = _num(entry.get("speed", 1.0), f"{where}.speed")
        if speed <= 0:
            raise FormatError(f"{where}.speed: expected a number > 0, got {speed}")
        scale = _num(entry.get("host_link_scale", 1.0), f"{where}.host_link_scale")
        group = _int(entry.get("group", 0), f"{where}.group")
        check_device_count(len(devices) + count, f"{where}.count")
        for j in range(count):
            devices.append(Device(name=f"{name}{j}" if "count" in entry else name, kind=kind,
                                  memory_bytes=memory, speed=speed))
            scales.append(scale)
            groups.append(group)
    d = len(devices)
    if d == 0:
        raise FormatError("devices: the cluster has no devices")
    bandwidth = np.full((d, d), math.inf)
    if "bandwidth" in root:
        rows = f.require_list(root["bandwidth"], "bandwidth")
        if len(rows) != d:
            raise FormatError(f"bandwidth: expected {d} rows (one per device), got {len(rows)}")
        for i, row in enumerate(rows):
            row = f.require_list(row, f"bandwidth[{i}]")
            if len(row) != d:
                raise FormatError(f"bandwidth[{i}]: expected {d} values, got {len(row)}")
            for j, x in enumerate(row):
                bandwidth[i, j] = _num(x, f"bandwidth[{i}][{j}]", allow_inf=True)
    return Cluster(devices=tuple(devices), host_link_scale=np.asarray(scales),
                   bandwidth=bandwidth, group=np.asarray(groups, dtype=np.int64))


def read_cluster(path: str | Path) -> Cluster:
    """Read a cluster file (``.yaml``/``.yml`` as YAML, anything else as JSON)."""
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        raw = read_bounded(p, what="cluster file")
        try:
            text = raw.decode()
            check_nesting(text, str(p))
            data = yaml.safe_load(text)
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise FormatError(f"{p}: invalid YAML ({f.one_line(str(exc))})") from None
        except RecursionError:
            raise FormatError(f"{p}: nested too deeply") from None
    else:
        data = f.read_json(p)
    return parse_cluster(data, str(p))
