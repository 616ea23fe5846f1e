"""The preset catalog: named device and link specifications (:mod:`dnnpart.devices.specs`).

The catalog is a YAML (or JSON) file with ``devices``, ``links`` and ``aliases`` sections; the
built-in one is ``dnnpart/cost/presets.yaml``, each value with its source in a comment. Users
pass their own file of the same shape to :func:`load_catalog`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from dnnpart._yaml import safe_load
from dnnpart.devices.specs import (
    ACCELERATOR,
    CPU,
    PRECISION_BYTES,
    PRECISIONS,
    DeviceSpec,
    LinkSpec,
    device_spec_from_dict,
    spec_number,
)
from dnnpart.errors import FormatError

__all__ = ["ACCELERATOR", "CPU", "PRECISIONS", "PRECISION_BYTES", "Catalog", "DeviceSpec", "LinkSpec",
           "load_catalog", "parse_catalog"]

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
        devices[str(name)] = device_spec_from_dict(entry, where, name=str(name))
    links: dict[str, LinkSpec] = {}
    for name, entry in (data.get("links") or {}).items():
        where = f"{source}: links.{name}"
        if not isinstance(entry, dict) or "bandwidth" not in entry:
            raise FormatError(f"{where}: expected a mapping with 'bandwidth' (and 'latency')")
        try:
            links[str(name)] = LinkSpec(
                name=str(name),
                bandwidth=spec_number(entry["bandwidth"], f"{where}.bandwidth"),
                latency=spec_number(entry.get("latency", 0.0), f"{where}.latency"),
            )
        except ValueError as exc:
            raise FormatError(f"{where}: {exc}") from None
    aliases = {str(k): str(v) for k, v in (data.get("aliases") or {}).items()}
    return Catalog(devices=devices, links=links, aliases=aliases)


@lru_cache(maxsize=1)
def _builtin() -> Catalog:
    text = resources.files("dnnpart.cost").joinpath("presets.yaml").read_text(encoding="utf-8")
    return parse_catalog(safe_load(text), "presets.yaml")


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

    from dnnpart.limits import check_nesting, read_bounded

    p = Path(path)
    try:
        text = read_bounded(p, what="spec file").decode("utf-8")
        check_nesting(text, str(p))  # the YAML parser recurses: refuse deep nesting first
        data = safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FormatError(f"{p}: not a readable YAML/JSON spec file ({exc})") from None
    return merged(base, parse_catalog(data, str(p)))


def merged(base: Catalog, user: Catalog) -> Catalog:
    """``user``'s devices, links and aliases over ``base``'s (same names: the user's)."""
    return Catalog(
        devices={**base.devices, **user.devices},
        links={**base.links, **user.links},
        aliases={**base.aliases, **user.aliases},
    )
