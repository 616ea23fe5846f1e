"""The one time of a transfer between two devices, and of a ring all-reduce (paper 4, Eq. 7).

Rule (every solver, evaluator and simulator prices a point-to-point transfer with it):
``messages * L[a, b] + M * (1 / B[a, b])`` for ``M`` bytes in ``messages`` messages (one by
default) from device ``a`` to ``b``, with the routed matrices of the cluster
(:mod:`dnnpart.devices.routing`). A message without data (a control dependency) still pays its
latency; sending nothing at all (no bytes, no message) costs 0. A device does not send to
itself (the diagonal's bandwidth is infinite and its latency 0); a pair without a route
(bandwidth 0) takes ``inf``.

A ring all-reduce of ``W`` bytes over ``r`` devices takes ``2 (r - 1)`` steps, each moving
``W / r`` bytes over every ring link at once: ``2 (r - 1) max_k (L_k + W / (r B_k))`` over the
ring's links ``k`` -- paper 4's Eq. 7 ``2 (r - 1) W / (r B)`` at the slowest link when
latencies are 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.stages import nonnegative_array

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

__all__ = ["Topology", "inverse_bandwidth", "pair_time", "ring_allreduce_time", "ring_steps_time"]


def inverse_bandwidth(bandwidth: npt.ArrayLike) -> FloatArray:
    """Seconds per byte, ``inf`` where the bandwidth is 0 (no route).

    Examples
    --------
    >>> inverse_bandwidth([[np.inf, 4.0], [0.0, np.inf]]).tolist()
    [[0.0, 0.25], [inf, 0.0]]
    """
    bw = np.asarray(bandwidth, dtype=np.float64)
    out: FloatArray = np.full(bw.shape, np.inf)
    np.divide(1.0, bw, out=out, where=bw > 0)  # no temporaries: (D, D) is 134 MB at 4,096
    return out


def pair_time(nbytes: npt.ArrayLike, inv_bandwidth: npt.ArrayLike, latency: npt.ArrayLike,
              messages: npt.ArrayLike = 1.0) -> FloatArray:
    """``messages * L + M / B`` (module docstring), broadcast over arrays; seconds.

    Examples
    --------
    >>> pair_time([0.0, 10.0, 10.0], [0.5, 0.5, np.inf], [1.0, 1.0, 1.0]).tolist()
    [1.0, 6.0, inf]
    >>> float(pair_time(8.0, 0.25, 1.0, messages=2.0))   # 2 latencies + 8 B at 4 B/s
    4.0
    >>> float(pair_time(0.0, np.inf, 1.0, messages=0.0))  # nothing sent
    0.0
    """
    m = np.asarray(nbytes, dtype=np.float64)
    k = np.asarray(messages, dtype=np.float64)
    inv = np.asarray(inv_bandwidth, dtype=np.float64)
    lat = np.asarray(latency, dtype=np.float64)
    # in place, two arrays of the result's size at most (a (D, D) matrix is 134 MB at 4,096)
    out: FloatArray = np.empty(np.broadcast_shapes(m.shape, k.shape, inv.shape, lat.shape))
    with np.errstate(invalid="ignore"):
        np.multiply(m, inv, out=out)
    np.copyto(out, 0.0, where=m == 0)  # nothing sent: no bytes term, even without a route
    out += k * lat
    np.copyto(out, np.inf, where=~np.isfinite(inv))
    np.copyto(out, 0.0, where=(m == 0) & (k == 0))
    return out


def ring_allreduce_time(inv_bandwidth: npt.ArrayLike, latency: npt.ArrayLike, devices: Sequence[int],
                        nbytes: float) -> float:
    """Ring all-reduce of ``nbytes`` over ``devices`` (ring in the given order), seconds.

    Examples
    --------
    >>> inv = inverse_bandwidth(np.full((4, 4), 1e3))
    >>> ring_allreduce_time(inv, np.zeros((4, 4)), [0, 1, 3, 2], 4e3) == 2 * 3 * 4e3 / (4 * 1e3)
    True
    """
    r = len(devices)
    if r < 2 or nbytes == 0:
        return 0.0
    ring = np.asarray(devices, dtype=np.int64)
    nxt = np.roll(ring, -1)
    inv = np.asarray(inv_bandwidth, dtype=np.float64)[ring, nxt]
    lat = np.asarray(latency, dtype=np.float64)[ring, nxt]
    return 2.0 * float(ring_steps_time(nbytes, inv, lat, r))


def ring_steps_time(nbytes: npt.ArrayLike, inv_steps: npt.ArrayLike, lat_steps: npt.ArrayLike,
                    size: int) -> Any:
    """``size - 1`` steps of a ring collective of ``size`` members moving ``nbytes / size``
    each, every step as slow as the slowest of the ring's links (``inv_steps``, ``lat_steps``:
    one entry per link): an all-gather or a reduce-scatter; an all-reduce is two of them.
    ``nbytes`` may be an array; 0 with one member or nothing sent.

    Examples
    --------
    >>> float(ring_steps_time(4e3, [1e-3, 2e-3], [0.0, 0.0], 2))   # one step, the slower link
    4.0
    >>> ring_steps_time([0.0, 4e3], [1e-3], [1.0], 4).tolist()
    [0.0, 6.0]
    """
    m = np.asarray(nbytes, dtype=np.float64)
    if size < 2:
        return 0.0 * m
    inv = np.asarray(inv_steps, dtype=np.float64)
    lat = np.asarray(lat_steps, dtype=np.float64)
    step = pair_time(m[..., None] / size, inv, lat).max(axis=-1)
    return np.where(m > 0, (size - 1) * step, 0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """``(D, D)`` bandwidth (bytes/s, 0 = no route) and latency (s) matrices.

    The diagonal is never used (a bijective mapping puts no two stages on one device).

    Examples
    --------
    >>> topo = Topology.from_matrices([[0, 10], [10, 0]])
    >>> topo.n_devices, float(topo.inv_bandwidth[0, 1])
    (2, 0.1)
    """

    bandwidth: FloatArray
    latency: FloatArray
    #: ``1 / B`` with ``inf`` where ``B = 0``.
    inv_bandwidth: FloatArray
    #: both matrices symmetric (links undirected): ring reflection is then a symmetry.
    symmetric: bool

    @staticmethod
    def from_matrices(
        bandwidth: npt.ArrayLike, latency: npt.ArrayLike | None = None
    ) -> Topology:
        # read-only views where the input is already a float64 array (a routed cluster's
        # matrices: 134 MB each at 4,096 devices), copies otherwise
        bw = np.asarray(bandwidth, dtype=np.float64)
        if bw.ndim != 2 or bw.shape[0] != bw.shape[1]:
            raise UsageError(f"bandwidth: expected a square (D, D) matrix, got shape {bw.shape}")
        d = int(bw.shape[0])
        bw = nonnegative_array("bandwidth", bw, (d, d), copy=False)
        lat = (np.zeros((d, d)) if latency is None
               else nonnegative_array("latency", latency, (d, d), copy=False))
        if not np.all(np.isfinite(lat)):
            raise UsageError("latency: values must be finite")
        lat.flags.writeable = False
        inv = inverse_bandwidth(bw)
        inv.flags.writeable = False
        sym = bool(np.array_equal(bw, bw.T) and np.array_equal(lat, lat.T))
        return Topology(bandwidth=bw, latency=lat, inv_bandwidth=inv, symmetric=sym)

    @staticmethod
    def from_cluster(cluster: Any) -> Topology:
        """The routed matrices of a :class:`dnnpart.devices.Cluster` over its accelerators
        (device ``i`` of the topology = the cluster's ``i``-th accelerator).

        Examples
        --------
        >>> from dnnpart.devices.topology import two_level
        >>> topo = Topology.from_cluster(two_level(nodes=2, gpus=2, intra=100.0, inter=10.0))
        >>> topo.bandwidth[0].tolist()[1:]
        [100.0, 10.0, 10.0]
        """
        acc = np.array(cluster.accelerators, dtype=np.int64)
        bw, lat = np.asarray(cluster.bandwidth), np.asarray(cluster.latency)
        if not np.array_equal(acc, np.arange(bw.shape[0])):  # else all of it, no copy
            sub = np.ix_(acc, acc)
            bw, lat = bw[sub], lat[sub]
        return Topology.from_matrices(bw, lat)

    @property
    def n_devices(self) -> int:
        return int(self.bandwidth.shape[0])

    def transfer_time(self, nbytes: npt.ArrayLike, src: IntArray | int, dst: IntArray | int,
                      messages: npt.ArrayLike = 1.0) -> FloatArray:
        """:func:`pair_time` per (src, dst) pair."""
        return pair_time(nbytes, self.inv_bandwidth[src, dst], self.latency[src, dst], messages)

    def pair_matrix(self, nbytes: float, messages: float = 1.0) -> FloatArray:
        """:func:`pair_time` of ``nbytes`` for every directed device pair."""
        return pair_time(nbytes, self.inv_bandwidth, self.latency, messages)
