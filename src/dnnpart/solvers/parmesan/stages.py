"""Phase-2 inputs: the stage graph of a pipeline and the topology as plain matrices.

Units (SI throughout, as everywhere in dnnpart): compute in seconds, sizes in bytes,
bandwidth in bytes/s, latency in seconds. A transfer of ``M`` bytes from device ``a`` to ``b``
takes ``L[a, b] + M / B[a, b]`` seconds; ``B[a, b] = 0`` means "no route" and makes any
transfer over it take ``inf``. The topology is a ``(D, D)`` bandwidth matrix (and optionally a
latency matrix), exactly the derived matrices of a cluster's routing rule, so any topology
generator plugs in.

The stage graph ``G_S`` holds ``S`` stages; ``G'`` is ``R`` identical copies of it
("pipeline copies"); vertex ``v = r * S + s`` is replica ``r`` of stage ``s``. A mapping is a
``(R, S)`` int array ``device_of[r, s]``, a bijection onto ``range(D)`` with ``D = S * R``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _as_float(name: str, values: npt.ArrayLike, shape: tuple[int, ...]) -> FloatArray:
    arr = np.array(values, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")
    if np.any(np.isnan(arr)) or np.any(arr < 0):
        raise ValueError(f"{name}: values must be >= 0 (no NaN)")
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineStages:
    """A stage graph ``G_S`` with ``R`` replicas per stage.

    Attributes
    ----------
    compute : ``(S,)`` stage compute time ``c_u(s)`` (forward + backward of one training step
        on one replica), seconds.
    param_bytes : ``(S,)`` parameter bytes ``P(s)`` all-reduced among the replicas of ``s``.
    comm_bytes : ``(S, S)`` bytes ``M(s, s')`` sent from stage ``s`` to ``s'`` per step within
        one pipeline copy (activations forward, gradients backward may be summed into one
        entry or given in both directions); the diagonal must be 0.
    replicas : ``R``.
    memory_bytes : ``(S,)`` memory one replica of each stage needs (informational).

    Examples
    --------
    >>> st = PipelineStages(compute=[1.0, 2.0], param_bytes=[0, 0],
    ...                     comm_bytes=[[0, 5], [0, 0]], replicas=2)
    >>> st.n_stages, st.n_devices
    (2, 4)
    """

    compute: FloatArray
    param_bytes: FloatArray
    comm_bytes: FloatArray
    replicas: int = 1
    memory_bytes: FloatArray | None = field(default=None)

    def __post_init__(self) -> None:
        compute = np.array(self.compute, dtype=np.float64).reshape(-1)
        s = int(compute.shape[0])
        if s < 1:
            raise ValueError("compute: at least one stage is needed")
        object.__setattr__(self, "compute", _as_float("compute", compute, (s,)))
        if not np.all(np.isfinite(self.compute)):
            raise ValueError("compute: values must be finite")
        object.__setattr__(self, "param_bytes", _as_float("param_bytes", self.param_bytes, (s,)))
        comm = _as_float("comm_bytes", self.comm_bytes, (s, s))
        if np.any(np.diag(comm) != 0) or not np.all(np.isfinite(comm)):
            raise ValueError("comm_bytes: diagonal must be 0 and all entries finite")
        object.__setattr__(self, "comm_bytes", comm)
        if not isinstance(self.replicas, int | np.integer) or int(self.replicas) < 1:
            raise ValueError(f"replicas: expected an integer >= 1, got {self.replicas!r}")
        object.__setattr__(self, "replicas", int(self.replicas))
        if self.memory_bytes is not None:
            object.__setattr__(
                self, "memory_bytes", _as_float("memory_bytes", self.memory_bytes, (s,))
            )

    @property
    def n_stages(self) -> int:
        return int(self.compute.shape[0])

    @property
    def n_devices(self) -> int:
        return self.n_stages * self.replicas


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
        bw = np.array(bandwidth, dtype=np.float64)
        if bw.ndim != 2 or bw.shape[0] != bw.shape[1]:
            raise ValueError(f"bandwidth: expected a square (D, D) matrix, got shape {bw.shape}")
        d = int(bw.shape[0])
        bw = _as_float("bandwidth", bw, (d, d))
        lat = (np.zeros((d, d)) if latency is None
               else np.array(_as_float("latency", latency, (d, d))))
        if not np.all(np.isfinite(lat)):
            raise ValueError("latency: values must be finite")
        lat.flags.writeable = False
        with np.errstate(divide="ignore"):
            inv = np.where(bw > 0, 1.0 / np.where(bw > 0, bw, 1.0), np.inf)
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
        sub = np.ix_(acc, acc)
        return Topology.from_matrices(np.asarray(cluster.bandwidth)[sub],
                                      np.asarray(cluster.latency)[sub])

    @property
    def n_devices(self) -> int:
        return int(self.bandwidth.shape[0])

    def transfer_time(self, nbytes: float, src: IntArray | int, dst: IntArray | int) -> FloatArray:
        """``L + M / B`` per (src, dst) pair; 0 for ``M = 0`` (no transfer, no latency)."""
        inv = self.inv_bandwidth[src, dst]
        if nbytes == 0:
            return np.zeros(np.shape(inv))
        return np.asarray(self.latency[src, dst] + nbytes * inv, dtype=np.float64)
