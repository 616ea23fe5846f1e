"""Run linear-time kernels compiled in tests, whatever the size of their inputs.

A kernel made with :func:`dnnpart._jit.linear_kernel` runs its own source as plain Python on
small inputs until numba is loaded for it, so a test on small inputs would compare that
source with itself, or check a twin against the source instead of the compiled code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dnnpart._jit import LazyKernel


@contextmanager
def compiled(*kernels: LazyKernel[Any]) -> Iterator[None]:
    """Inside the block, calls of ``kernels`` run numba-compiled code (compiled on first call).

    Examples
    --------
    >>> from dnnpart.solvers.dp.lattice_kernels import ideal_sums
    >>> with compiled(ideal_sums):
    ...     ideal_sums.plain_below
    0
    >>> ideal_sums.plain_below > 0
    True
    """
    saved = [k.plain_below for k in kernels]
    try:
        for k in kernels:
            k.plain_below = 0
        yield
    finally:
        for k, below in zip(kernels, saved, strict=True):
            k.plain_below = below
