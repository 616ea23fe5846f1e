"""``evaluate(problem, plan)``: the single source of truth for a plan's cost.

Every solver's reported objective equals ``evaluate(problem, plan).objective``. Every plan gets
paper 1's per-device loads, memory, feasibility and contiguity; the objective itself comes from
the evaluator of its kind in :data:`EVALUATORS` (paper 1's loads or latency, paper 2's op-level
emulation, paper 3's Eq. 1, paper 4's simulated pipeline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnpart._arrays import unique_ints
from dnnpart.errors import UsageError
from dnnpart.evaluate.latency import LatencyResult, derive_subgraphs, single_sample_latency
from dnnpart.evaluate.replication import allreduce_time, checked_replication, combine_replicated
from dnnpart.graph.core import NO_CLASS, BoolArray, FloatArray, Graph, IntArray
from dnnpart.graph.kernels import contiguity_violation
from dnnpart.plan import Plan
from dnnpart.pricing.loads import LoadBreakdown, combine, load_breakdown, node_times
from dnnpart.problem import ITERATION, LATENCY, MAKESPAN, PIPELINE, STAGES, THROUGHPUT, Problem


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Evaluation:
    """A plan's cost and feasibility.

    Attributes
    ----------
    objective : the problem's objective (time per sample, or latency).
    feasible : memory, supported operators and colocation all hold.
    violations : one readable line per broken constraint.
    load : per-device load (forward + backward, combined per the overlap mode). A device of
        a replicated stage gets the stage's load divided by the replica count, with the
        all-reduce term (:mod:`dnnpart.evaluate.replication`) added or max-ed.
    forward_load, backward_load : the same for each part alone (the all-reduce belongs to
        the backward part).
    breakdown : compute / in / out transfer totals per device and part (a replica: its
        whole stage's, undivided).
    allreduce : all-reduce time per device (zero without replication or for inference).
    memory_bytes : memory used per device (a replica holds its whole stage).
    contiguous : per device, whether its forward part and its backward part are contiguous.
    latency : single-sample latency details when the objective is latency.
    simulation : for ``makespan`` and ``pipeline``: the simulator's figures (makespan and
        peaks; step time, Eq. 5 max stage time, bubble fraction, memory split per device);
        for ``iteration``: t_O in seconds, bytes per step, global batch, throughput.
        ``memory_bytes`` then holds the simulated peak per device.
    """

    objective: float
    feasible: bool
    violations: tuple[str, ...]
    load: FloatArray
    forward_load: FloatArray
    backward_load: FloatArray
    breakdown: LoadBreakdown
    memory_bytes: FloatArray
    contiguous: BoolArray
    latency: LatencyResult | None = None
    allreduce: FloatArray | None = None
    simulation: dict[str, Any] | None = None

    def to_dict(self, problem: Problem) -> dict[str, Any]:
        """JSON-ready summary with per-device figures."""
        cap = problem.cluster.memory_capacity()
        devices = []
        for i, dev in enumerate(problem.cluster.devices):
            devices.append(
                {
                    "name": dev.name,
                    "kind": dev.kind,
                    "load": _finite(self.load[i]),
                    "forward_load": _finite(self.forward_load[i]),
                    "backward_load": _finite(self.backward_load[i]),
                    "compute": float(self.breakdown.compute[:, i].sum()),
                    "comm_in": float(self.breakdown.comm_in[:, i].sum()),
                    "comm_out": float(self.breakdown.comm_out[:, i].sum()),
                    "memory_bytes": float(self.memory_bytes[i]),
                    "memory_capacity_bytes": _finite(cap[i]),
                    "contiguous": bool(self.contiguous[i]),
                }
            )
            if self.allreduce is not None and self.allreduce[i] > 0:
                devices[-1]["allreduce"] = float(self.allreduce[i])
        out: dict[str, Any] = {
            "objective": _finite(self.objective),
            "objective_kind": problem.objective.kind,
            "feasible": self.feasible,
            "violations": list(self.violations),
            "devices": devices,
        }
        if self.latency is not None:
            out["latency"] = _finite(self.latency.latency)
        if self.simulation is not None:
            out["simulation"] = self.simulation
        return out


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def evaluate(problem: Problem, plan: Plan) -> Evaluation:
    """Score a plan: objective, per-device loads and memory, feasibility, contiguity.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> from dnnpart.devices import reference_cluster
    >>> g = chain_graph(4, acc_time=1.0, cost=0.5)
    >>> p = Problem(graph=g, cluster=reference_cluster(n_accelerators=2, n_cpus=0,
    ...                                                memory_bytes=1e9))
    >>> ev = evaluate(p, Plan(assignment=[0, 0, 1, 1]))
    >>> ev.objective, ev.load.tolist()   # 2 compute + 0.5 out / 0.5 in
    (2.5, [2.5, 2.5])
    """
    graph, cluster, objective = problem.graph, problem.cluster, problem.objective
    a = _checked_assignment(problem, plan)
    replica_of = checked_replication(problem, plan)
    parts = load_breakdown(graph, cluster, a, replica_of)
    by_part = combine(parts.compute, parts.comm_in, parts.comm_out, objective.overlap)
    total = combine(
        parts.compute.sum(axis=0), parts.comm_in.sum(axis=0), parts.comm_out.sum(axis=0),
        objective.overlap,
    )
    memory: FloatArray = np.bincount(
        a, weights=graph.memory_bytes, minlength=cluster.n_devices
    ).astype(np.float64)
    allreduce = None
    if replica_of is not None:
        memory = memory[replica_of]
        counts = np.bincount(replica_of, minlength=cluster.n_devices)[replica_of].astype(np.float64)
        allreduce = allreduce_time(problem, replica_of, memory)
        zero = np.zeros_like(allreduce)
        by_part = np.stack((combine_replicated(by_part[0], counts, zero, objective.overlap),
                            combine_replicated(by_part[1], counts, allreduce, objective.overlap)))
        total = combine_replicated(total, counts, allreduce, objective.overlap)
    scored = EVALUATORS[objective.kind](_Placed(problem=problem, plan=plan, assignment=a, load=total,
                                                by_part=by_part, memory=memory))
    memory = memory if scored.memory is None else scored.memory
    violations = _violations(problem, a, memory)
    if scored.problem:
        violations.append(scored.problem)
    return Evaluation(
        objective=scored.value,
        feasible=not violations,
        violations=tuple(violations),
        load=total,
        forward_load=by_part[0],
        backward_load=by_part[1],
        breakdown=parts,
        memory_bytes=memory,
        contiguous=_contiguity(graph, a, cluster.n_devices),
        latency=scored.latency,
        allreduce=allreduce,
        simulation=scored.simulation,
    )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Placed:
    """What every evaluator reads: the plan, its assignment, paper 1's loads and static memory."""

    problem: Problem
    plan: Plan
    assignment: IntArray
    load: FloatArray
    by_part: FloatArray
    memory: FloatArray


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Scored:
    """An evaluator's answer: the objective, and where it has them, peak memory per device
    (replacing the static memory), the simulator's figures, latency details and one more
    violation."""

    value: float
    memory: FloatArray | None = None
    simulation: dict[str, Any] | None = None
    latency: LatencyResult | None = None
    problem: str = ""


