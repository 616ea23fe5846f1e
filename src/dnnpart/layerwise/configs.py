"""Parallel configurations of a layer (paper 3, §4 and Table 1) and where their tiles live.

A configuration gives a degree for each dimension of the layer's output ``(N, C, H, W)``
(sample, channel, height, width); the output is cut into ``n * c * h * w`` equal tiles, each
computed by one device.

Choices (also in ``docs/methods/optcnn.md``):

* **Degrees** are powers of two; their product divides the device count; each degree divides
  the size of its dimension exactly (tiles are equal, so a 17x17 map is never cut in H/W).
  Fully connected and softmax layers are parallel in ``{sample, channel}`` only (Table 1);
  convolution, pooling, element-wise and input layers in all four. (Length/depth of 1-D/3-D
  layers would extend :data:`DIMS`; none of the six networks has such layers.)
* **Tile order**: tiles are numbered row-major over their ``(n, c, h, w)`` coordinates.
* **Placement** (paper silent): tile ``t`` of a configuration with ``p`` tiles runs on device
  ``t``: a contiguous block ``0 .. p-1``. Devices are numbered node by node, so a block fills a
  node before it spans the next, and every configuration of degree ``p`` uses the same devices.
* Configuration 0 of every layer is the all-ones (single-device) one; the rest follow by
  increasing product, then lexicographically.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.layerwise.layers import LayerSpec, Shape

__all__ = [
    "DIMS", "ConfigSpace", "config_space", "enumerate_degrees", "format_config",
    "parallel_dims", "tile_boxes", "tile_devices",
]

IntArray = npt.NDArray[np.int64]

#: Output dimensions a configuration may cut, in this order.
DIMS = ("n", "c", "h", "w")


def parallel_dims(layer: LayerSpec) -> tuple[bool, bool, bool, bool]:
    """Which of :data:`DIMS` the layer may be cut in (Table 1).

    Examples
    --------
    >>> from dnnpart.layerwise.models import vgg16
    >>> g = vgg16(32)
    >>> parallel_dims(g.layers[1]), parallel_dims(g.layers[g.index("fc6")])
    ((True, True, True, True), (True, True, False, False))
    """
    if layer.op in ("fc", "softmax"):
        return (True, True, False, False)
    return (True, True, True, True)


def _powers_of_two_up_to(limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def enumerate_degrees(shape: Shape, dims: tuple[bool, ...], devices: int) -> IntArray:
    """All admissible degree vectors ``(n, c, h, w)``, single-device first.

    Examples
    --------
    >>> len(enumerate_degrees((512, 64, 64, 64), (True,) * 4, 16))
    70
    >>> enumerate_degrees((8, 6, 1, 1), (True, True, False, False), 4).tolist()
    [[1, 1, 1, 1], [1, 2, 1, 1], [2, 1, 1, 1], [2, 2, 1, 1], [4, 1, 1, 1]]
    """
    if devices < 1:
        raise UsageError(f"devices must be >= 1, got {devices}")
    choices = [
        [d for d in _powers_of_two_up_to(devices) if size % d == 0] if allowed else [1]
        for size, allowed in zip(shape, dims, strict=True)
    ]
    rows = [c for c in itertools.product(*choices) if devices % math.prod(c) == 0]
    rows.sort(key=lambda c: (math.prod(c), c))
    return np.asarray(rows, dtype=np.int64).reshape(-1, len(DIMS))


def tile_boxes(shape: Shape, degrees: IntArray) -> tuple[IntArray, IntArray]:
    """Half-open boxes ``[lo, hi)`` of the tiles of one configuration, row-major order.

    Examples
    --------
    >>> lo, hi = tile_boxes((4, 2, 6, 6), np.array([2, 1, 1, 2]))
    >>> lo.tolist(), hi[-1].tolist()
    ([[0, 0, 0, 0], [0, 0, 0, 3], [2, 0, 0, 0], [2, 0, 0, 3]], [4, 2, 6, 6])
    """
    deg = [int(d) for d in degrees]
    coords = np.asarray(list(itertools.product(*(range(d) for d in deg))), dtype=np.int64)
    step = np.asarray(shape, dtype=np.int64) // np.asarray(deg, dtype=np.int64)
    lo = coords * step
    return lo, lo + step


def tile_devices(degrees: IntArray) -> IntArray:
    """Device of each tile: the contiguous block ``0 .. p-1`` (see module docstring).

    Examples
    --------
    >>> tile_devices(np.array([2, 1, 2, 1])).tolist()
    [0, 1, 2, 3]
    """
    return np.arange(int(np.prod(degrees)), dtype=np.int64)


def format_config(layer: LayerSpec, degrees: IntArray | tuple[int, ...]) -> str:
    """Paper-style label, e.g. ``{n=4, c=1, h=1, w=1}`` (``{n=1, c=4}`` for FC/softmax).

    Examples
    --------
    >>> from dnnpart.layerwise.models import vgg16
    >>> format_config(vgg16(8).layers[-2], (1, 4, 1, 1))
    '{n=1, c=4}'
    """
    dims = parallel_dims(layer)
    parts = [f"{d}={int(v)}" for d, v, ok in zip(DIMS, degrees, dims, strict=True) if ok]
    return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class ConfigSpace:
    """All configurations of one layer, padded to ``devices`` tiles each.

    Attributes
    ----------
    degrees
        ``(C, 4)`` degree vectors.
    lo, hi
        ``(C, T, 4)`` tile boxes in the output's coordinates; padding tiles are empty
        (``lo == hi == 0``).
    device
        ``(C, T)`` device of each tile, ``-1`` for padding.
    """

    degrees: IntArray
    lo: IntArray
    hi: IntArray
    device: IntArray

    def __len__(self) -> int:
        return int(self.degrees.shape[0])

    def index(self, degrees: tuple[int, ...]) -> int:
        """Position of the configuration with these degrees."""
        hits = np.flatnonzero((self.degrees == np.asarray(degrees)).all(axis=1))
        if hits.size == 0:
            raise KeyError(degrees)
        return int(hits[0])


def config_space(layer: LayerSpec, devices: int) -> ConfigSpace:
    """Enumerate the configurations of ``layer`` on ``devices`` devices.

    Examples
    --------
    >>> from dnnpart.layerwise.models import lenet5
    >>> space = config_space(lenet5(32).layers[1], 4)
    >>> len(space), space.lo.shape, space.device[1].tolist()
    (15, (15, 4, 4), [0, 1, -1, -1])
    """
    degrees = enumerate_degrees(layer.out_shape, parallel_dims(layer), devices)
    c = len(degrees)
    lo = np.zeros((c, devices, 4), dtype=np.int64)
    hi = np.zeros((c, devices, 4), dtype=np.int64)
    dev = np.full((c, devices), -1, dtype=np.int64)
    for k, deg in enumerate(degrees):
        tlo, thi = tile_boxes(layer.out_shape, deg)
        p = tlo.shape[0]
        lo[k, :p], hi[k, :p] = tlo, thi
        dev[k, :p] = tile_devices(deg)
    return ConfigSpace(degrees, lo, hi, dev)
