"""Score a plan as a trainer's linear pipeline (the ``stages`` objective).

The plan's devices that hold nodes are its stages, in forward data-flow order
(:func:`dnnpart.simulate.stages.chain_order`); each node's position is its stage. Stage times
and memory follow :mod:`dnnpart.pricing.chain`; the objective is the largest stage time.
Beside it, the step is simulated (:func:`dnnpart.simulate.simulate_pipeline`) with the same
stages, the same per-micro-batch messages as stage edges, the plan's schedule and
micro-batches: its
step time, time per micro-batch and bubble go into the evaluation's figures, with each
stage's time, memory by part and the bottleneck stage.

A plan whose stages feed each other in a cycle (a device running two separate pieces) or
with replicas is not a linear pipeline: its objective is infinite and the reason is a
violation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.plan import Plan
from dnnpart.pricing.chain import (
    MESSAGE_KINDS,
    UP,
    F,
    boundary_bytes,
    chain_compute,
    message_time,
    node_activation_bytes,
    optimizer_factor,
    per_microbatch,
    positions_sum,
    recomputed_forward,
    stage_memory,
    stage_weights,
)
from dnnpart.pricing.liveness import piece_working
from dnnpart.pricing.loads import node_times
from dnnpart.pricing.pairs import Topology
from dnnpart.problem import Problem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ChainScore:
    """The objective, peak memory per device, the figures, and a violation (``""``: none)."""

    value: float
    memory: FloatArray
    figures: dict[str, Any]
    problem: str = ""


def score_chain(problem: Problem, plan: Plan, assignment: IntArray) -> ChainScore:
    """Score ``plan`` under the ``stages`` objective (see the module docstring).

    Examples
    --------
    >>> from dnnpart.problem import Objective
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0, 3.0], n_accelerators=2).with_objective(Objective(kind="stages"))
    >>> s = score_chain(p, Plan(assignment=[0, 0, 1]), np.array([0, 0, 1]))
    >>> s.value, s.figures["bottleneck"]
    (3.0, 1)
    """
    g, cluster, objective = problem.graph, problem.cluster, problem.objective
    static = np.bincount(assignment, weights=g.memory_bytes, minlength=cluster.n_devices)
    c = _chain(problem, plan)
    if isinstance(c, str):
        return ChainScore(float("inf"), static.astype(np.float64), {}, c)
    order, pos, times, crossing = c.order, c.pos, c.times, c.crossing
    n_stages = len(order)
    compute = chain_compute(times, g, pos, n_stages, objective.recompute)
    crossing = boundary_bytes(g, pos, n_stages)
    topo = Topology.from_matrices(cluster.bandwidth, cluster.latency)
    stage_time = compute.copy()
    for j in range(n_stages - 1):
        x = message_time(topo, crossing[j], order[j], order[j + 1], cluster.time_unit_s)
        stage_time[j] += x
        stage_time[j + 1] += x
    k = c.k
    parts = [stage_memory(weights=float(c.weights[i]), activations=float(c.acts[i]),
                          inputs=float(c.inputs[i]), stage=i, n_stages=n_stages,
                          schedule=objective.schedule, microbatches=objective.microbatches,
                          recompute=objective.recompute, training=g.is_training, k=k,
                          working=float(c.working[i]))
             for i in range(n_stages)]
    memory = np.zeros(cluster.n_devices)
    for i, d in enumerate(order):
        memory[d] = parts[i].total
    bottleneck = int(np.argmax(stage_time))
    figures: dict[str, Any] = {
        "stages": [cluster.devices[d].name for d in order],
        "stage_times": stage_time.tolist(),
        "compute": compute.tolist(),
        "bottleneck": bottleneck,
        "memory": [p.to_dict() for p in parts],
        "capacity": [float(cluster.memory_capacity()[d]) for d in order],
        "optimizer_factor": k,
        "schedule": objective.schedule,
        "microbatches": objective.microbatches,
        "recompute": objective.recompute,
    }
    figures.update(_simulated(problem, c))
    return ChainScore(float(stage_time.max()), memory, figures)


def received_inputs(crossing: FloatArray, n_stages: int) -> FloatArray:
    """Bytes each stage receives from below per micro-batch (forward values carried up)."""
    cols = [i for i, (d, pu, _) in enumerate(MESSAGE_KINDS) if d == UP and pu == F]
    out = np.zeros(n_stages)
    if n_stages > 1:
        out[1:] = crossing[:, cols].sum(axis=1)
    return out


@dataclass(frozen=True, slots=True, eq=False)
class _Chain:
    """A plan as a linear pipeline: its stage devices in order, each node's stage, node times,
    the bytes crossing each boundary, and per stage weights, stashed and received bytes."""

    order: list[int]
    pos: IntArray
    times: FloatArray
    crossing: FloatArray
    weights: FloatArray
    acts: FloatArray
    inputs: FloatArray
    working: FloatArray
    k: float


def _chain(problem: Problem, plan: Plan) -> _Chain | str:
    """The plan's :class:`_Chain`, or why it is not a linear pipeline."""
    from dnnpart.simulate.stages import chain_order

    g, cluster = problem.graph, problem.cluster
    if plan.is_replicated:
        return "the stages objective scores one copy of each stage: no replicas"
    order, why = chain_order(problem, plan)
    if why:
        return f"not a linear pipeline: {why}"
    n_stages = len(order)
    assignment = plan.assignment.astype(np.int64)
    index = np.full(cluster.n_devices, -1, np.int64)
    index[np.asarray(order, np.int64)] = np.arange(n_stages)
    pos = index[assignment]
    crossing = boundary_bytes(g, pos, n_stages)
    return _Chain(order=order, pos=pos, times=node_times(g, cluster, assignment), crossing=crossing,
                  weights=stage_weights(g, pos, n_stages),
                  acts=positions_sum(node_activation_bytes(g), pos, n_stages),
                  inputs=received_inputs(crossing, n_stages), working=stage_working(g, pos, n_stages),
                  k=optimizer_factor(g))


