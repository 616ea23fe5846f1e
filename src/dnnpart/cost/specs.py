"""Device and link specifications of the cost model, and the preset catalog they come from.

The catalog is a YAML (or JSON) file with ``devices``, ``links`` and ``aliases`` sections; the
built-in one is ``dnnpart/cost/presets.yaml``, each value with its source in a comment. Users
pass their own file of the same shape to :func:`load_catalog`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from dnnpart.errors import FormatError

ACCELERATOR = "accelerator"
CPU = "cpu"
#: Compute precisions the cost model knows; bytes per element of each.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
PRECISION_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec:
    """Roofline parameters of one device.

    Parameters
    ----------
    name : preset name, e.g. ``"A100-40GB"``.
    kind : ``"accelerator"`` or ``"cpu"`` (the graph column it prices).
    peak_flops : peak rate in FLOP/s (an FMA counts as 2 FLOPs).
    memory_bandwidth : device memory bandwidth in bytes/s.
    memory_bytes : capacity (``inf`` = unbounded).
    compute_efficiency, bandwidth_efficiency : fractions of the peaks real kernels sustain.
    launch_overhead_s : fixed time per operator (kernel launch / dispatch).
    default_link : link that joins several devices of this kind (``"4xA100"`` shorthand).
    host_link : link to host DRAM.
    peak_flops_tf32, peak_flops_bf16, peak_flops_fp16 : dense tensor-core peaks for those
        precisions (``None``: the device has no faster path; ``peak_flops`` applies).

    Examples
    --------
    >>> d = DeviceSpec(name="toy", kind="accelerator", peak_flops=1e12, memory_bandwidth=1e11)
    >>> d.effective_flops, d.effective_bandwidth
    (1000000000000.0, 100000000000.0)
    """

    name: str
    kind: str
    peak_flops: float
    memory_bandwidth: float
    memory_bytes: float = math.inf
    compute_efficiency: float = 1.0
    bandwidth_efficiency: float = 1.0
    launch_overhead_s: float = 0.0
    default_link: str = ""
    host_link: str = ""
    peak_flops_tf32: float | None = None
    peak_flops_bf16: float | None = None
    peak_flops_fp16: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in (ACCELERATOR, CPU):
            raise ValueError(f"device {self.name}: kind must be 'accelerator' or 'cpu', got {self.kind!r}")
        for attr in ("peak_flops", "memory_bandwidth"):
            value = getattr(self, attr)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"device {self.name}: {attr} must be a finite number > 0, got {value}")
        for attr in ("compute_efficiency", "bandwidth_efficiency"):
            value = getattr(self, attr)
            if not (0 < value <= 1):
                raise ValueError(f"device {self.name}: {attr} must be in (0, 1], got {value}")
        if not (math.isfinite(self.launch_overhead_s) and self.launch_overhead_s >= 0):
            raise ValueError(
                f"device {self.name}: launch_overhead_s must be >= 0, got {self.launch_overhead_s}"
            )
        if math.isnan(self.memory_bytes) or self.memory_bytes < 0:
            raise ValueError(f"device {self.name}: memory_bytes must be >= 0, got {self.memory_bytes}")

    @property
    def effective_flops(self) -> float:
        """Sustained FLOP/s: peak x compute efficiency."""
        return self.peak_flops * self.compute_efficiency

    def peak_at(self, precision: str) -> float:
        """Peak FLOP/s at ``precision`` (``fp32``, ``tf32``, ``bf16``, ``fp16``).

        Examples
        --------
        >>> d = DeviceSpec(name="t", kind="accelerator", peak_flops=1e12, memory_bandwidth=1e11,
        ...                peak_flops_bf16=8e12)
        >>> d.peak_at("bf16"), d.peak_at("tf32")
        (8000000000000.0, 1000000000000.0)
        """
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        value = None if precision == "fp32" else getattr(self, f"peak_flops_{precision}")
        return self.peak_flops if value is None else float(value)

    @property
    def effective_bandwidth(self) -> float:
        """Sustained bytes/s: peak x bandwidth efficiency."""
        return self.memory_bandwidth * self.bandwidth_efficiency


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSpec:
    """A link: ``time = latency + bytes / bandwidth``.

    Examples
    --------
    >>> LinkSpec(name="pcie", bandwidth=16e9, latency=1e-6).transfer_time_s(16e6)
    0.001001
    """

    name: str
    bandwidth: float
    latency: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f"link {self.name}: bandwidth must be a finite number > 0, got {self.bandwidth}")
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise ValueError(f"link {self.name}: latency must be >= 0, got {self.latency}")

    def transfer_time_s(self, n_bytes: float) -> float:
        """Seconds to move ``n_bytes`` over the link (0 bytes cost nothing)."""
        return 0.0 if n_bytes <= 0 else self.latency + n_bytes / self.bandwidth


@dataclass(frozen=True, slots=True)
class Catalog:
    """Named device and link specs, with aliases (``"A100"`` -> ``"A100-40GB"``).

    Examples
    --------
    >>> cat = load_catalog()
    >>> cat.device("a100").name, cat.link("pcie4").bandwidth
    ('A100-40GB', 31500000000.0)
    """

    devices: dict[str, DeviceSpec] = field(default_factory=dict)
    links: dict[str, LinkSpec] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def _resolve(self, name: str, table: dict[str, Any], what: str) -> Any:
        lowered = {k.lower(): k for k in table}
        alias = {k.lower(): v for k, v in self.aliases.items()}
        key = name.strip().lower()
        key = alias.get(key, key).lower()
        if key not in lowered:
            raise FormatError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}")
        return table[lowered[key]]

    def device(self, name: str) -> DeviceSpec:
        """Device spec by name or alias (case-insensitive); ``FormatError`` lists the names."""
        spec: DeviceSpec = self._resolve(name, self.devices, "device preset")
        return spec

    def link(self, name: str) -> LinkSpec:
        """Link spec by name or alias (case-insensitive)."""
        spec: LinkSpec = self._resolve(name, self.links, "link preset")
        return spec


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise FormatError(f"{where}: expected a number, got {value!r}")
    try:
        return float(value)  # YAML 1.1 reads 1.5e12 (no exponent sign) as text
    except (TypeError, ValueError):
        raise FormatError(f"{where}: expected a number, got {value!r}") from None


_DEVICE_NUMBERS = (
    "peak_flops",
    "memory_bandwidth",
    "memory_bytes",
    "compute_efficiency",
    "bandwidth_efficiency",
    "launch_overhead_s",
    "peak_flops_tf32",
    "peak_flops_bf16",
    "peak_flops_fp16",
)


def parse_catalog(data: Any, source: str = "<catalog>") -> Catalog:
    """Validate a parsed catalog (``devices``/``links``/``aliases`` mappings).

    Examples
    --------
    >>> c = parse_catalog({"devices": {"x": {"kind": "cpu", "peak_flops": "1e12",
    ...                                      "memory_bandwidth": 1e11}}})
    >>> c.device("x").peak_flops
    1000000000000.0
    """
    if not isinstance(data, dict):
        raise FormatError(f"{source}: expected a mapping with 'devices' and 'links'")
    devices: dict[str, DeviceSpec] = {}
    for name, entry in (data.get("devices") or {}).items():
        where = f"{source}: devices.{name}"
        if not isinstance(entry, dict):
            raise FormatError(f"{where}: expected a mapping")
        kwargs: dict[str, Any] = {"name": str(name), "kind": str(entry.get("kind", ACCELERATOR))}
        for key in _DEVICE_NUMBERS:
            if key in entry:
                kwargs[key] = _number(entry[key], f"{where}.{key}")
        for key in ("default_link", "host_link"):
            if key in entry:
                kwargs[key] = str(entry[key])
        unknown = set(entry) - {"kind", "default_link", "host_link", *_DEVICE_NUMBERS}
        if unknown:
            raise FormatError(f"{where}: unknown field(s) {sorted(unknown)}")
        try:
            devices[str(name)] = DeviceSpec(**kwargs)
        except (TypeError, ValueError) as exc:
            raise FormatError(f"{where}: {exc}") from None
    links: dict[str, LinkSpec] = {}
    for name, entry in (data.get("links") or {}).items():
        where = f"{source}: links.{name}"
        if not isinstance(entry, dict) or "bandwidth" not in entry:
            raise FormatError(f"{where}: expected a mapping with 'bandwidth' (and 'latency')")
        try:
            links[str(name)] = LinkSpec(
                name=str(name),
                bandwidth=_number(entry["bandwidth"], f"{where}.bandwidth"),
                latency=_number(entry.get("latency", 0.0), f"{where}.latency"),
            )
        except ValueError as exc:
            raise FormatError(f"{where}: {exc}") from None
    aliases = {str(k): str(v) for k, v in (data.get("aliases") or {}).items()}
    return Catalog(devices=devices, links=links, aliases=aliases)


@lru_cache(maxsize=1)
def _builtin() -> Catalog:
    import yaml

    text = resources.files("dnnpart.cost").joinpath("presets.yaml").read_text(encoding="utf-8")
    return parse_catalog(yaml.safe_load(text), "presets.yaml")


def load_catalog(path: str | Path | None = None) -> Catalog:
    """The built-in presets, or those of a user file (YAML or JSON) merged over them.

    Examples
    --------
    >>> sorted(load_catalog().devices)[:3]
    ['A100-40GB', 'A100-80GB', 'H100-80GB']
    """
    base = _builtin()
    if path is None:
        return base
    import yaml

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FormatError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FormatError(f"{p}: not a readable YAML/JSON spec file ({exc})") from None
    user = parse_catalog(data, str(p))
    return Catalog(
        devices={**base.devices, **user.devices},
        links={**base.links, **user.links},
        aliases={**base.aliases, **user.aliases},
    )
