"""Parmesan as a registered method for the ``pipeline`` objective (both phases, one plan).

``parmesan`` runs phase 1 (clustering, DP over fronted subgraphs, refinement) and phase 2
(mapping of the ``R`` pipeline copies onto the accelerators) and turns the result into a
:class:`~dnnpart.plan.Plan`: every node on the device of copy 0 of its stage, the other copies
as replicas (``replica_of``) and every device's pipeline copy (``pipeline_copy``, which is also
its stage's ring order). The reported objective is ``evaluate(problem, plan)``: the simulated
time per sample of :func:`dnnpart.simulate.simulate_pipeline`. Eq. 5's max stage time of the
mapping, its proven bound and gap are reported in ``stats`` (``eq5_*``): they bound Eq. 5, not
the simulated time, so the result carries no ``bound``.

Choices (see ``docs/methods/parmesan.md``):

* **Devices**: the pipeline runs on the cluster's accelerators (topology device ``i`` = the
  ``i``-th accelerator); other devices (host CPUs) stay idle. ``D`` = number of accelerators.
* **(S, R) search**: without ``stages`` and ``replicas`` every divisor pair of ``D`` with
  ``S <= `` number of atomic ops is tried and the plan with the smallest *simulated* time kept.
  Eq. 3 alone would always prefer ``S = 1`` (it divides compute by ``R`` and ignores the
  all-reduce), so the choice has to be scored by the simulator. The time limit is split evenly
  over the pairs.
* **Units**: phase 1 works in the graph's time unit; the stage graph handed to phase 2 is in
  seconds (:func:`stages_in_seconds`), as the topology's ``M / B`` times are; the ``eq5_*``
  figures are therefore in seconds.
* **Memory model** of phase 1: the cluster's smallest accelerator memory, the objective's
  micro-batches, schedule and recomputation, ``optimizer_states`` (default 2, Adam).
* **Layer-level seed** (``layer_seed``, default on for ``parmesan``): phase 1 first takes the
  partition of the branch-contracted layer path (PipeDream's, a chain of fronted subgraphs of
  the op DAG too); clustering respects it (never fuses ops it puts in different stages), so
  the op-level partition's max stage time is never above it (:mod:`.phase1`). That
  partition, refined at op level and as it is, is also mapped; the simulator keeps the best
  plan, so ``parmesan`` never simulates slower than ``pipedream`` with the same ``(S, R)``
  (whose partition and CS mapping are among its candidates). Eq. 3 ignores the all-reduce
  and bubbles that the simulator charges, so a partition better on Eq. 3 can simulate
  slower (measured: ResNet-50 (8, 2) on two-level 4x4, 0.94x). ``layer_seed=false`` is the
  paper's flow. When the op-level lattice cannot be made to fit, the layer candidates are
  still mapped.
* **Time split**: each ``(S, R)`` pair gets an even share of what is left; its mapping
  searches get :data:`MAP_SHARE` of it and the rest pays for simulating the candidates.
* Registered ablations: ``parmesan-noclust`` (``k=None``: the exact DP over the atomic ops,
  small graphs only) and ``parmesan-norefine`` (``refine_steps=0``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dnnpart.errors import ProblemTooLargeError
from dnnpart.evaluate import evaluate
from dnnpart.graph.branching import contract_branches
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.pricing.pairs import Topology
from dnnpart.pricing.stages import max_stage_time
from dnnpart.problem import PIPELINE, Problem
from dnnpart.solvers.dp.ideals import DEFAULT_MAX_IDEALS
from dnnpart.solvers.method import CONTIGUOUS, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
from dnnpart.solvers.parmesan.opdag import IntArray, MemoryModel, atomic_dag
from dnnpart.solvers.parmesan.partition_dp import stage_times
from dnnpart.solvers.parmesan.phase1 import Phase1Result, partition_ops, pipeline_stages
from dnnpart.solvers.parmesan.refinement import refine
from dnnpart.solvers.parmesan.search import DEFAULT_EPS, map_stages
from dnnpart.solvers.result import result_from_plan
from dnnpart.stages import PipelineStages

MAPPINGS = ("parmesan", "cs", "p2p-first", "random")
#: Fraction of a pair's remaining time given to the mapping searches (the rest: simulation).
MAP_SHARE = 0.7
INSTANTIATIONS = ("auto", "p2p", "allreduce")


def divisor_pairs(n_devices: int, max_stages: int | None = None) -> list[tuple[int, int]]:
    """``(S, R)`` with ``S * R = D``, fewest stages first.

    Examples
    --------
    >>> divisor_pairs(8), divisor_pairs(8, max_stages=2)
    ([(1, 8), (2, 4), (4, 2), (8, 1)], [(1, 8), (2, 4)])
    """
    return [(s, n_devices // s) for s in range(1, n_devices + 1)
            if n_devices % s == 0 and (max_stages is None or s <= max_stages)]


def map_with(stages: PipelineStages, topo: Topology, mapping: str, *,
             instantiation: str = "auto", eps: float = DEFAULT_EPS,
             time_limit: float | None = None, threads: int = 1, deterministic: bool = False,
             seed: int | None = 0) -> list[tuple[str, IntArray, dict[str, Any]]]:
    """Candidate ``(R, S)`` mappings by the named mapping, each with its Eq. 5 figures.

    ``mapping="parmesan"`` gives the exact mapper's optimum under the chosen instantiation
    (Sec. 5.2 rule for ``"auto"``), under the other instantiation too when ``auto`` and
    ``R > 1`` (each with half the time), and the CS and p2p-first mappings; the caller keeps
    the one the simulator scores best. The baselines give one candidate each.

    Examples
    --------
    >>> st = PipelineStages(compute=[1.0, 1.0], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]])
    >>> [(name, m.tolist(), info["eq5_max_stage_time"])
    ...  for name, m, info in map_with(st, Topology.from_matrices([[0, 10], [10, 0]]), "cs")]
    [('cs', [[0, 1]], 1.1)]
    """
    from dnnpart.solvers.parmesan.cost import choose_instantiation

    auto = choose_instantiation(stages)
    kind = auto if instantiation == "auto" else instantiation
    if mapping != "parmesan":
        m = {"cs": cs_mapping, "p2p-first": p2p_first_mapping}.get(mapping)
        device_of = m(stages) if m is not None else random_mapping(stages, seed)
        value = max_stage_time(stages, topo, device_of, kind)  # type: ignore[arg-type]
        return [(mapping, device_of, {"eq5_max_stage_time": value, "instantiation": kind,
                                      "mapping_status": "heuristic"})]
    kinds = [kind]
    if instantiation == "auto" and stages.replicas > 1:
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
            "eq5_cs": res.baselines.get("cs", math.inf), "mapping_nodes": res.n_nodes,
        }))
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

    ``device_of`` is ``(R, S)`` in topology numbering (the ``i``-th accelerator).

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


def memory_model(problem: Problem, optimizer_states: float) -> MemoryModel:
    cap = problem.cluster.memory_capacity()[list(problem.cluster.accelerators)]
    obj = problem.objective
    return MemoryModel(device_memory=float(np.min(cap)) if len(cap) else math.inf,
                       optimizer_states=float(optimizer_states),
                       micro_batches=int(obj.microbatches),
                       schedule="gpipe" if obj.schedule == "gpipe" else "1f1b",
                       recompute=bool(obj.recompute))


def _int_option(name: str, value: Any, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"option {name}: expected an integer >= {low}, got {value!r}")
    return int(value)


def _pairs(n_dev: int, stages: Any, replicas: Any) -> list[tuple[int, int]]:
    if stages is not None:
        stages = _int_option("stages", stages)
    if replicas is not None:
        replicas = _int_option("replicas", replicas)
    if stages is not None and replicas is not None:
        if stages * replicas != n_dev:
            raise ValueError(f"option stages * replicas = {stages * replicas} must equal the "
                             f"number of accelerators, {n_dev}")
        return [(stages, replicas)]
    if stages is not None or replicas is not None:
        given = stages if stages is not None else replicas
        if n_dev % given:
            name = "stages" if stages is not None else "replicas"
            raise ValueError(f"option {name}={given} does not divide the {n_dev} accelerators")
        other = n_dev // given
        return [(given, other)] if stages is not None else [(other, given)]
    return divisor_pairs(n_dev)


def run_parmesan(
    problem: Problem, *, method: str, time_limit: float | None, progress: Progress | None,
    stages: Any = None, replicas: Any = None, k: Any = 128, alpha: float = 0.001,
    refine_steps: Any = 100, mapping: str = "parmesan", instantiation: str = "auto",
    eps: float | None = None, gap: float | None = None, optimizer_states: float = 2.0,
    threads: Any = 1, deterministic: bool = False, seed: Any = 0,
    max_ideals: Any = DEFAULT_MAX_IDEALS, graph: Any = None, search_space: str = "",
    layer_seed: bool = False, path_fallback: bool = False, **options: Any,
) -> SolveResult:
    """Both phases over the requested or searched ``(S, R)``; the best simulated plan."""
    if options:
        raise ValueError(f"{method}: unknown option(s) {sorted(options)}")
    if problem.objective.kind != PIPELINE:
        raise ValueError(f"{method} optimises the pipeline objective, not {problem.objective.kind!r}")
    if mapping not in MAPPINGS:
        raise ValueError(f"option mapping: expected one of {list(MAPPINGS)}, got {mapping!r}")
    if instantiation not in INSTANTIATIONS:
        raise ValueError(f"option instantiation: expected one of {list(INSTANTIATIONS)}, "
                         f"got {instantiation!r}")
    tol = eps if eps is not None else gap
    tol = DEFAULT_EPS if tol is None else tol
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
        raise ValueError(f"option eps/gap: expected a number in (0, 1), got {tol!r}")
    if k is not None:
        k = _int_option("k", k)
    refine_steps = _int_option("refine_steps", refine_steps, low=0)
    threads = _int_option("threads", threads)
    max_ideals = _int_option("max_ideals", max_ideals)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha >= 0:
        raise ValueError(f"option alpha: expected a number >= 0, got {alpha!r}")
    if isinstance(optimizer_states, bool) or not isinstance(optimizer_states, (int, float)) \
            or not optimizer_states >= 0:
        raise ValueError(f"option optimizer_states: expected a number >= 0, got {optimizer_states!r}")
    if not isinstance(layer_seed, bool):
        raise ValueError(f"option layer_seed: expected true or false, got {layer_seed!r}")
    if not isinstance(deterministic, bool):
        raise ValueError(f"option deterministic: expected true or false, got {deterministic!r}")
    if seed is not None:
        seed = _int_option("seed", seed, low=0)
    clock = Stopwatch(time_limit)
    cluster = problem.cluster
    n_dev = len(cluster.accelerators)
    if n_dev == 0:
        raise ValueError(f"{method}: the cluster has no accelerators to pipeline over")
    pairs = _pairs(n_dev, stages, replicas)
    topo = Topology.from_cluster(cluster)
    mem = memory_model(problem, optimizer_states)
    work_graph = problem.graph if graph is None else graph
    best: tuple[tuple[int, float], Plan, dict[str, Any]] | None = None
    tried: list[str] = []
    too_large: ProblemTooLargeError | None = None
    for i, (s_n, r_n) in enumerate(pairs):
        left = None if time_limit is None else max(1e-3, time_limit - clock.elapsed)
        share = None if left is None else left / (len(pairs) - i)
        if progress is not None:
            progress.update(f"{method}: S={s_n}, R={r_n}", i / len(pairs))
        pair_start = clock.elapsed
        layer: Phase1Result | None = None
        if layer_seed:
            try:
                layer = _layer_partition(problem, s_n, n_dev, r_n, mem, max_ideals)
            except (ProblemTooLargeError, MemoryError):
                tried.append(f"S={s_n},R={r_n}: layer-path partition too large, skipped")
        try:
            part = partition_ops(work_graph, s_n, n_dev, replicas=r_n, k=k, alpha=float(alpha),
                                 memory=mem, refine_steps=refine_steps, max_ideals=max_ideals,
                                 respect=None if layer is None else layer.stage_of,
                                 too_large="chain" if path_fallback else "raise")
        except ProblemTooLargeError as exc:
            too_large = exc
            if layer is None:
                tried.append(f"S={s_n},R={r_n}: too large")
                continue
            # the layer partition is still a candidate; it needs the op DAG only
            tried.append(f"S={s_n},R={r_n} (op level): too large")
            dag, atom = atomic_dag(work_graph)
            part = Phase1Result(stage_of=None, atom_stage=None, replicas=None,
                                objective=math.inf, dp_objective=math.inf, n_hyper_ops=0,
                                n_ideals=0, n_moves=0, dag=dag, atom=atom)
        parts: list[tuple[str, Phase1Result]] = [("op level", part)]
        if layer is not None:
            parts += _layer_seed(part, layer, mem, refine_steps)
        parts = [(src, p) for src, p in parts if p.stage_of is not None
                 and p.atom_stage is not None and math.isfinite(p.objective)]
        if not parts:
            tried.append(f"S={s_n},R={r_n}: no partition")
            continue
        for j, (source, pt) in enumerate(parts):
            assert pt.stage_of is not None and pt.atom_stage is not None
            # the searches get MAP_SHARE of what is left for this pair; the rest pays for
            # simulating the candidates (a search cut by its limit would otherwise take all
            # of it and the method would stop before returning a plan: measured on
            # ResNet-152 (16, 1) with three partitions to map)
            sub = None if share is None else max(
                1e-3, MAP_SHARE * (share - (clock.elapsed - pair_start)) / (len(parts) - j))
            st = stages_in_seconds(pipeline_stages(pt.dag, pt.atom_stage, r_n, memory=mem),
                                   cluster.time_unit_s)
            candidates = map_with(st, topo, mapping, instantiation=instantiation,
                                  eps=float(tol), time_limit=sub, threads=threads,
                                  deterministic=deterministic, seed=seed)
            if not candidates:
                tried.append(f"S={s_n},R={r_n} ({source}): no mapping")
                continue
            first_info = candidates[0][2]
            sims: dict[str, float] = {}
            for name, device_of, info in candidates:
                plan = plan_from_mapping(problem, pt.stage_of, device_of)
                ev = evaluate(problem, plan)
                sims[name] = ev.objective
                # infeasible plans (memory) rank after feasible ones, then by simulated time
                key = (0 if ev.feasible else 1, ev.objective)
                if best is None or key < best[0]:
                    best = (key, plan, {
                        "stages": s_n, "replicas": r_n, "eq3_max_stage_time": pt.objective,
                        "eq3_after_dp": pt.dp_objective, "hyper_ops": pt.n_hyper_ops,
                        "ideals": pt.n_ideals, "refinement_moves": pt.n_moves,
                        "eq3_op_level": part.objective, "partition_from": source,
                        "eq3_layer_level": None if layer is None else layer.objective,
                        "coarsenings": pt.n_coarsenings, "lattice": pt.lattice,
                        **first_info, "mapping_pick": name,
                        "picked_eq5_max_stage_time": info["eq5_max_stage_time"],
                        "picked_mapping_status": info["mapping_status"],
                        "picked_instantiation": info["instantiation"]})
            tried.append(f"S={s_n},R={r_n} ({source}): "
                         + ", ".join(f"{n} {v:.6g}" for n, v in sims.items()))
    if best is None:
        if too_large is not None and len(tried) == sum("too large" in t for t in tried):
            raise too_large
        return SolveResult(status=Status.INFEASIBLE, plan=None, objective=math.inf, method=method,
                           wall_time_s=clock.elapsed, search_space=search_space,
                           stats={"tried": "; ".join(tried)})
    _, plan, stats = best
    stats = {k2: v for k2, v in stats.items()
             if isinstance(v, (int, float, str, bool)) or v is None}
    return result_from_plan(problem, plan, method=method, clock=clock, proven=False,
                            search_space=search_space, tried="; ".join(tried), **stats)


def _layer_partition(problem: Problem, s_n: int, n_dev: int, r_n: int, mem: MemoryModel,
                     max_ideals: int) -> Phase1Result | None:
    """PipeDream's layer-path partition (the ``pipedream`` method's, with its path fallback),
    or ``None`` when it has none."""
    limit = float(problem.cluster.memory_capacity().min())
    contracted, _ = contract_branches(problem.graph, memory_limit=limit)
    layer = partition_ops(contracted, s_n, n_dev, replicas=r_n, k=None, memory=mem,
                          refine_steps=0, max_ideals=max_ideals, too_large="chain")
    return None if layer.stage_of is None or layer.replicas is None else layer


def _layer_seed(part: Phase1Result, layer: Phase1Result, mem: MemoryModel, refine_steps: int
                ) -> list[tuple[str, Phase1Result]]:
    """The layer-path partition as phase-1 results on ``part``'s op DAG: refined, and as it is
    when refinement moved something."""
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
        return [("layer path", as_result(start, 0))]
    refined, moves = refine(part.dag, start.copy(), reps, memory=mem, max_steps=refine_steps)
    out = [("layer path refined", as_result(refined, moves))]
    if moves:
        out.append(("layer path", as_result(start, 0)))
    return out


def pipeline_options(*, clustering: bool, refinement: bool, seed_option: bool,
             mapping_default: str = "parmesan") -> tuple[Option, ...]:
    """The typed option schema shared by the Parmesan methods (and pipedream's pipeline mode)."""
    out = [
        Option("stages", int, None, "pipeline stages S (default: search the divisor pairs of D)",
               minimum=1),
        Option("replicas", int, None, "replicas R per stage (S * R = accelerators)", minimum=1),
    ]
    if clustering:
        out += [Option("k", int, 128, "hyper-ops after clustering (parmesan-noclust: none)",
                       minimum=1),
                Option("alpha", float, 0.001, "Eq. 4 weight of communication", minimum=0.0)]
    if refinement:
        out.append(Option("refine_steps", int, 100, "refinement moves at most", minimum=0))
    out += [
        Option("mapping", str, mapping_default, "stage-to-device mapping", choices=MAPPINGS),
        Option("instantiation", str, "auto", "Eq. 6 (p2p), Eq. 7 (allreduce) or the paper's rule",
               choices=INSTANTIATIONS),
        Option("eps", float, None, "relative width of the mapper's final interval (1e-3)",
               minimum=1e-12, maximum=0.999),
        Option("gap", float, None, "same as eps", minimum=1e-12, maximum=0.999),
        Option("optimizer_states", float, 2.0, "optimizer state copies of the weights (Adam: 2)",
               minimum=0.0),
        Option("threads", int, 1, "mapper worker processes", minimum=1),
        Option("deterministic", bool, False, "budget mapper targets by nodes, not the clock"),
        Option("seed", int, 0, "seed of the random mapping", minimum=0),
        Option("max_ideals", int, DEFAULT_MAX_IDEALS, "cap on the DP's ideal lattice", minimum=1),
    ]
    if seed_option:
        out.append(Option("layer_seed", bool, True,
                          "also try PipeDream's layer-path partition (false: the paper's flow)"))
    return tuple(out)


_SPACE = "pipelines of S stages x R replicas (chains of fronted subgraphs) mapped onto the accelerators"
_GUARANTEE = ("heuristic partition (clustering + exact DP + refinement); mapping optimal for "
              "Eq. 5 within eps when it finishes (bound and gap in stats)")


def solve_parmesan(problem: Problem, /, *, time_limit: float | None = None,
                   progress: Progress | None = None, **options: Any) -> SolveResult:
    """Parmesan on ``problem`` (objective ``pipeline``); options in the module docstring.

    Examples
    --------
    >>> from dnnpart import Objective
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0] * 4, n_accelerators=4).with_objective(Objective(kind="pipeline"))
    >>> r = solve_parmesan(p, stages=2, replicas=2)
    >>> r.stats["stages"], r.stats["replicas"], r.plan.pipeline_copy is not None
    (2, 2, True)
    """
    options.setdefault("layer_seed", True)
    return run_parmesan(problem, method="parmesan", time_limit=time_limit, progress=progress,
                        search_space=_SPACE, **options)


PARMESAN = MethodInfo(
    name="parmesan", func=solve_parmesan,
    summary="Parmesan: op-level pipeline partition (clustering, DP, refinement) + optimal "
            "stage-to-device mapping on the topology",
    guarantee=_GUARANTEE,
    objectives=(PIPELINE,),
    source="paper 4 (Parmesan), Secs. 4-5",
    options=pipeline_options(clustering=True, refinement=True, seed_option=True),
    anytime=True,
    space=CONTIGUOUS,
)


def solve_parmesan_noclust(problem: Problem, /, *, time_limit: float | None = None,
                           progress: Progress | None = None, **options: Any) -> SolveResult:
    """``parmesan`` with ``k=None``."""
    if "k" in options:
        raise ValueError("parmesan-noclust: unknown option(s) ['k'] (it never clusters)")
    return run_parmesan(problem, method="parmesan-noclust", time_limit=time_limit,
                        progress=progress, k=None, search_space=_SPACE, **options)


PARMESAN_NOCLUST = MethodInfo(
    name="parmesan-noclust", func=solve_parmesan_noclust,
    summary="Parmesan without clustering: exact DP over all atomic ops (small graphs), "
            "refinement, mapping",
    guarantee="ablation; partition exact for Eq. 3 before refinement (lattice guard applies)",
    objectives=(PIPELINE,),
    source="paper 4, ablation",
    options=pipeline_options(clustering=False, refinement=True, seed_option=False),
    anytime=True,
    space=CONTIGUOUS,
)


def solve_parmesan_norefine(problem: Problem, /, *, time_limit: float | None = None,
                            progress: Progress | None = None, **options: Any) -> SolveResult:
    """``parmesan`` with ``refine_steps=0``."""
    if "refine_steps" in options:
        raise ValueError("parmesan-norefine: unknown option(s) ['refine_steps'] (it never refines)")
    return run_parmesan(problem, method="parmesan-norefine", time_limit=time_limit,
                        progress=progress, refine_steps=0, search_space=_SPACE, **options)


PARMESAN_NOREFINE = MethodInfo(
    name="parmesan-norefine", func=solve_parmesan_norefine,
    summary="Parmesan without refinement: clustering + DP, then mapping",
    guarantee="ablation; heuristic partition, mapping as parmesan",
    objectives=(PIPELINE,),
    source="paper 4, ablation",
    options=pipeline_options(clustering=True, refinement=False, seed_option=False),
    anytime=True,
    space=CONTIGUOUS,
)


METHODS = (PARMESAN, PARMESAN_NOCLUST, PARMESAN_NOREFINE)
