"""Numba on demand: kernels are plain Python functions compiled on first call.

Keeping the Python function reachable as ``kernel.py_func`` gives every kernel a pure-Python
twin for tests, and importing numba lazily keeps ``import dnnpart`` fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class LazyKernel(Generic[F]):
    """A function compiled with ``numba.njit(cache=True)`` the first time it is called."""

    def __init__(self, py_func: F) -> None:
        self.py_func = py_func
        self._compiled: Callable[..., Any] | None = None
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            import numba

            self._compiled = numba.njit(cache=True, nogil=True)(self.py_func)
        return self._compiled(*args)


def kernel(py_func: F) -> LazyKernel[F]:
    """Decorate a numba-compatible function; ``.py_func`` is the plain-Python twin."""
    return LazyKernel(py_func)
