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
IntArray = npt.NDArray[np.int64]


def tensor_bytes(graph: Graph) -> FloatArray:
    """``mem(n)`` of Eq. 2: residual -> param bytes, normal -> output bytes, else 0."""
    cls = graph.memory_classes()
    out: FloatArray = np.where(
        cls == RESIDUAL, graph.node_param_bytes(),
        np.where(cls == NORMAL, graph.node_output_bytes(), 0.0),
    ).astype(np.float64)
    return out


def _intervals(graph: Graph, a: IntArray, start: FloatArray, finish: FloatArray,
               n_dev: int) -> tuple[IntArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """(device, begin, end, bytes) of every held tensor, and the residual bytes per device."""
    mem = tensor_bytes(graph)
    cls = graph.memory_classes()
    base = np.bincount(a, weights=np.where(cls == RESIDUAL, mem, 0.0), minlength=n_dev)
    src = graph.edge_sources()
    dst = graph.succ_idx.astype(np.int64)
    ddev = a[dst]
    n = graph.n_nodes
    # last start of n's consumers on each device: one slot per (n, device) pair
    key = src * n_dev + ddev
    last = np.full(n * n_dev, -np.inf)
    np.maximum.at(last, key, start[dst])
    # normal tensors on their own device
    normal = np.flatnonzero((cls == NORMAL) & (mem > 0))
    local_last = last[normal * n_dev + a[normal]]
    dev_l = a[normal]
    beg_l = start[normal]
    end_l = np.maximum(finish[normal], local_last)
    # copies on other devices (any class but control/reference, which weigh nothing)
    pairs = np.unique(key)
    pn, pd = pairs // n_dev, pairs % n_dev
    remote = (pd != a[pn]) & (mem[pn] > 0)
    pn, pd = pn[remote], pd[remote]
    dev = np.concatenate((dev_l, pd))
    beg = np.concatenate((beg_l, finish[pn]))
    end = np.concatenate((end_l, last[pn * n_dev + pd]))
    size = np.concatenate((mem[normal], mem[pn]))
    return dev, beg, end, size, base.astype(np.float64)


def track_memory(
    graph: Graph, assignment: npt.ArrayLike, start: FloatArray, finish: FloatArray,
    n_devices: int, *, curves: bool = True,
) -> tuple[FloatArray, list[MemoryCurve] | None]:
    """Per-device peak of Eq. 2 and, with ``curves``, the memory curve of each device.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(2, memory_bytes=4.0)            # a -> b, both normal, 4 bytes each
    >>> peaks, cs = track_memory(g, [0, 1], np.array([0., 1.]), np.array([1., 2.]), 2)
    >>> peaks.tolist(), cs[1].value(1.0)          # a's copy on device 1 until b starts
    ([4.0, 8.0], 8.0)
    """
    a = np.asarray(assignment, dtype=np.int64)
    dev, beg, end, size, base = _intervals(graph, a, start, finish, n_devices)
    k = dev.shape[0]
    ev_dev = np.concatenate((dev, dev))
    ev_t = np.concatenate((beg, end))
    ev_rm = np.concatenate((np.zeros(k, np.int8), np.ones(k, np.int8)))
    ev_delta = np.concatenate((size, -size))
    order = np.lexsort((ev_rm, ev_t, ev_dev))  # per device, by time, adds before removes
    ev_dev, ev_t, ev_rm, ev_delta = ev_dev[order], ev_t[order], ev_rm[order], ev_delta[order]
    seg = np.searchsorted(ev_dev, np.arange(n_devices + 1))
    run = np.empty_like(ev_delta)
    peaks = base.copy()
    for d in range(n_devices):  # per device, so that no device's sums carry another's rounding
        lo, hi = seg[d], seg[d + 1]
        if hi > lo:
            run[lo:hi] = np.cumsum(ev_delta[lo:hi])
            peaks[d] = base[d] + max(0.0, float(run[lo:hi].max()))
    if not curves:
        return peaks, None
    out: list[MemoryCurve] = []
    for d in range(n_devices):
        lo, hi = seg[d], seg[d + 1]
        t, r, rm = ev_t[lo:hi], run[lo:hi], ev_rm[lo:hi]
        times, first = np.unique(t, return_index=True)
        last_idx = np.append(first[1:], t.shape[0]) - 1
        # value at t: after the adds at t (the last add at t), before its removes
        n_adds = np.add.reduceat((rm == 0).astype(np.int64), first) if t.size else np.zeros(0, np.int64)
        at_idx = first + n_adds - 1
        at = np.where(n_adds > 0, r[np.maximum(at_idx, 0)],
                      np.where(first > 0, r[np.maximum(first - 1, 0)], 0.0))
        after = r[last_idx] if t.size else np.zeros(0)
        out.append(MemoryCurve(times=times, at=at + base[d], after=after + base[d],
                               base=float(base[d])))
    return peaks, out
