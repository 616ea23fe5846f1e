"""Plans (node -> device) and solver results."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.errors import InfeasibleError

Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Plan:
    """Where each node runs.

    Parameters
    ----------
    assignment : ``(n,)`` device index of every node (graph's topological ids).
    subgraph : optional ``(n,)`` ordinal of the node's subgraph on its device; a device runs
        its subgraphs in increasing ordinal (single-sample latency with several contiguous
        subgraphs per accelerator). ``None`` lets the evaluator derive them.

    Examples
    --------
    >>> Plan(assignment=[0, 0, 1]).device_nodes(0).tolist()
    [0, 1]
    """

    assignment: Int32Array
    subgraph: Int32Array | None = None

    def __post_init__(self) -> None:
        a = np.array(self.assignment, dtype=np.int32).reshape(-1)
        if np.any(a < 0):
            raise ValueError("plan assignment has negative device indices (unplaced nodes)")
        a.flags.writeable = False
        object.__setattr__(self, "assignment", a)
        if self.subgraph is not None:
            s = np.array(self.subgraph, dtype=np.int32).reshape(-1)
            if s.shape != a.shape or np.any(s < 0):
                raise ValueError("plan subgraph must be (n,) non-negative ordinals")
            s.flags.writeable = False
            object.__setattr__(self, "subgraph", s)

    @property
    def n_nodes(self) -> int:
        return int(self.assignment.shape[0])

    def device_nodes(self, device: int) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.assignment == device)


class Status(enum.Enum):
    """Outcome of a solve."""

    OPTIMAL = "optimal"  #: proven optimal (within the method's stated tolerance)
    FEASIBLE = "feasible"  #: a plan was found; optimality not proven
    INFEASIBLE = "infeasible"  #: proven: no plan satisfies the constraints
    UNKNOWN = "unknown"  #: stopped before finding any plan


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class SolveResult:
    """What every solver returns.

    ``objective`` equals ``evaluate(problem, plan).objective``; ``bound`` is a proven lower
    bound on the optimum over the method's search space (``None`` when the method has none).
    """

    status: Status
    plan: Plan | None
    objective: float
    method: str
    wall_time_s: float
    bound: float | None = None
    search_space: str = ""
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """Relative gap ``(objective - bound) / objective``; ``None`` without a bound."""
        if self.bound is None or self.plan is None or not math.isfinite(self.objective):
            return None
        if self.objective <= 0:
            return 0.0
        return max(0.0, (self.objective - self.bound) / self.objective)

    def require_plan(self) -> Plan:
        if self.plan is None:
            raise InfeasibleError(f"{self.method}: no plan ({self.status.value})")
        return self.plan

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the plan)."""
        return {
            "method": self.method,
            "status": self.status.value,
            "objective": self.objective if math.isfinite(self.objective) else None,
            "bound": self.bound,
            "gap": self.gap,
            "search_space": self.search_space,
            "wall_time_s": self.wall_time_s,
            **{k: v for k, v in self.stats.items() if isinstance(v, (int, float, str, bool))},
        }
