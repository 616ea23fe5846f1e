"""Memory tracker of the op emulator: paper 2, Eq. 2, vectorised (``docs/simulate.md``).

For a device ``pe`` at time ``t``::

    M(pe, t) = sum of mem(n), n residual on pe                                   (term 1)
             + sum of mem(n), n normal on pe, st(n) <= t <= ft(n)                (term 2)
             + sum of mem(n), n not (on pe and residual), ft(n) <= t, and some   (term 3)
               consumer u of n on pe has st(u) >= t

Our reading, where the paper is loose: each tensor counts once at ``t`` even when terms 2 and
3 both hold at ``t = ft(n)`` (the formula as printed would count it twice at that instant);
``mem(n)`` is ``param_bytes`` for residual nodes, ``output_bytes`` for normal ones and 0 for
reference (in-place) and control nodes. So a normal tensor lives on its device over
``[st(n), max(ft(n), last local consumer's start)]``, and a copy on another device ``D`` over
``[ft(n), last start of its consumers on D]`` -- remote copies count from the producer's
finish, as Eq. 2 writes, not from their arrival. Intervals are closed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dnnpart.graph.core import NORMAL, RESIDUAL, Graph
from dnnpart.simulate.timeline import MemoryCurve

FloatArray = npt.NDArray[np.float64]


def tensor_bytes(graph: Graph) -> FloatArray:
    """``mem(n)`` of Eq. 2: residual -> param bytes, normal -> output bytes, else 0."""
    cls = graph.memory_classes()
    out: FloatArray = np.where(
        cls == RESIDUAL, graph.node_param_bytes(),
        np.where(cls == NORMAL, graph.node_output_bytes(), 0.0),
    ).astype(np.float64)
    return out


def track_memory(
    graph: Graph, assignment: npt.ArrayLike, start: FloatArray, finish: FloatArray,
    n_devices: int, *, curves: bool = True,
) -> tuple[FloatArray, list[MemoryCurve] | None]:
    """Per-device peak of Eq. 2 and, with ``curves``, the memory curve of each device.

    The sweep is a numba kernel (:func:`dnnpart.simulate.memory_kernels.memory_sweep`, linear
    after ranking the 2 |V| start and finish times once); the tests hold it against Eq. 2
    evaluated term by term.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(2, memory_bytes=4.0)            # a -> b, both normal, 4 bytes each
    >>> peaks, cs = track_memory(g, [0, 1], np.array([0., 1.]), np.array([1., 2.]), 2)
    >>> peaks.tolist(), cs[1].value(1.0)          # a's copy on device 1 until b starts
    ([4.0, 8.0], 8.0)
    """
    from dnnpart.simulate.memory_kernels import memory_sweep

    a = np.asarray(assignment, dtype=np.int64)
    n = graph.n_nodes
    mem = tensor_bytes(graph)
    cls = graph.memory_classes()
    base = np.bincount(a, weights=np.where(cls == RESIDUAL, mem, 0.0),
                       minlength=n_devices).astype(np.float64)
    # rank every start and finish time once (equal times share a rank)
    times = np.concatenate((np.asarray(start, np.float64), np.asarray(finish, np.float64)))
    by_time = np.argsort(times, kind="stable")
    ordered = times[by_time]
    new = np.ones(times.shape[0], np.bool_)
    new[1:] = ordered[1:] != ordered[:-1]
    rank = np.empty(times.shape[0], np.int64)
    rank[by_time] = np.cumsum(new) - 1
    values = ordered[new]
    held, ptr, crank, at, after = memory_sweep(
        graph.succ_ptr.astype(np.int64), graph.succ_idx.astype(np.int64), a, mem,
        cls == NORMAL, rank[:n], rank[n:], int(values.shape[0]), int(n_devices))
    peaks: FloatArray = base + held
    if not curves:
        return peaks, None
    return peaks, [MemoryCurve(times=values[crank[ptr[d]:ptr[d + 1]]], at=at[ptr[d]:ptr[d + 1]] + base[d],
                               after=after[ptr[d]:ptr[d + 1]] + base[d], base=float(base[d]))
                   for d in range(n_devices)]