def stage_working(g: Any, pos: IntArray, n_stages: int) -> FloatArray:
    """Per stage, the largest working set of its pieces of block units
    (:func:`~dnnpart.pricing.liveness.piece_working`; a block-aligned plan's pieces are its
    units, as the block DP counts them)."""
    from dnnpart.graph.blocks import node_units

    units = node_units(g)
    piece = pos * units.n_units + units.unit
    working = piece_working(g, piece, n_stages * units.n_units)
    out: FloatArray = working.reshape(n_stages, units.n_units).max(axis=1) if n_stages else np.zeros(0)
    return out


def _simulated(problem: Problem, c: _Chain) -> dict[str, Any]:
    """The simulator's step for the same stages and messages."""
    from dnnpart.simulate import simulate_pipeline

    g, objective = problem.graph, problem.objective
    stages, edges = _stage_list(problem, c)
    r = simulate_pipeline(stages, problem.cluster, edges=edges, microbatches=objective.microbatches,
                          schedule=objective.schedule, recompute=objective.recompute,
                          training=g.is_training, optimizer_factor=c.k)
    return {"simulated_step_time": r.step_time, "simulated_time_per_microbatch": r.time_per_sample,
            "bubble_fraction": r.bubble_fraction}


def _stage_list(problem: Problem, c: _Chain) -> tuple[list[Any], list[Any]]:
    """The simulator's stages and stage edges of a linear pipeline (see the module docstring)."""
    from dnnpart.stages import Stage, StageEdge

    g = problem.graph
    n_stages = len(c.order)
    fw = positions_sum(np.where(g.is_backward, 0.0, c.times), c.pos, n_stages)
    bw = positions_sum(np.where(g.is_backward, c.times, 0.0), c.pos, n_stages)
    redo = recomputed_forward(c.times, g, c.pos, n_stages)
    stages = [Stage(devices=(d,), forward=float(fw[i]), backward=float(bw[i]),
                    weight_bytes=float(c.weights[i]), activation_bytes=float(c.acts[i]),
                    input_bytes=float(c.inputs[i]), name=problem.cluster.devices[d].name,
                    recomputed=float(redo[i]))
              for i, d in enumerate(c.order)]
    edges = []
    for j in range(n_stages - 1):
        for (direction, pu, pv), nbytes in zip(MESSAGE_KINDS, c.crossing[j].tolist(), strict=True):
            if nbytes <= 0 or not per_microbatch((direction, pu, pv)):
                continue  # once per step (a tied weight's gradient): not a stage edge
            src, dst = (j, j + 1) if direction == UP else (j + 1, j)
            edges.append(StageEdge(src=src, dst=dst, bytes=nbytes, src_phase=pu, dst_phase=pv))
    return stages, edges


def chain_stages(problem: Problem, plan: Plan) -> tuple[list[Any], list[Any], float] | None:
    """The simulator's ``(stages, edges, optimizer factor)`` of a plan scored as a linear
    pipeline (what the ``stages`` objective simulates beside its value), or ``None`` when the
    plan is not one (replicas, devices feeding each other in a cycle)."""
    c = _chain(problem, plan)
    if isinstance(c, str):
        return None
    stages, edges = _stage_list(problem, c)
    return stages, edges, c.k


def stage_rows(problem: Problem, plan: Plan, figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per stage for tables and reports: device, blocks held, time and its parts,
    memory by part against capacity, and whether it is the bottleneck.

    Examples
    --------
    >>> from dnnpart.problem import Objective
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.evaluate import evaluate
    >>> p = chain_problem([1.0, 1.0, 3.0], n_accelerators=2).with_objective(Objective(kind="stages"))
    >>> plan = Plan(assignment=[0, 0, 1])
    >>> [(r["device"], r["blocks"], r["time"]) for r in stage_rows(p, plan, evaluate(p, plan).simulation)]
    [('acc0', 2, 2.0), ('acc1', 1, 3.0)]
    """
    from dnnpart.graph.blocks import node_units

    units = node_units(problem.graph)
    names = [d.name for d in problem.cluster.devices]
    rows = []
    for i, dev in enumerate(figures["stages"]):
        d = names.index(dev)
        held = np.unique(units.unit[(assignment_of(plan) == d) & ~problem.graph.is_backward])
        mem = figures["memory"][i]
        rows.append({
            "stage": i, "device": dev, "blocks": int(held.size),
            "first_block": units.names[int(held[0])] if held.size else "",
            "last_block": units.names[int(held[-1])] if held.size else "",
            "time": figures["stage_times"][i], "compute": figures["compute"][i],
            "transfers": figures["stage_times"][i] - figures["compute"][i],
            "static_bytes": mem["weights"] + mem["gradients"] + mem["optimizer_state"],
            "activation_bytes": mem["activations"] + mem.get("working", 0.0),
            "in_flight": int(mem["in_flight"]),
            "memory_bytes": mem["total"], "capacity_bytes": figures["capacity"][i],
            "bottleneck": i == figures["bottleneck"],
        })
    return rows


def assignment_of(plan: Plan) -> IntArray:
    """The plan's device per node as int64."""
    out: IntArray = plan.assignment.astype(np.int64)
    return out
