"""Plans (node -> device) and solver results."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.errors import InfeasibleError, UsageError

Int32Array = npt.NDArray[np.int32]


@dataclass(frozen=True, slots=True)
class LayerConfig:
    """A layer's parallel configuration (paper 3): degrees per output dimension and the devices
    holding its tiles.

    ``degrees`` is ``(n, c, h, w)`` (sample, channel, height, width); the output is cut into
    ``prod(degrees)`` equal tiles, numbered row-major over their coordinates, and tile ``t``
    runs on ``devices[t]``.

    Examples
    --------
    >>> LayerConfig((2, 1, 1, 2), (0, 1, 2, 3)).tiles
    4
    >>> LayerConfig((2, 1, 1, 1), (0,))
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: layer config: 2 tiles need 2 distinct devices, got (0,)
    """

    degrees: tuple[int, ...]
    devices: tuple[int, ...]

    def __post_init__(self) -> None:
        deg = tuple(int(d) for d in self.degrees)
        dev = tuple(int(d) for d in self.devices)
        if not deg or any(d < 1 for d in deg):
            raise UsageError(f"layer config: degrees must be integers >= 1, got {self.degrees}")
        tiles = math.prod(deg)
        if len(dev) != tiles or len(set(dev)) != tiles or any(d < 0 for d in dev):
            raise UsageError(f"layer config: {tiles} tiles need {tiles} distinct devices, got {dev}")
        object.__setattr__(self, "degrees", deg)
        object.__setattr__(self, "devices", dev)

    @property
    def tiles(self) -> int:
        return len(self.devices)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Plan:
    """Where each node runs.

    Parameters
    ----------
    assignment : ``(n,)`` device index of every node (graph's topological ids).
    subgraph : optional ``(n,)`` ordinal of the node's subgraph on its device; a device runs
        its subgraphs in increasing ordinal (single-sample latency with several contiguous
        subgraphs per accelerator). ``None`` lets the evaluator derive them.
    replica_of : optional ``(d,)`` replication of stages (paper 1, appendix C.2): for every
        device, the device whose stage it runs a replica of, or itself. A *primary* device
        (``replica_of[p] == p``) holds the stage's nodes in ``assignment``; each replica
        ``j`` (``replica_of[j] == p != j``) holds none and runs the same nodes on every
        ``r``-th sample, ``r`` being the size of the group. ``None``: no replication.
    layer_configs : optional ``(n,)`` :class:`LayerConfig` per node (layer-wise parallelism,
        paper 3, objective ``iteration``); ``assignment`` then holds the device of each layer's
        first tile.

    Examples
    --------
    >>> Plan(assignment=[0, 0, 1]).device_nodes(0).tolist()
    [0, 1]
    >>> p = Plan(assignment=[0, 0, 1], replica_of=[0, 1, 0])   # device 2 replicates device 0
    >>> p.replica_counts().tolist(), p.replicas(0).tolist()
    ([2, 1, 2], [0, 2])
    >>> Plan(assignment=[0, 0, 1], replica_of=[0, 1, 0], pipeline_copy=[1, 0, 0]).ring(0).tolist()
    [2, 0]
    """

    assignment: Int32Array
    subgraph: Int32Array | None = None
    replica_of: Int32Array | None = None
    pipeline_copy: Int32Array | None = None
    layer_configs: tuple[LayerConfig, ...] | None = None

    def __post_init__(self) -> None:
        a = np.array(self.assignment, dtype=np.int32).reshape(-1)
        if np.any(a < 0):
            raise UsageError("plan assignment has negative device indices (unplaced nodes)")
        a.flags.writeable = False
        object.__setattr__(self, "assignment", a)
        if self.subgraph is not None:
            s = np.array(self.subgraph, dtype=np.int32).reshape(-1)
            if s.shape != a.shape or np.any(s < 0):
                raise UsageError("plan subgraph must be (n,) non-negative ordinals")
            s.flags.writeable = False
            object.__setattr__(self, "subgraph", s)
        if self.replica_of is not None:
            r = np.array(self.replica_of, dtype=np.int32).reshape(-1)
            if np.any(r < 0) or np.any(r >= r.shape[0]):
                raise UsageError("plan replica_of must hold device indices in [0, n_devices)")
            if np.any(r[r] != r):
                raise UsageError(
                    "plan replica_of must point every replica at a primary device "
                    "(one that is its own replica_of), not at another replica"
                )
            held = np.zeros(r.shape[0], np.bool_)
            held[a[a < r.shape[0]]] = True
            bad = np.flatnonzero(held & (r != np.arange(r.shape[0])))
            if bad.size:
                raise UsageError(
                    f"plan replica_of: device {int(bad[0])} replicates device {int(r[bad[0]])} "
                    "but is also assigned nodes; a replica holds no nodes of its own"
                )
            r.flags.writeable = False
            object.__setattr__(self, "replica_of", r)
        if self.pipeline_copy is not None:
            if self.replica_of is None:
                raise UsageError("plan pipeline_copy needs replica_of (the replication groups)")
            rep = self.replica_of
            c = np.array(self.pipeline_copy, dtype=np.int32).reshape(-1)
            if c.shape != rep.shape:
                raise UsageError(f"plan pipeline_copy must have one entry per device "
                                 f"({rep.shape[0]}), got {c.shape[0]}")
            for p in np.unique(rep).tolist():
                got = np.sort(c[rep == p])
                if not np.array_equal(got, np.arange(got.shape[0])):
                    raise UsageError(
                        f"plan pipeline_copy: the group of device {p} must number its "
                        f"{got.shape[0]} devices 0..{got.shape[0] - 1}, got {got.tolist()}")
            c.flags.writeable = False
            object.__setattr__(self, "pipeline_copy", c)
        if self.layer_configs is not None:
            configs = tuple(self.layer_configs)
            if len(configs) != a.shape[0] or not all(isinstance(c, LayerConfig) for c in configs):
                raise UsageError("plan layer_configs must hold one LayerConfig per node")
            object.__setattr__(self, "layer_configs", configs)

    @classmethod
    def from_layer_configs(cls, configs: tuple[LayerConfig, ...] | list[LayerConfig]) -> Plan:
        """A layer-wise plan; each node's ``assignment`` is its first tile's device.

        Examples
        --------
        >>> p = Plan.from_layer_configs([LayerConfig((1, 1, 1, 1), (0,)),
        ...                              LayerConfig((1, 2, 1, 1), (1, 0))])
        >>> p.assignment.tolist()
        [0, 1]
        """
        configs = tuple(configs)
        first = np.array([c.devices[0] for c in configs], dtype=np.int32)
        return cls(assignment=first, layer_configs=configs)

    @property
    def n_nodes(self) -> int:
        return int(self.assignment.shape[0])

    def device_nodes(self, device: int) -> npt.NDArray[np.int64]:
        return np.flatnonzero(self.assignment == device)

    @property
    def is_replicated(self) -> bool:
        """Whether some stage runs on more than one device."""
        r = self.replica_of
        return r is not None and bool(np.any(r != np.arange(r.shape[0])))

    def replica_counts(self) -> npt.NDArray[np.int64]:
        """Per device, the number of devices running its stage (1 without replication).

        Needs ``replica_of``; every device of a group gets the group's size.
        """
        if self.replica_of is None:
            raise UsageError("the plan has no replica_of")
        r = self.replica_of.astype(np.int64)
        counts: npt.NDArray[np.int64] = np.bincount(r, minlength=r.shape[0])[r]
        return counts

    def replicas(self, device: int) -> npt.NDArray[np.int64]:
        """The devices of ``device``'s replication group, its primary included."""
        if self.replica_of is None:
            return np.array([device], dtype=np.int64)
        r = self.replica_of
        return np.flatnonzero(r == r[device])

    def ring(self, device: int) -> npt.NDArray[np.int64]:
        """The devices of ``device``'s replication group in ring (pipeline copy) order.

        Without ``pipeline_copy``: device-index order.
        """
        members = self.replicas(device)
        if self.pipeline_copy is None:
            return members
        ordered: npt.NDArray[np.int64] = members[np.argsort(self.pipeline_copy[members],
                                                            kind="stable")]
        return ordered


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
    ``provenance`` says where the plan came from when the method is more than one algorithm:
    the candidate a portfolio kept and what refined it (``"cp-heuristic, refined by local
    search: 12 moves"``); empty means the method's own algorithm produced it.
    """

    status: Status
    plan: Plan | None
    objective: float
    method: str
    wall_time_s: float
    bound: float | None = None
    search_space: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    provenance: str = ""

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
            "provenance": self.provenance or self.method,
            "wall_time_s": self.wall_time_s,
            **{k: v for k, v in self.stats.items() if isinstance(v, (int, float, str, bool))},
        }
