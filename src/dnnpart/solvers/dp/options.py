"""Checks of the ``dp``/``dpl`` options, and the search space their results report."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.problem import Problem


def check_options(options: dict[str, Any], method: str) -> None:
    """Refuse (``ValueError``) options ``method`` does not know.

    Examples
    --------
    >>> check_options({}, "dp")
    >>> check_options({"speed": 2}, "dp")
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: dp: unknown option(s) ['speed']
    """
    if options:
        raise UsageError(f"{method}: unknown option(s) {sorted(options)}")


def flag(value: Any, name: str) -> bool:
    """Option ``name`` as a bool; refuses (``ValueError``) anything but ``True``/``False``.

    Examples
    --------
    >>> flag(np.True_, "peel")
    True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise UsageError(f"{name} must be true or false, got {value!r}")
    return bool(value)


def check_cap(value: object, name: str) -> None:
    """Refuse (``ValueError``) option ``name`` unless it is an integer ``>= 1``.

    Examples
    --------
    >>> check_cap(10, "max_ideals")
    >>> check_cap(0, "max_ideals")
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: max_ideals must be an integer >= 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UsageError(f"{name} must be an integer >= 1, got {value!r}")


def thread_count(threads: object) -> int:
    """Option ``threads``: ``None`` is the cores this process may run on.

    Examples
    --------
    >>> thread_count(3)
    3
    """
    if threads is None:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else (os.cpu_count() or 1))
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise UsageError(f"threads must be an integer >= 1, got {threads!r}")
    return int(threads)


def search_space(problem: Problem, what: str) -> str:
    """``what`` (the space searched) as a result reports it: the GPipe training form is
    optimised in the PipeDream form (see :mod:`dnnpart.solvers.dp`).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> search_space(chain_problem([1.0], n_accelerators=1), "contiguous splits")
    'contiguous splits'
    """
    gpipe = problem.graph.is_training and problem.objective.training == "gpipe"
    return what + (" (optimised in the PipeDream form)" if gpipe else "")
