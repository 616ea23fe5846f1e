"""Method registry: name -> solver function with a one-line description and its guarantee.

Every method, exact or heuristic, solver or baseline, has the signature::

    method(problem, /, *, time_limit=None, progress=None, **options) -> SolveResult
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dnnpart.plan import SolveResult
from dnnpart.problem import OBJECTIVE_KINDS, Problem


class Progress(Protocol):
    """Receives progress of long solves (the CLI renders it on stderr)."""

    def update(self, message: str, fraction: float | None = None) -> None: ...


class SolverFunc(Protocol):
    def __call__(
        self, problem: Problem, /, *, time_limit: float | None = ..., progress: Progress | None = ...,
        **options: Any,
    ) -> SolveResult: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MethodInfo:
    """A registered method.

    Attributes
    ----------
    name : the name users type (``dnnpart solve --method NAME``).
    summary : one line: what the method does.
    guarantee : what the result is guaranteed to be (e.g. "optimal contiguous split").
    objectives : objective kinds the method optimises.
    exact : whether a finished run proves optimality over its search space.
    source : the paper/section it implements.
    """

    name: str
    func: SolverFunc
    summary: str
    guarantee: str
    objectives: tuple[str, ...]
    exact: bool
    source: str = ""


_METHODS: dict[str, MethodInfo] = {}


def register(
    name: str, *, summary: str, guarantee: str, objectives: tuple[str, ...] = ("throughput",),
    exact: bool = False, source: str = "",
) -> Callable[[Callable[..., SolveResult]], Callable[..., SolveResult]]:
    """Decorator adding a solver function to the registry under ``name``."""
    unknown = set(objectives) - set(OBJECTIVE_KINDS)
    if unknown:
        raise ValueError(f"method {name}: unknown objective kinds {sorted(unknown)}")

    def decorate(func: Callable[..., SolveResult]) -> Callable[..., SolveResult]:
        if name in _METHODS and _METHODS[name].func is not func:
            raise ValueError(f"method {name!r} is already registered")
        _METHODS[name] = MethodInfo(
            name=name, func=func, summary=summary, guarantee=guarantee,
            objectives=objectives, exact=exact, source=source,
        )
        return func

    return decorate


def _load_all() -> None:
    # Importing the catalog registers every built-in method.
    import dnnpart.solvers.catalog  # noqa: F401


def available_methods() -> list[MethodInfo]:
    """All registered methods, sorted by name.

    Examples
    --------
    >>> "brute-force" in [m.name for m in available_methods()]
    True
    """
    _load_all()
    return [_METHODS[k] for k in sorted(_METHODS)]


def get_method(name: str) -> MethodInfo:
    """Look a method up by name; ``ValueError`` lists the valid names."""
    _load_all()
    try:
        return _METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(_METHODS)}") from None


def solve(
    problem: Problem, method: str = "dp", /, *, time_limit: float | None = None,
    progress: Progress | None = None, **options: Any,
) -> SolveResult:
    """Solve ``problem`` with the named method.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> solve(p, "brute-force").objective
    5.0
    """
    info = get_method(method)
    if problem.objective.kind not in info.objectives:
        raise ValueError(
            f"method {method!r} optimises {list(info.objectives)}, not {problem.objective.kind!r}"
        )
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    return info.func(problem, time_limit=time_limit, progress=progress, **options)


class Stopwatch:
    """Wall-clock helper for solvers: elapsed time and deadline checks."""

    def __init__(self, time_limit: float | None = None) -> None:
        self.started = time.perf_counter()
        self.time_limit = time_limit

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def expired(self) -> bool:
        return self.time_limit is not None and self.elapsed >= self.time_limit
