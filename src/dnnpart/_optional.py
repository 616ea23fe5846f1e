"""Lazy import of optional dependencies, so ``import dnnpart`` stays light."""

from __future__ import annotations

import importlib
from types import ModuleType

from dnnpart.errors import MissingDependencyError


def require(module: str, *, extra: str, caller: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra.

    Examples
    --------
    >>> require("json", extra="core", caller="doctest").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{caller} needs the Python package {module!r}; install it with "
            f"pip install 'dnnpart[{extra}]'"
        ) from exc
