"""Numba on demand: kernels are plain Python functions compiled on first call.

Keeping the Python function reachable as ``kernel.py_func`` gives every kernel a pure-Python
twin for tests, and importing numba lazily keeps ``import dnnpart`` fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def load_numba() -> Any:
    """``import numba``, with its compilations shielded from the stop backstop.

    Examples
    --------
    >>> load_numba().njit is not None
    True
    """
    import numba

    from dnnpart.interrupt import shield_numba_compiles

    shield_numba_compiles()
    return numba


class LazyKernel(Generic[F]):
    """A function compiled with ``numba.njit(cache=True)`` the first time it is called.

    With ``plain_below = N > 0``, calls whose array arguments hold fewer than ``N`` elements in
    all run the plain-Python twin instead, as long as the kernel is not compiled yet: the first
    numba call in a process costs ~0.3 s (``import numba``) plus ~0.3 s (its CPU target and
    the cached machine code), far more than a linear-time kernel on a few thousand nodes.
    """

    def __init__(self, py_func: F, plain_below: int = 0) -> None:
        self.py_func = py_func
        self.plain_below = plain_below
        self._compiled: Callable[..., Any] | None = None
        self._cold = True
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None and self.plain_below > 0 and _elements(args) < self.plain_below:
            return self.py_func(*args)
        if self._compiled is None:
            numba = load_numba()
            _bind_helpers(self.py_func.__globals__)
            self._compiled = numba.njit(cache=True, nogil=True)(self.py_func)
        if self._cold:
            return self._first_call(args)
        return self._compiled(*args)

    def _first_call(self, args: tuple[Any, ...]) -> Any:
        """The call that compiles the kernel (or loads it from the cache), shielded from the
        stop backstop as a whole: after numba releases its compiler lock its dispatcher goes
        on in Python, and an asynchronous stop landing there can crash the process (a
        segfault, seen under load, when that tail outlasted ``COMPILE_TAIL_S``). The backstop
        waits for this one call; later calls are not shielded."""
        from dnnpart.interrupt import shielded

        assert self._compiled is not None
        with shielded():
            out = self._compiled(*args)
        self._cold = False
        return out


#: module name -> plain functions its kernels call (see :func:`helper`)
_HELPERS: dict[str, list[Callable[..., Any]]] = {}


def helper(py_func: F) -> F:
    """Mark a plain function that kernels of its module call.

    It stays a plain function (the kernels' plain-Python twins call it as such, without
    loading numba) until a kernel of the module is compiled: then it is compiled too and
    rebound in the module, where numba resolves the kernel's calls at compile time.
    """
    _HELPERS.setdefault(py_func.__module__, []).append(py_func)
    return py_func


def _bind_helpers(namespace: dict[str, Any]) -> None:
    helpers = _HELPERS.pop(str(namespace.get("__name__")), [])
    if helpers:
        numba = load_numba()
        for func in helpers:
            namespace[func.__name__] = numba.njit(cache=True, nogil=True)(func)


def _elements(args: tuple[Any, ...]) -> int:
    return sum(int(getattr(a, "size", 0)) for a in args)


def kernel(py_func: F) -> LazyKernel[F]:
    """Decorate a numba-compatible function; ``.py_func`` is its uncompiled source."""
    return LazyKernel(py_func)


#: Array elements below which a linear-time kernel runs as plain Python before numba loads.
SMALL_LINEAR = 20_000


def linear_kernel(py_func: F) -> LazyKernel[F]:
    """:func:`kernel` for a linear-time kernel: plain Python on inputs below ``SMALL_LINEAR``
    array elements until numba is needed anyway (see :class:`LazyKernel`)."""
    return LazyKernel(py_func, plain_below=SMALL_LINEAR)


class ModuleKernels:
    """Lazy ``numba.njit`` for a module whose kernels call each other.

    Numba resolves a kernel's calls to other kernels through the module's globals at compile
    time, so those must be dispatchers then. Decorating with an instance of this class keeps
    ``import numba`` off the import path: the first call of any kernel compiles (or loads from
    the cache) all of them and rebinds the module's names to the dispatchers.
    """

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace
        self._kernels: list[LazyKernel[Any]] = []

    def __call__(self, py_func: F) -> LazyKernel[F]:
        lazy: LazyKernel[F] = _Linked(py_func, self)
        self._kernels.append(lazy)
        return lazy

    def compile_all(self) -> None:
        numba = load_numba()
        for lazy in self._kernels:
            if lazy._compiled is None:
                lazy._compiled = numba.njit(cache=True, nogil=True)(lazy.py_func)
            self._namespace[lazy.__name__] = lazy._compiled


class _Linked(LazyKernel[F]):
    def __init__(self, py_func: F, owner: ModuleKernels) -> None:
        super().__init__(py_func)
        self._owner = owner

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            self._owner.compile_all()
        assert self._compiled is not None
        if self._cold:
            return self._first_call(args)
        return self._compiled(*args)


def not_compiled(func: Any) -> bool:
    """Whether ``func`` is a :class:`LazyKernel` not compiled yet (plain functions: False)."""
    return isinstance(func, LazyKernel) and func._compiled is None
