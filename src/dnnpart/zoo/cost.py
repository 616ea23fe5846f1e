"""A small analytic cost model for the built-in examples: roofline time + launch overhead.

An operator that performs ``flops`` floating-point operations and moves ``bytes_moved`` bytes
through device memory takes, on a device with peak rate ``peak_flops`` and memory bandwidth
``memory_bandwidth``,

    time = max(flops / peak_flops, bytes_moved / memory_bandwidth) + launch_overhead

(the roofline model: an operator is either compute-bound or bandwidth-bound). A tensor that
crosses between an accelerator and host DRAM costs ``n_bytes / host_bandwidth`` on the host
link (PCIe 3.0 x16 by default, paper 1's setting).

Conventions
-----------
* **Times are in milliseconds**, like the reference workloads of paper 1.
* **FLOPs count the multiply and the add of a multiply-add separately** (a ``k``-term dot
  product is ``2k`` FLOPs), which is also how peak rates are quoted (an FMA is 2 FLOPs).
  ResNet-50 at 224x224 is thus ~8.2 GFLOPs (= ~4.1 G multiply-adds).
* Tensors are fp32 (:data:`BYTES_PER_ELEMENT` = 4).
* A node's memory is its weights plus its output activation
  (:func:`node_memory_bytes`).

The figures are deliberately round, public peak numbers: the examples need realistic
*ratios* (compute vs. transfer, accelerator vs. CPU), not a calibrated simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.devices.presets import PCIE3_X16_BANDWIDTH
from dnnpart.errors import UsageError

FloatArray = npt.NDArray[np.float64]

#: Bytes per tensor element (fp32).
BYTES_PER_ELEMENT = 4
_MS_PER_S = 1e3


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceProfile:
    """Roofline parameters of one device kind.

    Parameters
    ----------
    name : human-readable label.
    peak_flops : peak rate in FLOP/s (an FMA counts as 2 FLOPs).
    memory_bandwidth : device memory bandwidth in bytes/s.
    launch_overhead_ms : fixed cost per operator (kernel launch / op dispatch), in ms.

    Examples
    --------
    >>> p = DeviceProfile(name="toy", peak_flops=1e12, memory_bandwidth=1e11,
    ...                   launch_overhead_ms=0.0)
    >>> float(p.time_ms(flops=2e9, bytes_moved=1e6))   # compute-bound: 2e9 / 1e12 s
    2.0
    """

    name: str
    peak_flops: float
    memory_bandwidth: float
    launch_overhead_ms: float = 0.0

    def __post_init__(self) -> None:
        for attr in ("peak_flops", "memory_bandwidth"):
            value = getattr(self, attr)
            if not (np.isfinite(value) and value > 0):
                raise UsageError(f"{self.name}: {attr} must be a finite number > 0, got {value}")
        if not (np.isfinite(self.launch_overhead_ms) and self.launch_overhead_ms >= 0):
            raise UsageError(
                f"{self.name}: launch_overhead_ms must be >= 0, got {self.launch_overhead_ms}"
            )

    def time_ms(self, flops: npt.ArrayLike, bytes_moved: npt.ArrayLike) -> FloatArray:
        """Roofline time in milliseconds of operators with the given work (vectorised)."""
        compute_s = np.asarray(flops, dtype=np.float64) / self.peak_flops
        memory_s = np.asarray(bytes_moved, dtype=np.float64) / self.memory_bandwidth
        result: FloatArray = np.maximum(compute_s, memory_s) * _MS_PER_S + self.launch_overhead_ms
        return result


#: A generic V100-class accelerator: 15.7 TFLOP/s fp32 peak and 900 GB/s HBM2 (NVIDIA Tesla
#: V100 SXM2 datasheet); ~5 us per kernel launch (typical CUDA launch latency, 3-10 us).
ACCELERATOR_PROFILE = DeviceProfile(
    name="V100-class accelerator",
    peak_flops=15.7e12,
    memory_bandwidth=900e9,
    launch_overhead_ms=0.005,
)

#: A generic server CPU socket: ~1 TFLOP/s fp32 (a 20-core AVX-512 Xeon peaks near
#: 20 cores x 2.0 GHz x 64 FLOP/cycle = 2.6 TFLOP/s; sustained GEMM is roughly half) and
#: ~50 GB/s sustained DRAM bandwidth (STREAM on a 4-6 channel DDR4 socket lands around 50-100
#: GB/s); ~2 us per operator dispatch in an eager runtime.
CPU_PROFILE = DeviceProfile(
    name="CPU socket",
    peak_flops=1.0e12,
    memory_bandwidth=50e9,
    launch_overhead_ms=0.002,
)


def operator_time_ms(
    flops: npt.ArrayLike, bytes_moved: npt.ArrayLike, profile: DeviceProfile
) -> FloatArray:
    """Time in milliseconds of operators on a device: ``max(compute, memory) + overhead``.

    Examples
    --------
    >>> t = operator_time_ms(flops=[0.0, 15.7e9], bytes_moved=[9e6, 0.0],
    ...                      profile=ACCELERATOR_PROFILE)
    >>> [round(float(x), 3) for x in t]   # 10 us of HBM traffic; 1 ms of compute
    [0.015, 1.005]
    """
    return profile.time_ms(flops, bytes_moved)


def transfer_time_ms(
    n_bytes: npt.ArrayLike, bandwidth: float = PCIE3_X16_BANDWIDTH
) -> FloatArray:
    """Time in milliseconds to move tensors over the host link (PCIe 3.0 x16 by default).

    Examples
    --------
    >>> round(float(transfer_time_ms(15.75e6)), 6)   # 15.75 MB at 15.75 GB/s
    1.0
    """
    if not (np.isfinite(bandwidth) and bandwidth > 0):
        raise UsageError(f"bandwidth must be a finite number > 0, got {bandwidth}")
    result: FloatArray = np.asarray(n_bytes, dtype=np.float64) / bandwidth * _MS_PER_S
    return result


def node_memory_bytes(weight_bytes: npt.ArrayLike, output_bytes: npt.ArrayLike) -> FloatArray:
    """Memory a node needs on its device: its weights plus its output activation.

    Examples
    --------
    >>> node_memory_bytes([4e6, 0.0], [1e5, 2e5]).tolist()
    [4100000.0, 200000.0]
    """
    result: FloatArray = np.asarray(weight_bytes, dtype=np.float64) + np.asarray(
        output_bytes, dtype=np.float64
    )
    return result
