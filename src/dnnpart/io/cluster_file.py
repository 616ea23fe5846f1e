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
      # optional per entry: spec: {name: P100-16GB, kind: accelerator, peak_flops: 10.6e12,
      #   memory_bandwidth: 732e9, compute_efficiency: 0.5, ...}: the device's roofline
      #   (devices without one take the preset that prices the graph, --cluster's default)
    bandwidth: [[...]]         # optional (d, d) bytes/s, used as given
    latency: [[...]]           # optional (d, d) seconds, used as given
    links:                     # optional topology: matrices routed by the cluster's rule
      - {a: gpu0, b: gpu1, bandwidth: 25e9, latency: 1e-6, kind: nvlink}
    routing: widest            # or store-and-forward (optional; the rule for `links`)

    preset: torus3d            # any topology generator (dnnpart.devices.topology) + parameters
    x: 4
    y: 4
    z: 4

With ``links`` and no ``bandwidth``, the ``(d, d)`` matrices are derived from the links by the
cluster's one routing rule (:mod:`dnnpart.devices.routing`, ``routing``, default ``widest``);
a matrix given in the file is used as is
(the links are then kept for display). Numbers may be written as strings (YAML 1.1 reads
``16e9`` as text; ``"inf"`` is accepted where infinity is).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart._yaml import safe_load
from dnnpart.devices.cluster import Cluster, Device, Link
from dnnpart.devices.presets import reference_cluster, two_level_cluster
from dnnpart.devices.specs import device_spec_from_dict, device_spec_to_dict
from dnnpart.errors import FormatError
from dnnpart.io import fields as f
from dnnpart.limits import check_device_count, check_nesting, read_bounded

#: Keys of a device entry, of a link entry and of the explicit form's top level.
DEVICE_KEYS = frozenset({"name", "kind", "count", "memory_bytes", "speed", "host_link_scale",
                         "group", "spec"})
LINK_KEYS = frozenset({"a", "b", "bandwidth", "latency", "kind"})
EXPLICIT_KEYS = frozenset({"devices", "bandwidth", "latency", "links", "routing", "name",
                           "reference_bandwidth", "time_unit_s", "preset"})
#: Longest cluster or device name, link kind (characters).
MAX_NAME_CHARS = 200
#: Values a YAML cluster file may gain by aliases (``*a`` repeating ``&a``'s value): an alias
#: bomb of a few hundred bytes expands to billions.
MAX_ALIAS_EXPANSION = 1_000_000


def _excerpt(value: Any) -> str:
    """A bounded rendering of a bad value (never expands a large container)."""
    from dnnpart.devices.topology import excerpt

    return excerpt(value)


def _bounded_text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise FormatError(f"{where}: expected text, got {_excerpt(value)}")
    if len(value) > MAX_NAME_CHARS:
        raise FormatError(f"{where}: {len(value):,} characters, more than {MAX_NAME_CHARS}")
    return value