def _throughput(p: _Placed) -> _Scored:
    """Paper 1: the most loaded device (PipeDream form), or max FW + max BW (GPipe form)."""
    if p.problem.objective.training == "gpipe":
        return _Scored(value=float(p.by_part[0].max() + p.by_part[1].max()))
    return _Scored(value=float(p.load.max()))


def _latency(p: _Placed) -> _Scored:
    """Paper 1, section 4: single-sample latency of the plan's subgraph order."""
    subgraph = None if p.plan.subgraph is None else p.plan.subgraph.astype(np.int64)
    latency = single_sample_latency(p.problem.graph, p.problem.cluster, p.assignment, subgraph)
    return _Scored(value=latency.latency, latency=latency, problem=latency.problem or "")


def _iteration(p: _Placed) -> _Scored:
    """Paper 3: Eq. 1's t_O of the plan's layer configurations."""
    from dnnpart.evaluate.iteration import iteration_value

    value, figures = iteration_value(p.problem, p.plan)
    return _Scored(value=value, simulation=figures)


def _simulated(p: _Placed) -> _Scored:
    """Papers 2 and 4: the op-level emulation's makespan, or a pipeline step per sample."""
    value, memory, figures = _simulate(p.problem, p.plan, p.assignment)
    return _Scored(value=value, memory=memory, simulation=figures)


def _stages(p: _Placed) -> _Scored:
    """A trainer's linear pipeline: the largest stage time, memory under the schedule."""
    from dnnpart.evaluate.chain import score_chain

    s = score_chain(p.problem, p.plan, p.assignment)
    return _Scored(value=s.value, memory=s.memory, simulation=s.figures, problem=s.problem)


