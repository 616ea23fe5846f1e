"""Pipeline stages: the one stage model of partitioners, mappers, pricing and simulators.

Two views of the same thing:

* a **stage graph** :class:`PipelineStages` (paper 4's ``G_S``): ``S`` stages with their
  compute, the parameter bytes each all-reduces and the bytes between stages, ``R`` replicas
  per stage, not yet on devices -- what Parmesan's phase 1 produces, stage files hold
  (``dnnpart map``) and the mapper places;
* **mapped stages** :class:`Stage` with the devices of their replicas (ring order) and the
  :class:`StageEdge` dependencies between (stage, phase) pairs -- what a plan's stages are
  (:func:`dnnpart.simulate.stages_from_plan`) and the pipeline simulator runs.

Both are priced by the one Eq. 5 of :mod:`dnnpart.pricing.stages`.

Units (SI throughout, as everywhere in dnnpart): compute in seconds, sizes in bytes,
bandwidth in bytes/s, latency in seconds. The stage graph ``G_S`` holds ``S`` stages; ``G'``
is ``R`` identical copies of it ("pipeline copies"); vertex ``v = r * S + s`` is replica ``r``
of stage ``s``. A mapping is a ``(R, S)`` int array ``device_of[r, s]``, a bijection onto
``range(D)`` with ``D = S * R``. (Mapped stages from plans keep the graph's time unit.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Phases of a stage's work per micro-batch: forward and backward.
F, B = 0, 1


def nonnegative_array(name: str, values: npt.ArrayLike, shape: tuple[int, ...], *,
                      copy: bool = True) -> FloatArray:
    """A read-only float copy of ``values`` of ``shape`` (with ``copy=False``, a read-only view
    where ``values`` is a float64 array already); ``UsageError`` naming it on NaN or < 0."""
    arr = np.array(values, dtype=np.float64) if copy else np.asarray(values, dtype=np.float64).view()
    if arr.shape != shape:
        raise UsageError(f"{name}: expected shape {shape}, got {arr.shape}")
    if np.any(np.isnan(arr)) or np.any(arr < 0):
        raise UsageError(f"{name}: values must be >= 0 (no NaN)")
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
            raise UsageError("compute: at least one stage is needed")
        object.__setattr__(self, "compute", nonnegative_array("compute", compute, (s,)))
        if not np.all(np.isfinite(self.compute)):
            raise UsageError("compute: values must be finite")
        object.__setattr__(self, "param_bytes", nonnegative_array("param_bytes", self.param_bytes, (s,)))
        comm = nonnegative_array("comm_bytes", self.comm_bytes, (s, s))
        if np.any(np.diag(comm) != 0) or not np.all(np.isfinite(comm)):
            raise UsageError("comm_bytes: diagonal must be 0 and all entries finite")
        object.__setattr__(self, "comm_bytes", comm)
        if not isinstance(self.replicas, int | np.integer) or int(self.replicas) < 1:
            raise UsageError(f"replicas: expected an integer >= 1, got {self.replicas!r}")
        object.__setattr__(self, "replicas", int(self.replicas))
        if self.memory_bytes is not None:
            object.__setattr__(
                self, "memory_bytes", nonnegative_array("memory_bytes", self.memory_bytes, (s,))
            )

    @property
    def n_stages(self) -> int:
        return int(self.compute.shape[0])

    @property
    def n_devices(self) -> int:
        return self.n_stages * self.replicas


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """One pipeline stage: times per micro-batch on its devices, bytes, replica devices.

    ``recomputed``: with recomputation, the part of ``forward`` its backward runs again
    (:func:`dnnpart.pricing.chain.recomputed_forward`); ``None`` means all of it."""

    devices: tuple[int, ...]
    forward: float
    backward: float = 0.0
    weight_bytes: float = 0.0
    activation_bytes: float = 0.0
    input_bytes: float = 0.0
    name: str = ""
    #: the forward time a recomputation runs again (``None``: all of ``forward``)
    recomputed: float | None = None

    def __post_init__(self) -> None:
        if not self.devices:
            raise UsageError(f"stage {self.name}: needs at least one device")
        for what in ("forward", "backward", "weight_bytes", "activation_bytes", "input_bytes",
                     "recomputed"):
            x = getattr(self, what)
            if x is None:
                continue
            if not (math.isfinite(x) and x >= 0):
                raise UsageError(f"stage {self.name}: {what} must be finite and >= 0, got {x}")

    @property
    def recompute_time(self) -> float:
        """What a recomputing backward adds: ``recomputed``, else the whole forward."""
        return self.forward if self.recomputed is None else self.recomputed


@dataclass(frozen=True, slots=True, kw_only=True)
class StageEdge:
    """Data from ``(src, src_phase)`` to ``(dst, dst_phase)``: ``bytes`` per micro-batch."""

    src: int
    dst: int
    bytes: float
    src_phase: int = F
    dst_phase: int = F