def _unknown_keys(entry: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = [k for k in entry if k not in allowed]
    if unknown:
        raise FormatError(f"{where}.{_excerpt(unknown[0])[:60]}: unknown field; expected "
                          f"{', '.join(sorted(allowed))}")


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
        from dnnpart.devices.topology import GENERATORS, generate

        if preset in GENERATORS:
            params = {k: v for k, v in root.items() if k not in ("preset", "time_unit_s")}
            return generate(str(preset), params)
        if preset is not None:
            raise FormatError(f"preset: expected 'reference', 'two-level' or a generator "
                              f"({', '.join(GENERATORS)}), got {f.describe(preset)}")
        return _explicit(root)
    except ValueError as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError(f"{source}: {exc}") from None


def _explicit(root: dict[str, Any]) -> Cluster:
    if "devices" not in root:
        raise FormatError("devices: missing (give a device list or a preset)")
    _unknown_keys(root, EXPLICIT_KEYS, "cluster")
    name_text = _bounded_text(root.get("name", ""), "name")
    devices: list[Device] = []
    scales: list[float] = []
    groups: list[int] = []
    for i, entry in enumerate(f.require_list(root["devices"], "devices")):
        where = f"devices[{i}]"
        entry = f.require_mapping(entry, where)
        _unknown_keys(entry, DEVICE_KEYS, where)
        name = _bounded_text(entry.get("name"), f"{where}.name")
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
        spec = None if entry.get("spec") is None else device_spec_from_dict(entry["spec"], f"{where}.spec")
        if spec is not None and spec.kind != kind:
            raise FormatError(f"{where}.spec.kind: a {kind} needs a {kind} spec, got {spec.kind!r}")
        check_device_count(len(devices) + count, f"{where}.count")
        for j in range(count):
            devices.append(Device(name=f"{name}{j}" if "count" in entry else name, kind=kind,
                                  memory_bytes=memory, speed=speed, spec=spec))
            scales.append(scale)
            groups.append(group)
    d = len(devices)
    if d == 0:
        raise FormatError("devices: the cluster has no devices")
    links = _links(root, devices) if "links" in root else ()
    if "links" in root and not links and d > 1 and "bandwidth" not in root:
        raise FormatError(f"links: an empty list connects none of the {d} devices; list the "
                          "links, or leave `links` out and give `bandwidth`")
    reference = root.get("reference_bandwidth")
    ref = None if reference is None else _num(reference, "reference_bandwidth")
    from dnnpart.devices.routing import ROUTING_RULES

    rule = root.get("routing", "widest")
    if not isinstance(rule, str) or rule not in ROUTING_RULES:
        raise FormatError(f"routing: expected one of {list(ROUTING_RULES)}, got {_excerpt(rule)}")
    if "routing" in root and (not links or "bandwidth" in root):
        raise FormatError("routing: applies to the matrices routed from `links`; give `links` "
                          "without `bandwidth`, or leave `routing` out")
    if links and "bandwidth" not in root:
        from dnnpart.devices.topology import cluster_from_links

        routed = cluster_from_links(devices, links, group=groups, reference_bandwidth=ref,
                                    routing=rule)
        return dataclasses.replace(routed, host_link_scale=np.asarray(scales), name=name_text)
    bandwidth = _matrix(root, "bandwidth", d, math.inf)
    latency = _matrix(root, "latency", d, 0.0)
    return Cluster(devices=tuple(devices), host_link_scale=np.asarray(scales),
                   bandwidth=bandwidth, latency=latency, group=np.asarray(groups, dtype=np.int64),
                   links=links, reference_bandwidth=ref, name=name_text)


def _matrix(root: dict[str, Any], key: str, d: int, fill: float) -> np.ndarray:
    out = np.full((d, d), fill)
    if key not in root:
        return out
    rows = f.require_list(root[key], key)
    if len(rows) != d:
        raise FormatError(f"{key}: expected {d} rows (one per device), got {len(rows)}")
    for i, row in enumerate(rows):
        row = f.require_list(row, f"{key}[{i}]")
        if len(row) != d:
            raise FormatError(f"{key}[{i}]: expected {d} values, got {len(row)}")
        for j, x in enumerate(row):
            out[i, j] = _num(x, f"{key}[{i}][{j}]", allow_inf=True)
    return out


def _links(root: dict[str, Any], devices: list[Device]) -> tuple[Link, ...]:
    from dnnpart.devices.topology import MAX_LINKS

    index = {dev.name: i for i, dev in enumerate(devices)}
    out: list[Link] = []
    entries = f.require_list(root["links"], "links")
    if len(entries) > MAX_LINKS:
        raise FormatError(f"links: {len(entries):,} links, more than the {MAX_LINKS:,} dnnpart routes")
    for k, entry in enumerate(entries):
        where = f"links[{k}]"
        entry = f.require_mapping(entry, where)
        _unknown_keys(entry, LINK_KEYS, where)
        ends = []
        for end in ("a", "b"):
            name = _bounded_text(entry.get(end), f"{where}.{end}")
            if name not in index:
                raise FormatError(f"{where}.{end}: unknown device {_excerpt(name)}")
            ends.append(index[name])
        if ends[0] == ends[1]:
            raise FormatError(
                f"{where}: a link joins two distinct devices, got {devices[ends[0]].name} twice")
        bw = _num(entry.get("bandwidth"), f"{where}.bandwidth")
        if bw <= 0:
            raise FormatError(f"{where}.bandwidth: expected a number > 0, got {bw}")
        lat = _num(entry.get("latency", 0.0), f"{where}.latency")
        kind = _bounded_text(entry.get("kind", ""), f"{where}.kind")
        out.append(Link(a=ends[0], b=ends[1], bandwidth=bw, latency=lat, kind=kind))
    return tuple(out)


def cluster_to_dict(cluster: Cluster) -> dict[str, Any]:
    """The explicit form of :func:`parse_cluster` (``inf`` as text).

    A routed cluster is stored as its link list (the matrices follow from the one routing
    rule, and a 512-device torus stays small); matrices given directly are stored as they are.

    Examples
    --------
    >>> from dnnpart.devices import reference_cluster
    >>> c = reference_cluster(n_accelerators=2, n_cpus=0, memory_bytes=1e9)
    >>> back = parse_cluster(cluster_to_dict(c))
    >>> bool((back.bandwidth == c.bandwidth).all()), back.devices == c.devices
    (True, True)
    """
    def num(x: float) -> float | str:
        return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")

    out: dict[str, Any] = {
        "name": cluster.name,
        "time_unit_s": cluster.time_unit_s,
        "devices": [{"name": dev.name, "kind": dev.kind, "memory_bytes": num(dev.memory_bytes),
                     "speed": dev.speed, "host_link_scale": float(scale), "group": int(g)}
                    | ({} if dev.spec is None else {"spec": device_spec_to_dict(dev.spec)})
                    for dev, scale, g in zip(cluster.devices, cluster.host_link_scale.tolist(),
                                             cluster.group.tolist(), strict=True)],
    }
    if not cluster.routed:  # matrices given (not derived from links): store them
        out["bandwidth"] = [[num(x) for x in row] for row in cluster.bandwidth.tolist()]
        out["latency"] = [[num(x) for x in row] for row in cluster.latency.tolist()]
    if cluster.reference_bandwidth is not None:
        out["reference_bandwidth"] = cluster.reference_bandwidth
    if cluster.routing != "widest":
        out["routing"] = cluster.routing
    if cluster.links:
        out["links"] = [{"a": cluster.devices[x.a].name, "b": cluster.devices[x.b].name,
                         "bandwidth": x.bandwidth, "latency": x.latency, "kind": x.kind}
                        for x in cluster.links]
    return out


def read_cluster(path: str | Path) -> Cluster:
    """Read a cluster file (``.yaml``/``.yml`` as YAML, anything else as JSON)."""
    return parse_cluster(read_cluster_data(path), str(Path(path)))


def read_cluster_data(path: str | Path) -> Any:
    """The parsed content of a cluster file (``.yaml``/``.yml`` as YAML, anything else as
    JSON), read with the size and nesting bounds of every input file."""
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        raw = read_bounded(p, what="cluster file")
        try:
            text = raw.decode()
            check_nesting(text, str(p))
            data = safe_load(text)
            check_alias_expansion(data, str(p))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise FormatError(f"{p}: invalid YAML ({f.one_line(str(exc))})") from None
        except RecursionError:
            raise FormatError(f"{p}: nested too deeply") from None
    else:
        data = f.read_json(p)
    return data


def check_alias_expansion(data: Any, where: str, limit: int = MAX_ALIAS_EXPANSION) -> None:
    """Refuse parsed YAML whose aliases make it more than ``limit`` values larger when
    expanded (a YAML alias bomb), or that contains itself; linear in the distinct values.

    Examples
    --------
    >>> bomb = ["x"] * 10
    >>> for _ in range(8):
    ...     bomb = [bomb] * 10
    >>> check_alias_expansion(bomb, "c.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: c.yaml: YAML aliases expand it to more than ...
    """
    sizes: dict[int, int] = {}
    distinct = 0
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (list, dict)):
            continue
        key = id(node)
        children = list(node.values()) + list(node) if isinstance(node, dict) else node
        if done:
            sizes[key] = 1 + sum(sizes.get(id(c), 1) for c in children)
            continue
        if key in sizes:
            if sizes[key] < 0:
                raise FormatError(f"{where}: a YAML value contains itself (an alias to an enclosing value)")
            continue
        sizes[key] = -1  # in progress
        distinct += 1
        stack.append((node, True))
        stack.extend((c, False) for c in children if isinstance(c, (list, dict)))
    total = sizes.get(id(data), 1)
    if total > distinct + limit and total > 2 * distinct:
        raise FormatError(f"{where}: YAML aliases expand it to more than {limit:,} extra values "
                          f"({total:,}); write the values out")
