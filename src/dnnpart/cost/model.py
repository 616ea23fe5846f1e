"""Pricing of operators and tensors on devices and links: the roofline, or calibrated classes.

An operator doing ``flops`` FLOPs and moving ``bytes_moved`` bytes takes, on a device,

    time = max(flops / effective_flops, bytes_moved / effective_bandwidth) + launch_overhead

(the roofline), unless the device carries calibrated parameters for the operator's class
(:attr:`~dnnpart.devices.specs.DeviceSpec.op_classes`, measured by ``dnnpart calibrate``):

    time = overhead_s + flops / flops_rate + bytes_moved / bytes_rate

**Why additive there.** The roofline's ``max`` says compute and memory traffic overlap fully,
as on a GPU running one large kernel. On a CPU running eager torch they barely do: a kernel
streams its operands through caches while it computes, the framework's dispatch precedes
every kernel, and small operators are all dispatch. Measured CPU times fit a sum of the three
terms over the sizes calibration covers (its per-class fit errors say how well); each term
may be absent (rate ``inf``). Classes a device has no parameters for fall back to its
roofline. Calibrated rates are measured at fp32 and used at every precision (bytes scale with
the precision's width, FLOPs keep the measured rate: eager CPU kernels have no faster bf16
path the calibration saw).

A tensor of ``n`` bytes crosses a link in ``latency + n / bandwidth``. Graphs carry
**milliseconds** (:data:`TIME_UNIT`), like the reference workloads and the built-in zoo.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.cost.ops import Work
from dnnpart.cost.specs import PRECISION_BYTES, PRECISIONS, Catalog, DeviceSpec, LinkSpec, load_catalog
from dnnpart.devices.specs import cost_key_chain
from dnnpart.errors import UsageError

FloatArray = npt.NDArray[np.float64]

#: Unit of every time a priced graph carries.
TIME_UNIT = "ms"
MS_PER_S = 1e3


def roofline_time_s(
    flops: npt.ArrayLike, bytes_moved: npt.ArrayLike, device: DeviceSpec, precision: str = "fp32"
) -> FloatArray:
    """Seconds per operator on ``device`` (vectorised).

    Examples
    --------
    >>> d = DeviceSpec(name="toy", kind="accelerator", peak_flops=1e12, memory_bandwidth=1e11,
    ...                launch_overhead_s=1e-6)
    >>> roofline_time_s([2e9, 0.0], [1e6, 1e9], d).round(6).tolist()  # compute-, memory-bound
    [0.002001, 0.010001]
    """
    compute = np.asarray(flops, dtype=np.float64) / (device.peak_at(precision) * device.compute_efficiency)
    memory = np.asarray(bytes_moved, dtype=np.float64) / device.effective_bandwidth
    result: FloatArray = np.maximum(compute, memory) + device.launch_overhead_s
    return result


def device_time_s(
    flops: npt.ArrayLike, bytes_moved: npt.ArrayLike, classes: Sequence[str], device: DeviceSpec,
    precision: str = "fp32", fresh_bytes: npt.ArrayLike | None = None,
) -> FloatArray:
    """Seconds per operator on ``device``: its calibrated parameters where it has them for the
    operator's cost key (``classes``, one per operator: ``CLASS:KIND@D`` priced by that key's
    parameters, else ``CLASS:KIND``'s, else its class's), the roofline elsewhere; plus ``fresh_bytes`` (large
    outputs, :data:`~dnnpart.cost.ops.FRESH_ALLOCATION_BYTES`) at the device's
    ``fresh_bytes_rate``.

    Examples
    --------
    >>> from dnnpart.devices.specs import OpClassCost
    >>> d = DeviceSpec(name="toy", kind="accelerator", peak_flops=1e12, memory_bandwidth=1e11,
    ...                op_classes=(OpClassCost(name="matmul", flops_rate=1e11, bytes_rate=1e10,
    ...                                        overhead_s=1e-5),))
    >>> device_time_s([2e9, 2e9], [1e8, 1e8], ["matmul", "conv"], d).round(5).tolist()
    [0.03001, 0.002]
    >>> device_time_s([2e9], [1e8], ["matmul:nt"], d).round(5).tolist()   # priced as matmul
    [0.03001]
    """
    f = np.asarray(flops, dtype=np.float64)
    b = np.asarray(bytes_moved, dtype=np.float64)
    result = roofline_time_s(f, b, device, precision)
    if device.op_classes:
        own = {cost.name for cost in device.op_classes}
        # a key the device has no parameters for is priced by the next one of its chain
        names = np.asarray([next((c for c in cost_key_chain(k) if c in own), k) for k in classes],
                           dtype=object)
        for cost in device.op_classes:
            mask = names == cost.name
            if mask.any():
                result[mask] = cost.time_s(f[mask], b[mask])
    if fresh_bytes is not None and math.isfinite(device.fresh_bytes_rate):
        result = result + np.asarray(fresh_bytes, dtype=np.float64) / device.fresh_bytes_rate
    return result


def transfer_time_s(n_bytes: npt.ArrayLike, link: LinkSpec) -> FloatArray:
    """Seconds to move tensors over ``link``: latency + bytes / bandwidth (0 bytes: 0 s).

    Examples
    --------
    >>> transfer_time_s([0.0, 31.5e6], LinkSpec(name="pcie4", bandwidth=31.5e9, latency=1e-6)).tolist()
    [0.0, 0.001001]
    """
    b = np.asarray(n_bytes, dtype=np.float64)
    result: FloatArray = np.where(b > 0, link.latency + b / link.bandwidth, 0.0)
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class CostModel:
    """Prices a graph's two compute-time columns (CPU, accelerator) and its edges.

    Parameters
    ----------
    accelerator : the accelerator kind's spec.
    cpu : the CPU kind's spec.
    host_link : the reference link edges are priced on (accelerator <-> host DRAM).
    precision : compute precision (``fp32``, ``tf32``, ``bf16``, ``fp16``): FLOPs run at the
        device's peak for it, and tensors are stored at its width (``bytes_factor``: bytes
        measured on an fp32 capture are scaled by ``bytes/element / 4``).

    Examples
    --------
    >>> m = CostModel.from_presets("A100-40GB")
    >>> m.host_link.name
    'pcie4-x16'
    >>> t = m.compute_times_ms([Work(1.95e9, 0.0)])   # 1.95 GFLOPs
    >>> round(float(t[0, 1]), 4)   # on the accelerator: 1.95e9 / (19.5e12 * 0.7) s + 5 us
    0.1479
    """

    accelerator: DeviceSpec
    cpu: DeviceSpec
    host_link: LinkSpec
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")

    @property
    def bytes_factor(self) -> float:
        """Bytes per element at this precision over fp32's (what captures measure)."""
        return PRECISION_BYTES[self.precision] / 4.0

    def with_precision(self, precision: str) -> CostModel:
        """The same devices and link at another precision."""
        from dataclasses import replace

        return replace(self, precision=precision)

    @classmethod
    def from_presets(
        cls,
        accelerator: str = "A100-40GB",
        cpu: str = "cpu",
        host_link: str | None = None,
        catalog: Catalog | None = None,
    ) -> CostModel:
        """Build from preset names; the host link defaults to the accelerator's."""
        cat = catalog or load_catalog()
        acc = cat.device(accelerator)
        link = cat.link(host_link or acc.host_link or "pcie3-x16")
        return cls(accelerator=acc, cpu=cat.device(cpu), host_link=link)

    def compute_times_ms(self, works: Sequence[Work]) -> FloatArray:
        """``(n, 2)`` times in ms: column 0 on the CPU, column 1 on the accelerator."""
        flops = np.fromiter((w.flops for w in works), np.float64, len(works))
        moved = np.fromiter((w.bytes_moved for w in works), np.float64, len(works))
        moved = moved * self.bytes_factor
        classes = [w.cost_key for w in works]
        fresh = np.fromiter((w.fresh_bytes for w in works), np.float64, len(works)) * self.bytes_factor
        cpu = device_time_s(flops, moved, classes, self.cpu, self.precision, fresh)
        acc = device_time_s(flops, moved, classes, self.accelerator, self.precision, fresh)
        result: FloatArray = np.column_stack((cpu, acc)) * MS_PER_S
        return result

    def edge_costs_ms(self, n_bytes: npt.ArrayLike) -> FloatArray:
        """Transfer times in ms of tensors over the host link."""
        scaled = np.asarray(n_bytes, dtype=np.float64) * self.bytes_factor
        result: FloatArray = transfer_time_s(scaled, self.host_link) * MS_PER_S
        return result

    def describe(self) -> str:
        mem = self.accelerator.memory_bytes
        memory = f"{mem / 1e9:g} GB" if math.isfinite(mem) else "unbounded"
        return (
            f"accelerator {self.accelerator.name} ({memory}), CPU {self.cpu.name}, "
            f"host link {self.host_link.name}, {self.precision}; times in {TIME_UNIT}"
        )
