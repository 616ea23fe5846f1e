"""Device roofline and bandwidth matrices for OptCNN's cost model (paper 3, §6 setting).

Kept inside ``solvers/optcnn`` for now; a later session moves the P100 preset into
``devices/presets`` and takes the ``(d, d)`` bandwidth from the shared topology layer.

* :data:`P100`: NVIDIA Tesla P100 SXM2 (the paper's GPU). Peak FP32 10.6 TFLOP/s and HBM2
  bandwidth 732 GB/s are NVIDIA's published figures (Tesla P100 data sheet, 2016). The
  efficiency 0.5 (share of peak that cuDNN convolutions and GEMMs reach on average) is our
  choice; the paper does not give one (it profiles instead).
* :func:`two_level_bandwidth`: ``nodes x per_node`` GPUs numbered node by node. Inside a node,
  NVLink 1.0 at 20 GB/s per direction per GPU pair (one 20 GB/s link between each pair, as in
  the data sheet's 4-link P100 with one link per peer); between nodes 100 Gb/s EDR
  InfiniBand = 12.5 GB/s. The diagonal is infinite: a device does not send to itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "EDR_BPS", "NVLINK_BPS", "P100", "DeviceSpec", "paper_bandwidth", "two_level_bandwidth",
    "uniform_bandwidth",
]

FloatArray = npt.NDArray[np.float64]

#: NVLink 1.0, one link, one direction (bytes/s).
NVLINK_BPS = 20e9
#: 100 Gb/s EDR InfiniBand (bytes/s).
EDR_BPS = 100e9 / 8


@dataclass(frozen=True)
class DeviceSpec:
    """Roofline of one device.

    Examples
    --------
    >>> P100.flops_per_s
    5300000000000.0
    """

    name: str
    peak_flops: float
    efficiency: float
    mem_bandwidth: float

    @property
    def flops_per_s(self) -> float:
        """Sustained FLOP/s: peak times efficiency."""
        return self.peak_flops * self.efficiency


#: NVIDIA Tesla P100 SXM2 (see module docstring for sources).
P100 = DeviceSpec("P100", peak_flops=10.6e12, efficiency=0.5, mem_bandwidth=732e9)


def two_level_bandwidth(nodes: int, per_node: int, intra: float = NVLINK_BPS,
                        inter: float = EDR_BPS) -> FloatArray:
    """``(d, d)`` bandwidth (bytes/s) of ``nodes`` nodes with ``per_node`` devices each.

    Examples
    --------
    >>> bw = two_level_bandwidth(2, 2, intra=10.0, inter=1.0)
    >>> bw.tolist()
    [[inf, 10.0, 1.0, 1.0], [10.0, inf, 1.0, 1.0], [1.0, 1.0, inf, 10.0], [1.0, 1.0, 10.0, inf]]
    """
    node = np.arange(nodes * per_node) // per_node
    bw = np.where(node[:, None] == node[None, :], intra, inter).astype(np.float64)
    np.fill_diagonal(bw, np.inf)
    return bw


def uniform_bandwidth(devices: int, bandwidth: float) -> FloatArray:
    """``(d, d)`` matrix with the same bandwidth between every pair.

    Examples
    --------
    >>> uniform_bandwidth(2, 5.0).tolist()
    [[inf, 5.0], [5.0, inf]]
    """
    return two_level_bandwidth(1, devices, intra=bandwidth, inter=bandwidth)


def paper_bandwidth(devices: int) -> FloatArray:
    """The paper's cluster cut to ``devices`` GPUs: 4 per node, nodes filled first.

    Examples
    --------
    >>> paper_bandwidth(8).shape, float(paper_bandwidth(8)[0, 4]) == EDR_BPS
    ((8, 8), True)
    """
    per_node = min(devices, 4)
    return two_level_bandwidth(-(-devices // per_node), per_node)[:devices, :devices]
