"""Solvers: one package per paper (its baselines inside), and the method table."""

from dnnpart.solvers.registry import (
    MethodInfo,
    Option,
    Progress,
    Stopwatch,
    available_methods,
    get_method,
    solve,
)

__all__ = ["MethodInfo", "Option", "Progress", "Stopwatch", "available_methods", "get_method", "solve"]
