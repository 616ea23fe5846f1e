"""Devices and the links between them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart._arrays import unique_ints
from dnnpart.devices.links import Link as Link  # re-exported: its home before links.py
from dnnpart.devices.links import LinkTable
from dnnpart.devices.specs import DeviceSpec
from dnnpart.errors import UnknownIdError, UsageError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ACCELERATOR = "accelerator"
CPU = "cpu"


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    """One device.

    Parameters
    ----------
    name : unique name, e.g. ``"acc0"``.
    kind : ``"accelerator"`` or ``"cpu"`` (a column of the graph's compute times).
    memory_bytes : capacity; ``inf`` for host CPUs, whose memory the paper leaves unbounded.
    speed : relative speed; a node's time on this device is its time for the kind / speed.
    spec : the roofline that prices it (:class:`~dnnpart.devices.specs.DeviceSpec`: peak
        FLOP/s, memory bandwidth, efficiencies), where known: every cost model that prices work
        on this device from first principles reads it here (paper 3's layer costs, for one).
        Clusters resolved from ``--cluster SPEC`` carry the preset's spec.
    """

    name: str
    kind: str
    memory_bytes: float = math.inf
    speed: float = 1.0
    spec: DeviceSpec | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise UsageError("device name must be non-empty")
        if self.kind not in (ACCELERATOR, CPU):
            raise UsageError(f"device {self.name}: kind must be 'accelerator' or 'cpu', got {self.kind!r}")
        if math.isnan(self.memory_bytes) or self.memory_bytes < 0:
            raise UsageError(f"device {self.name}: memory_bytes must be >= 0, got {self.memory_bytes}")
        if not (math.isfinite(self.speed) and self.speed > 0):
            raise UsageError(f"device {self.name}: speed must be a finite number > 0, got {self.speed}")
        if self.spec is not None and self.spec.kind != self.kind:
            raise UsageError(f"device {self.name}: a device of kind {self.kind} cannot be "
                             f"priced by the {self.spec.kind} spec {self.spec.name!r}")

    @property
    def is_accelerator(self) -> bool:
        return self.kind == ACCELERATOR


def _all_nonnegative(arr: FloatArray) -> bool:
    """No NaN and nothing below 0 (one pass: NaN fails ``>= 0``), a row block at a time so
    a (4096, 4096) matrix needs no 16 MB mask."""
    flat = arr.reshape(-1)
    step = 1 << 18
    return all(bool((flat[i:i + step] >= 0).all()) for i in range(0, flat.size, step))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Cluster:
    """A set of devices, host links and device-to-device links.

    Parameters
    ----------
    devices : the devices; plans refer to them by index.
    host_link_scale : ``(d,)`` factor on an edge's reference transfer cost for each device's
        link to host DRAM (1.0 = the reference link the graph's costs were measured on).
    bandwidth : ``(d, d)`` device-to-device bandwidth in bytes/s (``inf`` on the diagonal).
    latency : ``(d, d)`` device-to-device latency in seconds.
    group : ``(d,)`` index of the machine/node each device sits in (two-level hierarchies).
    time_unit_s : seconds per unit of the graph's times (``1e-3``: milliseconds, the unit of
        paper 1's files and of the zoo). Converts ``bytes / bandwidth`` into load units, e.g.
        for the all-reduce of a replicated stage (paper 1, appendix C.2).
    reference_bandwidth : bytes/s of the link the graph's edge costs were measured on, used
        only by *hierarchical* clusters (accelerators in more than one ``group``, paper 1
        appendix C.3): a transfer between devices ``i`` and ``j`` there costs the edge's cost
        times ``reference_bandwidth / bandwidth[i, j]`` (:meth:`transfer_scale`). ``None``
        (default): the fastest link between two distinct accelerators. Flat clusters ignore
        it and price every transfer at ``host_link_scale``.
    links : the physical topology the matrices were routed from
        (:func:`dnnpart.devices.topology.cluster_from_links`); empty when the matrices were
        given directly (paper 1's files, presets), which are then used as they are. Any
        sequence of :class:`Link`; kept as a :class:`~dnnpart.devices.links.LinkTable`
        (arrays; a :class:`Link` is created for each one read).
    routed : whether the matrices were derived from ``links`` by the routing rule (then a
        transfer's path is known: :func:`dnnpart.devices.routing.route_path`), rather than
        given with the links kept for display (e.g. DGX-1, which does not forward NVLink).
    routing : the cluster's one routing rule (:data:`dnnpart.devices.routing.ROUTING_RULES`):
        ``"widest"`` (default), ``"store-and-forward"`` or ``"direct"``; used for the matrices of a routed
        cluster and for the paths of link contention.

    Examples
    --------
    >>> from dnnpart.devices import reference_cluster
    >>> c = reference_cluster(n_accelerators=2, n_cpus=1, memory_bytes=16e9)
    >>> [d.name for d in c.devices], c.n_accelerators
    (['acc0', 'acc1', 'cpu0'], 2)
    """

    devices: tuple[Device, ...]
    host_link_scale: FloatArray = field(default_factory=lambda: np.zeros(0))
    bandwidth: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    latency: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    group: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    name: str = ""
    time_unit_s: float = 1e-3
    reference_bandwidth: float | None = None
    links: Sequence[Link] = ()
    routed: bool = False
    routing: str = "widest"

    def __post_init__(self) -> None:
        d = len(self.devices)
        if self.routing not in ("widest", "store-and-forward", "direct"):  # ROUTING_RULES
            raise UsageError(f"cluster routing must be 'widest', 'store-and-forward' or "
                             f"'direct', got {self.routing!r}")
        table = LinkTable.of(self.links)
        object.__setattr__(self, "links", table)
        if table.max_end() >= d:
            k = int(np.argmax(np.maximum(table.a, table.b) >= d))
            raise UsageError(f"link {table.a[k]}-{table.b[k]}: the cluster has {d} devices")
        ref = self.reference_bandwidth
        if ref is not None and not (math.isfinite(ref) and ref > 0):
            raise UsageError(f"cluster reference_bandwidth must be a finite number > 0, got {ref}")
        if not (math.isfinite(self.time_unit_s) and self.time_unit_s > 0):
            raise UsageError(f"cluster time_unit_s must be a finite number > 0, got {self.time_unit_s}")
        if d == 0:
            raise UsageError("a cluster needs at least one device")
        names = [dev.name for dev in self.devices]
        if len(set(names)) != d:
            dup = next(x for x in names if names.count(x) > 1)
            raise UsageError(f"duplicate device name {dup!r}")
        # (shape, dtype, fill when not given): a default is built only when used (two
        # unused (d, d) defaults of 4,096 devices would take 256 MB)
        defaults = {
            "host_link_scale": ((d,), np.float64, 1.0),
            "bandwidth": ((d, d), np.float64, math.inf),
            "latency": ((d, d), np.float64, 0.0),
            "group": ((d,), np.int64, 0),
        }
        for attr, (shape, dtype, fill) in defaults.items():
            arr = getattr(self, attr)
            if np.size(arr) == 0:
                arr = np.full(shape, fill, dtype)
            keep = (isinstance(arr, np.ndarray) and arr.dtype == dtype
                    and not arr.flags.writeable and arr.flags.c_contiguous)
            arr = arr if keep else np.array(arr, dtype=dtype)  # read-only: no copy
            if arr.shape != shape:
                raise UsageError(f"cluster {attr}: expected shape {shape}, got {arr.shape}")
            if arr.dtype.kind == "f" and not _all_nonnegative(arr):
                raise UsageError(f"cluster {attr}: values must be >= 0")
            arr.flags.writeable = False
            object.__setattr__(self, attr, arr)
        if self.is_hierarchical:
            # A hierarchy prices transfers by bandwidth (transfer_scale): an unspecified
            # (infinite) or zero link would make them free or impossible without saying so.
            off = ~np.eye(d, dtype=np.bool_)
            bad = off & ~(np.isfinite(self.bandwidth) & (self.bandwidth > 0))
            if bad.any():
                i, j = (int(x) for x in np.argwhere(bad)[0])
                raise UsageError(
                    "cluster bandwidth: accelerators in several groups (a hierarchy) need a finite "
                    f"bandwidth > 0 between every two devices; {names[i]} -> {names[j]} has "
                    f"{self.bandwidth[i, j]}"
                )

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def accelerators(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self.devices) if d.is_accelerator)

    @property
    def cpus(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self.devices) if not d.is_accelerator)

    @property
    def n_accelerators(self) -> int:
        return len(self.accelerators)

    @property
    def n_cpus(self) -> int:
        return len(self.cpus)

    def is_accelerator(self) -> npt.NDArray[np.bool_]:
        """Mask over devices."""
        return np.array([d.is_accelerator for d in self.devices], dtype=np.bool_)

    def memory_capacity(self) -> FloatArray:
        return np.array([d.memory_bytes for d in self.devices], dtype=np.float64)

    def speeds(self) -> FloatArray:
        return np.array([d.speed for d in self.devices], dtype=np.float64)

    def kinds(self) -> tuple[str, ...]:
        return tuple(d.kind for d in self.devices)

    def group_bandwidth(self, devices: npt.ArrayLike) -> float:
        """Slowest link between two distinct ``devices`` in bytes/s (``inf`` for fewer than two).

        This is the bandwidth ``B`` of a ring all-reduce among them (paper 1, appendix C.2).

        Examples
        --------
        >>> from dnnpart.devices import reference_cluster
        >>> c = reference_cluster(n_accelerators=3, n_cpus=0, memory_bytes=1e9, host_bandwidth=8e9)
        >>> c.group_bandwidth([0, 2]), c.group_bandwidth([1])
        (4000000000.0, inf)
        """
        idx = unique_ints(np.asarray(devices, dtype=np.int64))
        if idx.size < 2:
            return math.inf
        block = self.bandwidth[np.ix_(idx, idx)].copy()
        np.fill_diagonal(block, math.inf)
        return float(block.min())

    @property
    def is_hierarchical(self) -> bool:
        """Whether the accelerators sit in more than one ``group`` (paper 1, appendix C.3).

        Examples
        --------
        >>> from dnnpart.devices import reference_cluster
        >>> reference_cluster(n_accelerators=2, n_cpus=1, memory_bytes=1e9).is_hierarchical
        False
        """
        accs = list(self.accelerators)
        return bool(accs) and unique_ints(self.group[accs]).size > 1

    def transfer_scale(self) -> FloatArray:
        """``(d, d)`` factor on an edge's cost for a transfer from device ``i`` to ``j``.

        ``reference_bandwidth / bandwidth[i, j]`` (``inf`` without a link, 0 on the diagonal);
        the reference defaults to the fastest link between two distinct accelerators. Used by
        the load model of hierarchical clusters only.

        Examples
        --------
        >>> from dnnpart.devices import two_level_cluster
        >>> c = two_level_cluster(n_groups=2, accelerators_per_group=1, memory_bytes=1e9,
        ...                       intra_bandwidth=100e9, inter_bandwidth=25e9)
        >>> c.transfer_scale().tolist()
        [[0.0, 4.0], [4.0, 0.0]]
        """
        d = self.n_devices
        ref = self.reference_bandwidth
        if ref is None:
            accs = list(self.accelerators)
            block = self.bandwidth[np.ix_(accs, accs)][~np.eye(len(accs), dtype=np.bool_)]
            finite = block[np.isfinite(block) & (block > 0)]
            ref = float(finite.max()) if finite.size else 1.0
        with np.errstate(divide="ignore"):
            scale: FloatArray = np.where(self.bandwidth > 0, ref / self.bandwidth, math.inf)
        scale[np.eye(d, dtype=np.bool_)] = 0.0
        return scale

    def index(self, name: str) -> int:
        """Device index by name; ``KeyError`` lists the valid names."""
        for i, d in enumerate(self.devices):
            if d.name == name:
                return i
        raise UnknownIdError(f"unknown device {name!r}; devices are {[d.name for d in self.devices]}")