#: Objective kind -> its evaluator: the one place that says how each objective is scored.
EVALUATORS: dict[str, Callable[[_Placed], _Scored]] = {
    THROUGHPUT: _throughput,
    LATENCY: _latency,
    MAKESPAN: _simulated,
    PIPELINE: _simulated,
    ITERATION: _iteration,
    STAGES: _stages,
}


def _simulate(problem: Problem, plan: Plan, a: IntArray) -> tuple[float, FloatArray, dict[str, Any]]:
    """Objective value, per-device peak memory and figures from the simulators."""
    from dnnpart import simulate

    cluster, objective = problem.cluster, problem.objective
    if not np.all(np.isfinite(node_times(problem.graph, cluster, a))):
        # unsupported placements: reported as a violation (as for every objective), not run
        static: FloatArray = np.bincount(a, weights=problem.graph.memory_bytes,
                                         minlength=cluster.n_devices).astype(np.float64)
        return float("inf"), static, {"error": "a node is placed on a device kind without its time"}
    if objective.kind == MAKESPAN:
        if plan.is_replicated:
            raise UsageError("the makespan objective emulates one execution; it has no replicas")
        s = simulate.emulate_ops(problem.graph, cluster, a, curves=False)
        return s.makespan, s.peak_memory, {"makespan": s.makespan,
                                           "peak_memory_bytes": s.peak_memory.tolist()}
    stages, edges = simulate.stages_from_plan(problem, plan)
    r = simulate.simulate_pipeline(
        stages, cluster, edges=edges, microbatches=objective.microbatches,
        schedule=objective.schedule, recompute=objective.recompute,
        training=problem.graph.is_training,
    )
    memory = np.zeros(cluster.n_devices)
    for d, parts in r.memory.items():
        memory[d] = parts["total"]
    return r.time_per_sample, memory, r.to_dict(cluster)


def _checked_assignment(problem: Problem, plan: Plan) -> IntArray:
    n, d = problem.graph.n_nodes, problem.cluster.n_devices
    a: IntArray = plan.assignment.astype(np.int64)
    if a.shape != (n,):
        raise UsageError(f"plan assigns {a.shape[0]} nodes, the graph has {n}")
    if a.size and a.max() >= d:
        v = int(np.argmax(a >= d))
        raise UsageError(
            f"plan puts node {problem.graph.label(v)} on device {a[v]}, "
            f"the cluster has {d} devices"
        )
    return a


def _violations(problem: Problem, a: IntArray, memory: FloatArray) -> list[str]:
    graph, cluster = problem.graph, problem.cluster
    out: list[str] = []
    cap = cluster.memory_capacity()
    for i in np.flatnonzero(memory > cap * (1 + 1e-12)):
        out.append(
            f"{cluster.devices[i].name}: memory {memory[i]:.6g} B exceeds capacity {cap[i]:.6g} B"
        )
    times = node_times(graph, cluster, a)
    bad = np.flatnonzero(~np.isfinite(times))
    if bad.size:
        v = int(bad[0])
        out.append(
            f"{bad.size} node(s) placed on a device kind that does not support them, e.g. "
            f"{graph.label(v)} on {cluster.devices[a[v]].name}"
        )
    cls = graph.color_class
    has = cls != NO_CLASS
    if np.any(has):
        c, dev = cls[has], a[has]
        order = np.lexsort((dev, c))
        c, dev = c[order], dev[order]
        split = np.flatnonzero((c[1:] == c[:-1]) & (dev[1:] != dev[:-1]))
        if split.size:
            bad_class = int(c[split[0]])
            members = np.flatnonzero(cls == bad_class)
            places = sorted({cluster.devices[a[v]].name for v in members})
            out.append(
                f"{len(np.unique(c[split]))} colocation class(es) split across devices, e.g. "
                f"class {bad_class} on {', '.join(places)}"
            )
    return out


def _contiguity(graph: Graph, a: IntArray, n_devices: int) -> BoolArray:
    result = np.ones(n_devices, dtype=np.bool_)
    for dev in unique_ints(a):
        for part in (False, True):
            member = (a == dev) & (graph.is_backward == part)
            if member.any():
                u, _ = contiguity_violation(graph.n_nodes, graph.succ_ptr, graph.succ_idx, member)
                if u >= 0:
                    result[dev] = False
    return result


__all__ = [
    "Evaluation",
    "LatencyResult",
    "LoadBreakdown",
    "derive_subgraphs",
    "evaluate",
    "load_breakdown",
    "single_sample_latency",
]
