"""Paper 3's setting (§6): its GPU and its cluster, from the shared presets and generators.

Both come from the shared layers: the roofline is the ``P100`` device preset of
``dnnpart/cost/presets.yaml`` (a :class:`~dnnpart.devices.specs.DeviceSpec`, as every cluster
device carries), and the ``(d, d)`` bandwidth matrix is that of a cluster built by the shared
topology generators and routing rule (:func:`paper_cluster`).

* :data:`P100`: the ``P100`` preset (NVIDIA Tesla P100 SXM2, the paper's GPU): peak FP32
  10.6 TFLOP/s and HBM2 bandwidth 732 GB/s are NVIDIA's published figures (Tesla P100 data
  sheet, 2016); the efficiency 0.5 (share of peak that cuDNN convolutions and GEMMs reach on
  average) is our choice -- the paper profiles instead.
* :func:`paper_cluster`: the paper's cluster cut to ``d`` GPUs, ``two-level`` with 4 GPUs per
  node, nodes filled first, numbered node by node. Inside a node NVLink 1.0 at 20 GB/s per
  direction per GPU pair (preset link ``nvlink1``: one 20 GB/s link between each pair, as in
  the data sheet's 4-link P100 with one link per peer); between nodes 100 Gb/s EDR
  InfiniBand = 12.5 GB/s (``network-100g``). The diagonal is infinite: a device does not
  send to itself.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dnnpart.cost.specs import load_catalog
from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError

__all__ = [
    "EDR_BPS", "NVLINK_BPS", "P100", "paper_bandwidth", "paper_cluster", "paper_cluster_spec",
    "two_level_bandwidth", "uniform_bandwidth",
]

FloatArray = npt.NDArray[np.float64]

#: NVLink 1.0, one link, one direction (bytes/s): the ``nvlink1`` preset link.
NVLINK_BPS = 20e9
#: 100 Gb/s EDR InfiniBand (bytes/s): the ``network-100g`` preset link.
EDR_BPS = 100e9 / 8


#: NVIDIA Tesla P100 SXM2 (see module docstring for sources): the shared preset.
P100 = load_catalog().device("P100")


def two_level_bandwidth(nodes: int, per_node: int, intra: float = NVLINK_BPS,
                        inter: float = EDR_BPS) -> FloatArray:
    """``(d, d)`` bandwidth (bytes/s) of the shared ``two-level`` generator's cluster.

    Examples
    --------
    >>> bw = two_level_bandwidth(2, 2, intra=10.0, inter=1.0)
    >>> bw.tolist()
    [[inf, 10.0, 1.0, 1.0], [10.0, inf, 1.0, 1.0], [1.0, 1.0, inf, 10.0], [1.0, 1.0, 10.0, inf]]
    """
    from dnnpart.devices.topology import two_level

    out: FloatArray = np.array(two_level(nodes=nodes, gpus=per_node, intra=intra, inter=inter).bandwidth,
                               dtype=np.float64)
    return out


def uniform_bandwidth(devices: int, bandwidth: float) -> FloatArray:
    """``(d, d)`` matrix with the same bandwidth between every pair.

    Examples
    --------
    >>> uniform_bandwidth(2, 5.0).tolist()
    [[inf, 5.0], [5.0, inf]]
    """
    return two_level_bandwidth(1, devices, intra=bandwidth, inter=bandwidth)


def paper_cluster_spec(devices: int) -> str:
    """The ``--cluster`` spec of the paper's cluster cut to ``devices`` GPUs (4 per node).

    Examples
    --------
    >>> paper_cluster_spec(16)
    'two-level:nodes=4,gpus=4,intra=20e9,inter=12.5e9,device=P100'
    """
    if devices < 1 or (devices > 4 and devices % 4):
        raise UsageError(f"the paper's cluster takes 1-4 GPUs or whole nodes of 4, got {devices}")
    per_node = min(devices, 4)
    return f"two-level:nodes={devices // per_node},gpus={per_node},intra=20e9,inter=12.5e9,device=P100"


def paper_cluster(devices: int) -> Cluster:
    """The paper's cluster cut to ``devices`` GPUs, through the shared ``--cluster`` resolver.

    Examples
    --------
    >>> paper_cluster(8).name
    'two-level 2x4'
    """
    from dnnpart.cost.clusters import resolve_cluster

    return resolve_cluster(paper_cluster_spec(devices)).cluster


def paper_bandwidth(devices: int) -> FloatArray:
    """The bandwidth matrix of :func:`paper_cluster`.

    Examples
    --------
    >>> paper_bandwidth(8).shape, float(paper_bandwidth(8)[0, 4]) == EDR_BPS
    ((8, 8), True)
    """
    out: FloatArray = np.array(paper_cluster(devices).bandwidth, dtype=np.float64)
    return out
