"""The candidate plans of one ``(S, R)`` pair: partitions, mappings, and their names.

Per pair the Parmesan methods build one or more phase-1 partitions (the op-level one; with the
layer seed also PipeDream's layer-path partition, refined at op level and as it is), map each
(the exact mapper under the Sec. 5.2 rule's instantiation, under the other one, CS and
p2p-first), simulate every plan and keep the fastest (:mod:`.solver`). This module builds the
candidates and names them for ``SolveResult.provenance``; ``paper_only`` leaves one: the
op-level partition under the mapper's optimum.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dnnpart.graph.branching import contract_branches
from dnnpart.plan import Plan, Status
from dnnpart.pricing.pairs import Topology
from dnnpart.pricing.stages import max_stage_time
from dnnpart.problem import Problem
from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
from dnnpart.solvers.parmesan.cost import choose_instantiation
from dnnpart.solvers.parmesan.opdag import IntArray, MemoryModel
from dnnpart.solvers.parmesan.partition_dp import stage_times
from dnnpart.solvers.parmesan.phase1 import Phase1Result, partition_ops
from dnnpart.solvers.parmesan.refinement import refine
from dnnpart.solvers.parmesan.search import DEFAULT_EPS, map_stages
from dnnpart.stages import PipelineStages

#: Partition sources of a pair's candidates (``stats["partition_from"]``).
OP_LEVEL, SEED_REFINED, SEED = "op level", "layer path refined", "layer path"


def map_with(stages: PipelineStages, topo: Topology, mapping: str, *,
             instantiation: str = "auto", eps: float = DEFAULT_EPS,
             time_limit: float | None = None, threads: int = 1, deterministic: bool = False,
             seed: int | None = 0, paper_only: bool = False,
             ) -> list[tuple[str, IntArray, dict[str, Any]]]:
    """Candidate ``(R, S)`` mappings by the named mapping, each with its Eq. 5 figures.

    ``mapping="parmesan"`` gives the exact mapper's optimum under the chosen instantiation
    (Sec. 5.2 rule for ``"auto"``) first, then -- unless ``paper_only`` -- its optimum under
    the other instantiation too when ``auto`` and ``R > 1`` (each with half the time), and the
    CS and p2p-first mappings; the caller keeps the one the simulator scores best. The
    baselines give one candidate each.

    Examples
    --------
    >>> st = PipelineStages(compute=[1.0, 1.0], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]])
    >>> [(name, m.tolist(), info["eq5_max_stage_time"])
    ...  for name, m, info in map_with(st, Topology.from_matrices([[0, 10], [10, 0]]), "cs")]
    [('cs', [[0, 1]], 1.1)]
    """
    auto = choose_instantiation(stages)
    kind = auto if instantiation == "auto" else instantiation
    if mapping != "parmesan":
        m = {"cs": cs_mapping, "p2p-first": p2p_first_mapping}.get(mapping)
        device_of = m(stages) if m is not None else random_mapping(stages, seed)
        value = max_stage_time(stages, topo, device_of, kind)  # type: ignore[arg-type]
        return [(mapping, device_of, {"eq5_max_stage_time": value, "instantiation": kind,
                                      "mapping_status": "heuristic"})]
    kinds = [kind]
    if instantiation == "auto" and stages.replicas > 1 and not paper_only:
        kinds.append("allreduce" if kind == "p2p" else "p2p")
    out: list[tuple[str, IntArray, dict[str, Any]]] = []
    for i, kd in enumerate(kinds):
        share = None if time_limit is None else time_limit / (len(kinds) - i)
        res = map_stages(stages, topo, instantiation=kd,  # type: ignore[arg-type]
                         eps=eps, time_limit=share, threads=threads,
                         deterministic=deterministic, seed=seed)
        if res.device_of is None:
            if res.status is Status.INFEASIBLE:
                return []
            continue
        out.append((f"parmesan-{kd}", res.device_of, {
            "eq5_max_stage_time": res.objective, "eq5_bound": res.bound,
            "mapping_status": res.status.value, "mapping_gap": res.gap, "instantiation": kd,
            "rule_instantiation": auto,
            "eq5_cs": res.baselines.get("cs", math.inf), "mapping_nodes": res.n_nodes,
        }))
    if paper_only:
        return out
    for name, func in (("cs", cs_mapping), ("p2p-first", p2p_first_mapping)):
        base = func(stages)
        value = max_stage_time(stages, topo, base, kind)  # type: ignore[arg-type]
        out.append((name, base, {"eq5_max_stage_time": value, "instantiation": kind,
                                 "mapping_status": "heuristic"}))
    return out


def stages_in_seconds(stages: PipelineStages, time_unit_s: float) -> PipelineStages:
    """``stages`` with compute converted from graph time units to seconds.

    Phase 1 works in the graph's units (the zoo's and paper 1's graphs are in ms); phase 2
    adds ``M / B`` transfer times in seconds (SI bandwidths), so compute must be converted
    first or communication would weigh ``1 / time_unit_s`` times too little.

    Examples
    --------
    >>> st = PipelineStages(compute=[2.0, 4.0], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]])
    >>> stages_in_seconds(st, 1e-3).compute.tolist()
    [0.002, 0.004]
    """
    return dataclasses.replace(stages, compute=stages.compute * float(time_unit_s))


def plan_from_mapping(problem: Problem, stage_of: IntArray, device_of: IntArray) -> Plan:
    """Nodes on copy 0's device of their stage; copies ``r > 0`` as replicas; pipeline copies.

    ``device_of`` is ``(R, S)`` in topology numbering (the ``i``-th accelerator); accelerators
    it does not name stay idle.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0], n_accelerators=4)
    >>> plan = plan_from_mapping(p, np.array([0, 1]), np.array([[0, 1], [3, 2]]))
    >>> plan.assignment.tolist(), plan.replica_of.tolist(), plan.pipeline_copy.tolist()
    ([0, 1], [0, 1, 1, 0], [0, 0, 1, 1])
    """
    cluster = problem.cluster
    acc = np.asarray(cluster.accelerators, dtype=np.int64)
    dev = acc[np.asarray(device_of, dtype=np.int64)]  # (R, S) cluster device indices
    replica_of = np.arange(cluster.n_devices, dtype=np.int64)
    copy = np.zeros(cluster.n_devices, dtype=np.int64)
    r_n, s_n = dev.shape
    for s in range(s_n):
        for r in range(r_n):
            replica_of[dev[r, s]] = dev[0, s]
            copy[dev[r, s]] = r
    assignment = dev[0][np.asarray(stage_of, dtype=np.int64)]
    if r_n == 1:
        return Plan(assignment=assignment.astype(np.int32))
    return Plan(assignment=assignment.astype(np.int32), replica_of=replica_of.astype(np.int32),
                pipeline_copy=copy.astype(np.int32))


def memory_model(problem: Problem, optimizer_states: float, *, replicas: int = 1,
                 n_devices: int | None = None) -> MemoryModel:
    """Phase 1's memory model for ``problem`` on its first ``n_devices`` accelerators (all by
    default): the smallest of their memories, the objective's schedule, and training memory
    only for a training graph (:mod:`.opdag`)."""
    acc = list(problem.cluster.accelerators)[:n_devices]
    cap = problem.cluster.memory_capacity()[acc]
    obj = problem.objective
    return MemoryModel(device_memory=float(np.min(cap)) if len(cap) else math.inf,
                       optimizer_states=float(optimizer_states),
                       micro_batches=int(obj.microbatches),
                       schedule="gpipe" if obj.schedule == "gpipe" else "1f1b",
                       recompute=bool(obj.recompute), training=problem.graph.is_training,
                       replicas=int(replicas))


def layer_partition(problem: Problem, s_n: int, n_dev: int, r_n: int, mem: MemoryModel,
                    max_ideals: int) -> Phase1Result | None:
    """PipeDream's layer-path partition (the ``pipedream`` method's, with its path fallback)
    on ``n_dev = s_n * r_n`` devices, or ``None`` when it has none."""
    limit = float(problem.cluster.memory_capacity().min())
    contracted, _ = contract_branches(problem.graph, memory_limit=limit)
    layer = partition_ops(contracted, s_n, n_dev, replicas=r_n, k=None, memory=mem,
                          refine_steps=0, max_ideals=max_ideals, too_large="chain")
    return None if layer.stage_of is None or layer.replicas is None else layer


def layer_seed_candidates(part: Phase1Result, layer: Phase1Result, mem: MemoryModel,
                          refine_steps: int) -> list[tuple[str, Phase1Result]]:
    """The layer-path partition as phase-1 results on ``part``'s op DAG: refined, and as it is
    when refinement moved something (or refinement is off)."""
    assert layer.stage_of is not None and layer.replicas is not None
    start = np.empty(part.dag.n, dtype=np.int64)
    start[part.atom] = layer.stage_of
    reps = layer.replicas

    def as_result(atom_stage: IntArray, moves: int) -> Phase1Result:
        value = float(stage_times(part.dag, atom_stage, reps).max())
        return dataclasses.replace(part, stage_of=atom_stage[part.atom], atom_stage=atom_stage,
                                   replicas=reps, objective=value,
                                   dp_objective=layer.objective, n_moves=moves,
                                   lattice=layer.lattice)

    if refine_steps == 0:
        return [(SEED, as_result(start, 0))]
    refined, moves = refine(part.dag, start.copy(), reps, memory=mem, max_steps=refine_steps)
    out = [(SEED_REFINED, as_result(refined, moves))]
    if moves:
        out.append((SEED, as_result(start, 0)))
    return out


def partition_text(source: str, part: Phase1Result, *, op_level: str, clustered: bool,
                   refined: bool, seeded: bool) -> str:
    """What produced a candidate's partition, in words (``op_level``: the method's own
    partition's name, e.g. ``"op-level partition"``).

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> partition_text(OP_LEVEL, NS(n_moves=3), op_level="op-level partition", clustered=True,
    ...                refined=True, seeded=False)
    'op-level partition (clustering, DP, refinement: 3 moves)'
    >>> partition_text(SEED_REFINED, NS(n_moves=2), op_level="", clustered=True,
    ...                refined=True, seeded=True)
    "layer-level seed (PipeDream's partition), refined at op level: 2 moves"
    """
    if source == SEED:
        return "layer-level seed (PipeDream's partition) as it is"
    if source == SEED_REFINED:
        if not part.n_moves:
            return "layer-level seed (PipeDream's partition); op-level refinement moved nothing"
        return f"layer-level seed (PipeDream's partition), refined at op level: {part.n_moves} moves"
    steps = []
    if clustered:
        steps.append("clustering within the seed's stages" if seeded else "clustering")
    steps.append("DP")
    if refined:
        steps.append(f"refinement: {part.n_moves} moves")
    return f"{op_level} ({', '.join(steps)})"


def mapping_text(name: str, info: dict[str, Any]) -> str:
    """What produced a candidate's mapping, in words.

    Examples
    --------
    >>> mapping_text("parmesan-p2p", {"rule_instantiation": "p2p"})
    "Parmesan's mapping under Eq. 6 (the Sec. 5.2 rule's choice)"
    >>> mapping_text("cs", {})
    'consecutive (CS) mapping'
    """
    if name.startswith("parmesan-"):
        kind = name.removeprefix("parmesan-")
        eq = "Eq. 6" if kind == "p2p" else "Eq. 7"
        why = ("the Sec. 5.2 rule's choice" if info.get("rule_instantiation") == kind
               else "not the Sec. 5.2 rule's choice")
        return f"Parmesan's mapping under {eq} ({why})"
    if name == "sim-swaps":
        return (f"device swaps scored by the simulator, from the {info.get('sim_search_from')} "
                "mapping")
    return {"cs": "consecutive (CS) mapping", "p2p-first": "p2p-first mapping"}.get(
        name, f"{name} mapping")
