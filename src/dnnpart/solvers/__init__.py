"""Solvers: one module per algorithm family, all registered by name."""

from dnnpart.solvers.registry import (
    MethodInfo,
    Progress,
    Stopwatch,
    available_methods,
    get_method,
    register,
    solve,
)

__all__ = ["MethodInfo", "Progress", "Stopwatch", "available_methods", "get_method", "register", "solve"]
