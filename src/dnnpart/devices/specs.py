"""Device and link specifications: the roofline that prices a device, and a link's speed.

A :class:`DeviceSpec` is what a device *is* (peak FLOP/s, memory bandwidth, efficiencies,
and optionally per-op-class parameters measured by ``dnnpart calibrate``); every cluster
device may carry one (:attr:`dnnpart.devices.cluster.Device.spec`), and every
cost model reads it from there or from the preset catalog (:mod:`dnnpart.cost.specs`), which
holds named specs. :func:`device_spec_from_dict` and :func:`device_spec_to_dict` are the one
reading and writing of a spec, for catalogs and for cluster files alike.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Any

from dnnpart.errors import FormatError, UsageError

ACCELERATOR = "accelerator"
CPU = "cpu"
#: Compute precisions the cost model knows; bytes per element of each.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
PRECISION_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
#: Operator classes a device may carry calibrated parameters for (:class:`OpClassCost`); the
#: mapping of operator types onto them is :data:`dnnpart.cost.ops.OP_CLASS`.
OP_CLASSES = ("matmul", "conv", "depthwise_conv", "attention", "elementwise", "norm", "embedding",
              "reduce", "copy", "view", "meta")
#: A finer cost key ``CLASS:KIND`` (``elementwise:tanh``, ``matmul:nt``, ``conv:conv@32``): the
#: kind is an operator type or a matrix product's operand layout, with ``@D`` for a product
#: whose smallest dimension is at most ``D``, ``@big`` for one with an operand past a
#: last-level cache, ``@wide`` for a depthwise backward whose workspace is a fresh allocation
#: (:attr:`dnnpart.cost.ops.Work.op_kind`).
_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}(@([0-9]{1,9}|big|wide))?")


def class_of(name: str) -> str:
    """The class of a cost key (``"elementwise:tanh"`` -> ``"elementwise"``).

    Examples
    --------
    >>> class_of("elementwise:tanh"), class_of("conv")
    ('elementwise', 'conv')
    """
    return name.partition(":")[0]


def cost_key_chain(name: str) -> tuple[str, ...]:
    """The keys that may price an operator of cost key ``name``, most specific first: the key,
    the key without its size bucket, then (a kind with a variant suffix of
    :data:`KIND_VARIANTS`, ``conv_backward_strided``) the same two of its plain kind, then the
    class. So a machine file calibrated before a variant was priced apart prices it as before.

    Examples
    --------
    >>> cost_key_chain("matmul:nt@32"), cost_key_chain("conv")
    (('matmul:nt@32', 'matmul:nt', 'matmul'), ('conv',))
    >>> cost_key_chain("conv:conv_strided@128")
    ('conv:conv_strided@128', 'conv:conv_strided', 'conv:conv@128', 'conv:conv', 'conv')
    >>> cost_key_chain("elementwise:hardtanh_clamp")   # a variant is a suffix, not a substring
    ('elementwise:hardtanh_clamp', 'elementwise')
    """
    out = [name]
    if "@" in name:
        out.append(name.partition("@")[0])
    base, at, bucket = name.partition("@")
    plain = next((base[: -len(v)] + at + bucket for v in KIND_VARIANTS if ":" in base and base.endswith(v)),
                 None)
    if plain is not None:
        out.extend(cost_key_chain(plain)[:-1])
    if ":" in name:
        out.append(class_of(name))
    return tuple(out)


#: Suffixes of a kind that mark a variant its kernel runs apart from the plain kind (a
#: convolution with a stride above 1: ``conv_strided``; a depthwise one on channels-last
#: tensors: ``conv_cl``); a kind has one at most.
KIND_VARIANTS = ("_strided", "_cl")


def is_cost_key(name: Any) -> bool:
    """Whether ``name`` is a class of :data:`OP_CLASSES` or ``CLASS:KIND`` of one.

    Examples
    --------
    >>> is_cost_key("matmul"), is_cost_key("matmul:nt@32"), is_cost_key("matmull"), is_cost_key("norm:")
    (True, True, False, False)
    """
    if not isinstance(name, str):
        return False
    cls, colon, kind = name.partition(":")
    return cls in OP_CLASSES and (not colon or _KIND.fullmatch(kind) is not None)
#: Fields of one class's parameters in a spec file (:func:`device_spec_from_dict`).
OP_CLASS_FIELDS = ("flops", "bytes", "overhead_s")
#: Bounds a spec file's class parameters must keep: a rate of 1/s or 100 E/s, or a per-op
#: overhead past a minute, is a typo (and would price graphs at inf), not a measurement.
RATE_RANGE = (1.0, 1e20)
MAX_OVERHEAD_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class OpClassCost:
    """Calibrated time of one operator class: ``overhead_s + flops / flops_rate + bytes /
    bytes_rate`` seconds (additive, see :mod:`dnnpart.cost.model`).

    Parameters
    ----------
    name : the class (one of :data:`OP_CLASSES`), or ``CLASS:KIND`` for one kind of its
        operators (:func:`is_cost_key`), which then takes precedence over the class.
    flops_rate : FLOP/s; ``inf``: FLOPs cost nothing in this class (no such term).
    bytes_rate : bytes moved per second; ``inf``: no bytes term.
    overhead_s : fixed seconds per operator (framework dispatch, kernel launch).

    Examples
    --------
    >>> OpClassCost(name="matmul", flops_rate=1e11, overhead_s=1e-5).time_s(1e9, 0.0)
    0.01001
    """

    name: str
    flops_rate: float = math.inf
    bytes_rate: float = math.inf
    overhead_s: float = 0.0

    def __post_init__(self) -> None:
        if not is_cost_key(self.name):
            raise UsageError(f"op class {self.name!r}: expected one of {', '.join(OP_CLASSES)}, "
                             "or CLASS:KIND")
        for attr in ("flops_rate", "bytes_rate"):
            value = getattr(self, attr)
            if math.isnan(value) or value <= 0:
                raise UsageError(f"op class {self.name}: {attr} must be > 0, got {value}")
        if not (math.isfinite(self.overhead_s) and self.overhead_s >= 0):
            raise UsageError(f"op class {self.name}: overhead_s must be >= 0, got {self.overhead_s}")

    def time_s(self, flops: Any, bytes_moved: Any) -> Any:
        """Seconds of an operator of this class: floats, or numpy arrays (one per operator)."""
        return self.overhead_s + flops / self.flops_rate + bytes_moved / self.bytes_rate


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
    op_classes : calibrated parameters of some operator classes (:class:`OpClassCost`, sorted
        by name); operators of other classes are priced by the roofline.
    fresh_bytes_rate : bytes/s at which the device's allocator hands an operator fresh memory
        for an output of at least :data:`dnnpart.cost.ops.FRESH_ALLOCATION_BYTES` (a CPU's
        page faults on memory the C allocator maps anew for every large block); ``inf``: free
        (a caching allocator: CUDA, or a preset).

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
    op_classes: tuple[OpClassCost, ...] = ()
    fresh_bytes_rate: float = math.inf

    def __post_init__(self) -> None:
        if self.kind not in (ACCELERATOR, CPU):
            raise UsageError(f"device {self.name}: kind must be 'accelerator' or 'cpu', got {self.kind!r}")
        for attr in ("peak_flops", "memory_bandwidth"):
            value = getattr(self, attr)
            if not (math.isfinite(value) and value > 0):
                raise UsageError(f"device {self.name}: {attr} must be a finite number > 0, got {value}")
        for attr in ("compute_efficiency", "bandwidth_efficiency"):
            value = getattr(self, attr)
            if not (0 < value <= 1):
                raise UsageError(f"device {self.name}: {attr} must be in (0, 1], got {value}")
        if not (math.isfinite(self.launch_overhead_s) and self.launch_overhead_s >= 0):
            raise UsageError(
                f"device {self.name}: launch_overhead_s must be >= 0, got {self.launch_overhead_s}"
            )
        if math.isnan(self.fresh_bytes_rate) or self.fresh_bytes_rate <= 0:
            raise UsageError(f"device {self.name}: fresh_bytes_rate must be > 0, got {self.fresh_bytes_rate}")
        if math.isnan(self.memory_bytes) or self.memory_bytes < 0:
            raise UsageError(f"device {self.name}: memory_bytes must be >= 0, got {self.memory_bytes}")
        names = [c.name for c in self.op_classes]
        if names != sorted(set(names)):
            raise UsageError(f"device {self.name}: op_classes must be sorted by name, each once, got {names}")

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
            raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
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
            raise UsageError(f"link {self.name}: bandwidth must be a finite number > 0, got {self.bandwidth}")
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise UsageError(f"link {self.name}: latency must be >= 0, got {self.latency}")

    def transfer_time_s(self, n_bytes: float) -> float:
        """Seconds to move ``n_bytes`` over the link (0 bytes cost nothing)."""
        return 0.0 if n_bytes <= 0 else self.latency + n_bytes / self.bandwidth


def spec_number(value: Any, where: str) -> float:
    """A number of a spec file (YAML 1.1 reads ``1.5e12`` as text); ``FormatError`` names it."""
    if isinstance(value, bool):
        raise FormatError(f"{where}: expected a number, got {value!r}")
    try:
        return float(value)  # YAML 1.1 reads 1.5e12 (no exponent sign) as text
    except (TypeError, ValueError):
        raise FormatError(f"{where}: expected a number, got {repr(value)[:60]}") from None
    except OverflowError:  # an integer past float64
        raise FormatError(f"{where}: expected a number, got an integer past float64") from None


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
    "fresh_bytes_rate",
)


def device_spec_from_dict(entry: Any, where: str, name: str | None = None) -> DeviceSpec:
    """A spec from its mapping; ``FormatError`` names the field. A catalog entry is named by
    its key (``name``); a cluster file's spec names itself (a ``name`` field).

    Examples
    --------
    >>> device_spec_from_dict({"kind": "cpu", "peak_flops": "1e12", "memory_bandwidth": 1e11},
    ...                       "devices.x", name="x").effective_flops
    1000000000000.0
    """
    if not isinstance(entry, dict):
        raise FormatError(f"{where}: expected a mapping")
    own = name is None
    if own and not isinstance(entry.get("name"), str):
        raise FormatError(f"{where}.name: expected the spec's name (text)")
    kwargs: dict[str, Any] = {"name": str(entry["name"] if own else name),
                              "kind": str(entry.get("kind", ACCELERATOR))}
    for key in _DEVICE_NUMBERS:
        if key in entry and entry[key] is not None:
            kwargs[key] = spec_number(entry[key], f"{where}.{key}")
    fresh = kwargs.get("fresh_bytes_rate")
    if fresh is not None and not (RATE_RANGE[0] <= fresh <= RATE_RANGE[1]):  # absent: free
        raise FormatError(f"{where}.fresh_bytes_rate: expected a rate in [{RATE_RANGE[0]:g}, "
                          f"{RATE_RANGE[1]:g}] bytes per second, got {fresh:g}")
    for key in ("default_link", "host_link"):
        if key in entry:
            kwargs[key] = str(entry[key])
    if entry.get("op_classes") is not None:
        kwargs["op_classes"] = op_classes_from_dict(entry["op_classes"], f"{where}.op_classes")
    allowed = {"kind", "default_link", "host_link", "op_classes", *_DEVICE_NUMBERS} | (
        {"name"} if own else set())
    unknown = set(entry) - allowed
    if unknown:
        raise FormatError(f"{where}: unknown field(s) {sorted(unknown)}")
    try:
        return DeviceSpec(**kwargs)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"{where}: {exc}") from None


def device_spec_to_dict(spec: DeviceSpec) -> dict[str, Any]:
    """The mapping :func:`device_spec_from_dict` reads back (``inf`` memory as the text "inf").

    Examples
    --------
    >>> d = DeviceSpec(name="t", kind="cpu", peak_flops=1e12, memory_bandwidth=1e11)
    >>> device_spec_from_dict(device_spec_to_dict(d), "spec") == d
    True
    """
    out: dict[str, Any] = {}
    for f in fields(spec):
        value = getattr(spec, f.name)
        absent_rate = f.name == "fresh_bytes_rate" and math.isinf(value)  # inf: no such field
        if value is None or value == "" or value == () or absent_rate:
            continue
        if f.name == "op_classes":
            out[f.name] = op_classes_to_dict(spec.op_classes)
            continue
        out[f.name] = "inf" if isinstance(value, float) and math.isinf(value) else value
    return out


def op_classes_from_dict(entry: Any, where: str) -> tuple[OpClassCost, ...]:
    """Calibrated classes from ``{class: {flops: F, bytes: B, overhead_s: o}}``.

    Each field is optional (a missing rate: no such term) but one must be there; rates lie in
    :data:`RATE_RANGE`, the overhead in ``[0, MAX_OVERHEAD_S]``. ``FormatError`` names the
    field.

    Examples
    --------
    >>> op_classes_from_dict({"matmul": {"flops": "2e10", "overhead_s": 5e-6}}, "c")[0].flops_rate
    20000000000.0
    >>> op_classes_from_dict({"matmul": {"flops": -1}}, "c")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: c.matmul.flops: expected a rate in [1, 1e+20] per second, got -1
    """
    if not isinstance(entry, dict):
        raise FormatError(f"{where}: expected a mapping of class -> {{flops, bytes, overhead_s}}")
    out: list[OpClassCost] = []
    for name, params in entry.items():
        at = f"{where}.{name}"
        if not is_cost_key(name):
            raise FormatError(f"{at}: unknown op class {str(name)[:40]!r}; known: {', '.join(OP_CLASSES)}, "
                              "each optionally as CLASS:KIND (lower-case kind)")
        if not isinstance(params, dict) or not params:
            raise FormatError(f"{at}: expected a mapping with one or more of {', '.join(OP_CLASS_FIELDS)}")
        unknown = set(params) - set(OP_CLASS_FIELDS)
        if unknown:
            raise FormatError(f"{at}: unknown field(s) {sorted(map(str, unknown))}")
        kwargs: dict[str, float] = {}
        for key, attr in (("flops", "flops_rate"), ("bytes", "bytes_rate")):
            if key in params:
                value = spec_number(params[key], f"{at}.{key}")
                low, high = RATE_RANGE
                if not (low <= value <= high):
                    raise FormatError(f"{at}.{key}: expected a rate in [{low:g}, {high:g}] per second, "
                                      f"got {value:g}")
                kwargs[attr] = value
        if "overhead_s" in params:
            value = spec_number(params["overhead_s"], f"{at}.overhead_s")
            if not (0 <= value <= MAX_OVERHEAD_S):
                raise FormatError(f"{at}.overhead_s: expected seconds in [0, {MAX_OVERHEAD_S:g}], "
                                  f"got {value:g}")
            kwargs["overhead_s"] = value
        out.append(OpClassCost(name=str(name), **kwargs))
    return tuple(sorted(out, key=lambda c: c.name))


def op_classes_to_dict(classes: tuple[OpClassCost, ...]) -> dict[str, dict[str, float]]:
    """The mapping :func:`op_classes_from_dict` reads (absent terms left out)."""
    out: dict[str, dict[str, float]] = {}
    for c in classes:
        params = {"flops": c.flops_rate, "bytes": c.bytes_rate, "overhead_s": c.overhead_s}
        out[c.name] = {k: float(v) for k, v in params.items() if math.isfinite(v)}
    return out
