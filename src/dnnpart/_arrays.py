"""Small array helpers shared across the package."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def unique_ints(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The sorted distinct values of an integer array: ``np.unique(values)`` without its
    import of ``numpy.ma`` (numpy >= 2.3 checks for masked arrays there: ~10 ms, a few
    percent of a small solve's whole process).

    Examples
    --------
    >>> unique_ints([3, 1, 3, 2]).tolist()
    [1, 2, 3]
    """
    flat = np.sort(np.ravel(np.asarray(values)))
    if flat.size < 2:
        return flat
    keep = np.empty(flat.size, np.bool_)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


def set_bits(mask: int) -> list[int]:
    """Indices of the set bits of ``mask``, lowest first (a Python int as a bit set).

    Examples
    --------
    >>> set_bits(0b10110)
    [1, 2, 4]
    """
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
