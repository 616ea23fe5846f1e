"""The CPU heap as the cost model prices it: freed memory stays mapped, large blocks do not.

glibc's ``malloc`` returns the top of its heap to the kernel whenever more than its trim
threshold is free there, and by default raises its mmap threshold as large blocks are freed.
A training step's activations grow and shrink by tens of megabytes, so each step the kernel
maps those pages again and every first write to them is a page fault: on this project's CPU
runner a ResNet-50 micro-batch step of 2 images at 128x128 faulted 55-86 MB of pages per
step, and took 1.07-1.46 s against 0.65-0.68 s with the pages kept (one thread, a loaded
machine), while an operator timed alone by ``calibrate``
reuses the same block and faults nothing. The cost model assumes the calibrated case: an
operator's output is fresh memory only when it is a large block
(:data:`~dnnpart.cost.ops.FRESH_ALLOCATION_BYTES` or more), which ``calibrate`` prices by
``fresh_bytes_rate``.

:func:`keep_freed_heap` makes the process behave that way (what CPU tuning guides for
PyTorch do with jemalloc or tcmalloc, here with glibc's own ``mallopt``): the heap is never
trimmed, and blocks of ``FRESH_ALLOCATION_BYTES`` or more are mapped per allocation. ``run``'s
ranks, launched CPU ranks and ``calibrate`` call it, so measured and calibrated operators run
on the same heap. A process keeps its peak heap mapped until it exits (its resident size, not
its tensors' peak, which is what ``run`` measures).

:func:`release_freed_heap` hands the pages of the heap's free blocks back to the kernel, so
that the next use of a block faults them in again: ``calibrate`` calls it before timing an
operator whose workspace a run maps afresh on every call (a heap left large by the other
cases would serve it from pages already mapped).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

from dnnpart.cost.ops import FRESH_ALLOCATION_BYTES

#: ``mallopt`` parameters (glibc's ``malloc.h``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: The largest trim threshold ``mallopt`` takes (an ``int``): the heap is never trimmed.
NEVER_TRIM = 2**31 - 1


@functools.cache
def keep_freed_heap() -> bool:
    """Keep freed heap memory mapped and map large blocks per allocation (module docstring).

    Returns whether the C library took both settings (False where it is not glibc, e.g.
    macOS or musl: there the allocator keeps its own policy and the model's error grows).

    Examples
    --------
    >>> isinstance(keep_freed_heap(), bool)
    True
    """
    mallopt = _libc("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM)) and bool(
        mallopt(M_MMAP_THRESHOLD, FRESH_ALLOCATION_BYTES))


def release_freed_heap() -> bool:
    """Return the pages of the heap's free blocks to the kernel (glibc's ``malloc_trim(0)``);
    whether the C library has it.

    Examples
    --------
    >>> isinstance(release_freed_heap(), bool)
    True
    """
    trim = _libc("malloc_trim")
    if trim is None:
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    trim(0)
    return True


@functools.cache
def _libc(function: str) -> Any:
    """The C library's ``function`` through ctypes (looked up once: ``find_library`` runs
    ``ldconfig``); None where there is no such library or it lacks the function (not glibc:
    macOS, musl)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), function)
    except (OSError, AttributeError):
        return None
