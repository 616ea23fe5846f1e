"""Compiled loop for t_X of large edges: one pass over every pair of tiles, no tile-pair arrays.

An edge's transfer table (:func:`~dnnpart.layerwise.costs.transfer_costs`) sums, over every
producer tile ``s`` of configuration ``i`` and consumer tile ``t`` of configuration ``j``, the
bytes ``t`` reads from ``s`` priced by the link between their devices. With numpy that is
several arrays of ``C_i x C_j x T x T`` floats (Inception-v3 on 16 devices: 54 M tile pairs
over its edges, most of the process's time); here the volume of each pair is the product of
its per-axis sides, looked up in tables of the distinct intervals (what numpy's factored path
gathers), and is priced and summed at once.

Examples
--------
>>> import numpy as np
>>> one = np.zeros((1, 1, 2), dtype=np.int64)                # 1 axis, 1 config, 2 tiles
>>> sides = np.array([[[3.0]]])                             # each pair shares 3 elements
>>> dev_p, dev_c = np.array([[0, 1]]), np.array([[1, 0]])   # tiles swap devices
>>> inv = np.array([[0.0, 0.5], [0.5, 0.0]])                # 2 bytes/s each way
>>> out = [np.zeros((1, 1)) for _ in range(3)]
>>> edge_transfer_tables(one, one, sides, dev_p, dev_c, inv, 4.0, False, *out)
>>> [float(x[0, 0]) for x in out]  # each tile gets 12 B from the other device: 6 s each way
[6.0, 6.0, 48.0]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dnnpart._jit import kernel

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@kernel
def edge_transfer_tables(p_of: IntArray, c_of: IntArray, sides: FloatArray, p_dev: IntArray,
                         c_dev: IntArray, inv: FloatArray, item_bytes: float, serial: bool,
                         fwd: FloatArray, bwd: FloatArray, moved: FloatArray) -> None:
    """Fill ``fwd``, ``bwd`` (seconds) and ``moved`` (bytes) of one edge, ``(C_p, C_c)`` each.

    ``p_of[a, i, s]`` / ``c_of[a, j, t]``: row / column of ``sides[a]`` (elements along axis
    ``a`` that the consumer tile reads of the producer tile) for producer tile ``s`` of
    configuration ``i`` / consumer tile ``t`` of ``j``; ``p_dev`` / ``c_dev`` their devices;
    ``inv[d, e]`` seconds per byte from ``d`` to ``e``. Forward: per consumer tile the bytes
    it receives summed, the slowest consumer (``serial``: everything summed); backward the
    same the other way round, per producer tile; ``moved`` counts both ways. Pairs on one
    device move nothing.
    """
    n_axes, ci, ts = p_of.shape
    cj, tt = c_of.shape[1], c_of.shape[2]
    back = np.zeros(ts)
    for i in range(ci):
        for j in range(cj):
            back[:] = 0.0
            slowest = 0.0
            total = 0.0
            total_back = 0.0
            volume = 0.0
            for t in range(tt):
                dt = c_dev[j, t]
                received = 0.0
                for s in range(ts):
                    ds = p_dev[i, s]
                    if ds == dt:
                        continue
                    v = item_bytes
                    for a in range(n_axes):
                        v *= sides[a, p_of[a, i, s], c_of[a, j, t]]
                    if v == 0.0:
                        continue
                    received += v * inv[ds, dt]
                    b = v * inv[dt, ds]
                    back[s] += b
                    total_back += b
                    volume += v
                total += received
                slowest = max(slowest, received)
            fwd[i, j] = total if serial else slowest
            bwd[i, j] = total_back if serial else back.max()
            moved[i, j] = 2.0 * volume
