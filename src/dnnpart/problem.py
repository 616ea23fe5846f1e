"""A placement problem: graph + cluster + objective."""

from __future__ import annotations

from dataclasses import dataclass, field

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import UsageError
from dnnpart.graph.core import Graph

THROUGHPUT = "throughput"
LATENCY = "latency"
#: Paper 2: makespan of the op-level emulation (:func:`dnnpart.simulate.emulate_ops`).
MAKESPAN = "makespan"
#: Paper 4: simulated time per sample of a synchronous pipeline
#: (:func:`dnnpart.simulate.simulate_pipeline`); Eq. 5's max stage time is reported beside it.
PIPELINE = "pipeline"
#: Paper 3: time of one training iteration of a layer-wise parallel strategy (Eq. 1, t_O),
#: per-GPU batch ``batch``, priced by the roofline the cluster's devices carry.
ITERATION = "iteration"
#: A trainer's linear pipeline (:mod:`dnnpart.pricing.chain`): the largest stage time
#: (forward + backward compute plus the transfers carried between neighbouring stages,
#: paper 1's throughput form and paper 4's Eq. 5) under per-stage memory = weights, gradients,
#: optimizer state and the activations of the micro-batches in flight under ``schedule``.
STAGES = "stages"
OBJECTIVE_KINDS = (THROUGHPUT, LATENCY, MAKESPAN, PIPELINE, ITERATION, STAGES)
#: Pipeline schedules of the ``pipeline`` objective.
SCHEDULES = ("gpipe", "1f1b")
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
    #: ``pipeline`` and ``stages``: schedule, micro-batches per step, activation recomputation.
    schedule: str = "gpipe"
    microbatches: int = 4
    recompute: bool = False
    #: ``iteration`` only: samples per device (global batch = ``batch`` x devices); the tiles
    #: are priced by the cluster's devices (:attr:`~dnnpart.devices.cluster.Device.spec`).
    batch: int = 32

    def __post_init__(self) -> None:
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise UsageError(f"objective batch must be an integer >= 1, got {self.batch!r}")
        if isinstance(self.microbatches, bool) or not isinstance(self.microbatches, int) \
                or self.microbatches < 1:
            raise UsageError(f"objective microbatches must be an integer >= 1, got {self.microbatches!r}")
        for attr, allowed in (
            ("kind", OBJECTIVE_KINDS),
            ("training", TRAINING_FORMS),
            ("overlap", OVERLAP_MODES),
            ("schedule", SCHEDULES),
        ):
            value = getattr(self, attr)
            if value not in allowed:
                raise UsageError(f"objective {attr} must be one of {list(allowed)}, got {value!r}")

    def describe(self) -> str:
        if self.kind == LATENCY:
            return "single-sample latency"
        if self.kind == MAKESPAN:
            return "makespan (op-level emulation)"
        if self.kind == ITERATION:
            return f"time per training iteration (Eq. 1, batch {self.batch} per device)"
        if self.kind == STAGES:
            return (f"max stage time per micro-batch ({self.schedule}, {self.microbatches} "
                    "micro-batches in memory" + (", recomputation)" if self.recompute else ")"))
        if self.kind == PIPELINE:
            return (f"pipeline time per sample ({self.schedule}, {self.microbatches} micro-batches"
                    + (", recomputation)" if self.recompute else ")"))
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
            raise UsageError(
                f"the graph has no compute times for device kind(s) {sorted(missing)}; "
                f"it has {list(self.graph.device_kinds)}"
            )

    def with_objective(self, objective: Objective) -> Problem:
        return Problem(graph=self.graph, cluster=self.cluster, objective=objective, name=self.name)
