"""What every MIP backend takes and returns (the adapter's contract)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

#: Called on each improvement: (incumbent of the model, proven lower bound, seconds elapsed).
ProgressHook = Callable[[float, float, float], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendSettings:
    """Limits and knobs passed through to the backend.

    ``gap`` is the relative gap at which the backend may stop; ``threads`` its worker
    count (``None``: backend default); ``seed`` its random seed. ``deterministic`` asks for
    the same answer run to run: the time limit is then counted in the backend's
    deterministic time units (CP-SAT: ``max_deterministic_time``, parallel workers
    interleaved) instead of wall seconds. ``node_limit`` (HiGHS only; CP-SAT refuses it)
    stops the branch and bound after that many nodes, a limit counted in work, not seconds:
    ``1`` is the root node with its presolve, cuts and primal heuristics.
    """

    time_limit: float | None = None
    gap: float = 0.01
    threads: int | None = None
    seed: int = 0
    deterministic: bool = False
    node_limit: int | None = None
    on_progress: ProgressHook | None = None


@dataclass(slots=True, kw_only=True)
class BackendOutcome:
    """A backend's answer in the model's own units (times in seconds).

    ``values`` is the best solution found (``None`` when none); ``bound`` a proven lower
    bound on the model's optimum (``-inf`` when none); ``infeasible`` that the model has no
    solution; ``bound_certified`` is False when the translation could not keep the bound
    valid (CP-SAT with memory sizes it had to round up).
    """

    values: npt.NDArray[np.float64] | None
    bound: float = -math.inf
    infeasible: bool = False
    bound_certified: bool = True
    status: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


BACKENDS = ("cpsat", "highs")

#: What ``backend=`` accepts: a backend, or ``"portfolio"`` (CP-SAT, then HiGHS from its plan).
BACKEND_CHOICES = (*BACKENDS, "portfolio")
