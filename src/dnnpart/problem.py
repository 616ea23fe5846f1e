"""A placement problem: graph + cluster + objective."""

from __future__ import annotations

from dataclasses import dataclass, field

from dnnpart.devices.cluster import Cluster
from dnnpart.graph.core import Graph

THROUGHPUT = "throughput"
LATENCY = "latency"
OBJECTIVE_KINDS = (THROUGHPUT, LATENCY)
#: Training objectives (paper 1, section 5.3): PipeDream's max_i(FW_i + BW_i) and GPipe's
#: max_i FW_i + max_i BW_i.
TRAINING_FORMS = ("pipedream", "gpipe")
#: How an accelerator's transfers combine with its compute (paper 1, appendix C.1):
#: "none" sums them, "compute-comm" takes max(compute, in + out), "full-duplex" takes
#: max(in, compute, out).
OVERLAP_MODES = ("none", "compute-comm", "full-duplex")


@dataclass(frozen=True, slots=True, kw_only=True)
class Objective:
    """What a plan is scored by.

    Examples
    --------
    >>> Objective(kind="throughput", training="gpipe").training
    'gpipe'
    """

    kind: str = THROUGHPUT
    training: str = "pipedream"
    overlap: str = "none"

    def __post_init__(self) -> None:
        for attr, allowed in (
            ("kind", OBJECTIVE_KINDS),
            ("training", TRAINING_FORMS),
            ("overlap", OVERLAP_MODES),
        ):
            value = getattr(self, attr)
            if value not in allowed:
                raise ValueError(f"objective {attr} must be one of {list(allowed)}, got {value!r}")

    def describe(self) -> str:
        if self.kind == LATENCY:
            return "single-sample latency"
        parts = ["time per sample (max device load)"]
        if self.training == "gpipe":
            parts.append("GPipe form max FW + max BW")
        if self.overlap != "none":
            parts.append(f"overlap={self.overlap}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Problem:
    """Graph, cluster and objective: the three inputs every solver takes.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.devices import reference_cluster
    >>> p = Problem(graph=chain_graph(4), cluster=reference_cluster(
    ...     n_accelerators=2, n_cpus=1, memory_bytes=1e9))
    >>> p.objective.kind
    'throughput'
    """

    graph: Graph
    cluster: Cluster
    objective: Objective = field(default_factory=Objective)
    name: str = ""

    def __post_init__(self) -> None:
        missing = {d.kind for d in self.cluster.devices} - set(self.graph.device_kinds)
        if missing:
            raise ValueError(
                f"the graph has no compute times for device kind(s) {sorted(missing)}; "
                f"it has {list(self.graph.device_kinds)}"
            )

    def with_objective(self, objective: Objective) -> Problem:
        return Problem(graph=self.graph, cluster=self.cluster, objective=objective, name=self.name)
