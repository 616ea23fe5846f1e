"""Stage times of mapped pipeline stages: paper 4's Eqs. 5-7, the one Eq. 5 of dnnpart.

A stage's time is its compute plus, under Eq. 6 (``p2p``), every inter-stage transfer it
sends or receives, or, under Eq. 7 (``allreduce``), the ring all-reduce of its parameters;
``full`` (the paper's "theoretically exact" ``c_u + c_m + c_AR``) adds both. Eq. 5's objective
is the largest stage time over all stages and replicas. Transfers and all-reduces are priced
by :mod:`dnnpart.pricing.pairs`.

Choices where the paper is silent (also in ``docs/methods/parmesan.md``):

* one inter-stage transfer is charged to *both* endpoints (the sender's and the receiver's
  stage time), over the directed pair (device of the sending stage, device of the receiving
  stage) within one pipeline copy;
* pipeline copy ``r`` of a stage with ``k`` replicas runs on its replica ``r mod k`` (ring
  order), as the pipeline simulator sends micro-batch ``j`` to replica ``j mod k``; with the
  same replica count everywhere, copy ``r`` is replica ``r`` of every stage (paper 4);
* the ring of a stage follows its replicas' order.

Parmesan's mapper minimises this over bijective mappings; the pipeline simulator reports it
beside its simulated time per sample. Both call :func:`stage_times`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.pricing.pairs import Topology, ring_allreduce_time
from dnnpart.stages import FloatArray, IntArray, PipelineStages

__all__ = ["StageTimeKind", "check_mapping", "mapping_stage_times", "max_stage_time", "stage_times"]

#: Eq. 6 (``p2p``), Eq. 7 (``allreduce``) or both added (``full``, reported only).
StageTimeKind = Literal["p2p", "allreduce", "full"]


def stage_times(
    compute: npt.ArrayLike, devices: Sequence[Sequence[int]], topo: Topology, kind: StageTimeKind, *,
    edges: Sequence[tuple[int, int, float]] = (), ring_bytes: npt.ArrayLike | None = None,
    time_unit_s: float = 1.0,
) -> FloatArray:
    """``(R, S)`` stage times of every pipeline copy (rows) and stage (columns).

    Parameters
    ----------
    compute : ``(S,)`` compute time of one replica of each stage, in ``time_unit_s`` seconds.
    devices : per stage, the devices of its replicas in ring order; ``R`` is the largest count.
    topo : device matrices (:class:`~dnnpart.pricing.pairs.Topology`), indexed by ``devices``.
    kind : ``"p2p"`` (Eq. 6), ``"allreduce"`` (Eq. 7) or ``"full"`` (both).
    edges : ``(s, t, bytes)`` sent from stage ``s`` to ``t`` within one pipeline copy, one
        message each (a stage graph's edges are its nonzero ``comm_bytes``).
    ring_bytes : ``(S,)`` bytes each stage all-reduces among its replicas (none: 0).
    time_unit_s : seconds per unit of ``compute`` (transfers are converted to it).

    Written as plain loops over the formulas: this is the reference that Parmesan's search
    kernels are tested against.

    Examples
    --------
    >>> topo = Topology.from_matrices([[0, 5], [5, 0]])
    >>> stage_times([1.0, 1.0], [(0,), (1,)], topo, "p2p", edges=[(0, 1, 10.0)]).tolist()
    [[3.0, 3.0]]
    """
    comp = np.asarray(compute, dtype=np.float64)
    s_n = comp.shape[0]
    if len(devices) != s_n or any(len(d) == 0 for d in devices):
        raise UsageError(f"devices: expected a non-empty replica list for each of the {s_n} stages")
    r_n = max(len(d) for d in devices)
    out = np.tile(comp, (r_n, 1))
    if kind in ("p2p", "full"):
        for r in range(r_n):
            for s, t, nbytes in edges:
                a, b = devices[s][r % len(devices[s])], devices[t][r % len(devices[t])]
                x = float(topo.transfer_time(nbytes, a, b)) / time_unit_s
                out[r, s] += x
                out[r, t] += x
    if kind in ("allreduce", "full") and ring_bytes is not None:
        ring = np.asarray(ring_bytes, dtype=np.float64)
        for s in range(s_n):
            out[:, s] += ring_allreduce_time(topo.inv_bandwidth, topo.latency, devices[s],
                                             float(ring[s])) / time_unit_s
    result: FloatArray = out
    return result


def check_mapping(stages: PipelineStages, topo: Topology, device_of: npt.ArrayLike) -> IntArray:
    """Validate a ``(R, S)`` mapping as a bijection onto ``range(D)``; return it as int64."""
    dev = np.asarray(device_of, dtype=np.int64)
    if dev.shape != (stages.replicas, stages.n_stages):
        raise UsageError(f"device_of: expected shape {(stages.replicas, stages.n_stages)}, "
                         f"got {dev.shape}")
    if topo.n_devices != stages.n_devices:
        raise UsageError(f"topology has {topo.n_devices} devices, the pipeline needs "
                         f"S * R = {stages.n_devices}")
    if sorted(dev.reshape(-1).tolist()) != list(range(stages.n_devices)):
        raise UsageError("device_of: must use every device exactly once")
    return dev


def mapping_stage_times(
    stages: PipelineStages, topo: Topology, device_of: npt.ArrayLike, kind: StageTimeKind
) -> FloatArray:
    """``(R, S)`` stage times ``c_stage(s, p)`` of a stage graph under a mapping (Eqs. 5-7).

    Examples
    --------
    >>> st = PipelineStages(compute=[1, 1], param_bytes=[0, 0],
    ...                     comm_bytes=[[0, 10], [0, 0]], replicas=1)
    >>> topo = Topology.from_matrices([[0, 5], [5, 0]])
    >>> mapping_stage_times(st, topo, [[0, 1]], "p2p").tolist()
    [[3.0, 3.0]]
    """
    dev = check_mapping(stages, topo, device_of)
    src, dst = np.nonzero(stages.comm_bytes)
    edges = [(s, t, float(stages.comm_bytes[s, t])) for s, t in zip(src.tolist(), dst.tolist(), strict=True)]
    return stage_times(stages.compute, [tuple(int(d) for d in dev[:, s]) for s in range(stages.n_stages)],
                       topo, kind, edges=edges, ring_bytes=stages.param_bytes)


def max_stage_time(
    stages: PipelineStages, topo: Topology, device_of: npt.ArrayLike, kind: StageTimeKind
) -> float:
    """Eq. 5's objective ``max_s c_stage(s, p)``."""
    return float(mapping_stage_times(stages, topo, device_of, kind).max())
