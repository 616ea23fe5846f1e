"""What every simulator returns: a :class:`Timeline` of intervals and memory curves."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Interval kinds of a timeline.
COMPUTE, TRANSFER, ALLREDUCE = "compute", "transfer", "allreduce"


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class MemoryCurve:
    """Memory of one device over time, a step function known at its event times.

    ``at[k]`` is the memory *at* ``times[k]`` (intervals are closed: a tensor freed at ``t``
    and one allocated at ``t`` both count at ``t``); ``after[k]`` holds on the open interval
    up to the next event time. Before the first event the device holds ``base`` (its
    residual bytes).

    Examples
    --------
    >>> c = MemoryCurve(times=np.array([1.0, 2.0]), at=np.array([5.0, 5.0]),
    ...                 after=np.array([5.0, 0.0]), base=0.0)
    >>> c.value(0.5), c.value(2.0), c.value(3.0), c.peak
    (0.0, 5.0, 0.0, 5.0)
    """

    times: FloatArray
    at: FloatArray
    after: FloatArray
    base: float = 0.0

    @property
    def peak(self) -> float:
        return float(max(self.base, self.at.max())) if self.at.size else float(self.base)

    def value(self, t: float) -> float:
        """Memory at time ``t``."""
        k = int(np.searchsorted(self.times, t, side="left"))
        if k < self.times.size and self.times[k] == t:
            return float(self.at[k])
        return float(self.base if k == 0 else self.after[k - 1])


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Timeline:
    """Intervals on resources (devices, links, rings) in the graph's time unit.

    Attributes
    ----------
    resources : resource names; ``resource[k]`` indexes them.
    resource, start, end : one entry per interval.
    kind : ``compute``, ``transfer`` or ``allreduce`` per interval.
    what : a label per interval (op name, ``F3`` = forward of micro-batch 3, ...).
    memory : memory curve per device name (where the simulator tracks memory).
    time_unit_s : seconds per time unit (for the Chrome trace).
    """

    resources: tuple[str, ...]
    resource: IntArray
    start: FloatArray
    end: FloatArray
    kind: tuple[str, ...]
    what: tuple[str, ...]
    memory: dict[str, MemoryCurve] = field(default_factory=dict)
    time_unit_s: float = 1e-3

    @property
    def makespan(self) -> float:
        return float(self.end.max()) if self.end.size else 0.0

    def __len__(self) -> int:
        return int(self.start.shape[0])
