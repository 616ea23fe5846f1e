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
* **(S, R) search**: without ``stages`` and ``replicas`` every pair with ``S * R <= D`` and
  ``S <=`` number of atomic ops is tried and the plan with the smallest *simulated* time
  kept. The paper's tables use every device (``S * R = D``); idle devices are allowed here
  because a pair using fewer can be the only one that fits (an inference graph of two ops
  on three accelerators) or simulate faster (less all-reduce). A pair on ``S * R < D``
  devices uses the first ``S * R`` accelerators (consecutive devices: one machine's GPUs
  before the next machine's in the hierarchies' numbering), and the mapper places the
  pipeline on them. Eq. 3 alone would always prefer ``S = 1`` (it divides compute by ``R``
  and ignores the all-reduce), so the choice has to be scored by the simulator. Pairs are
  tried by their compute bound (:func:`compute_bound`, a lower bound on the simulated time
  per sample of any plan of the pair), lowest first; a pair whose bound is not below the
  best feasible plan found is skipped (it cannot win), so the extra pairs cost little.
* **Status**: a plan within memory is ``feasible`` (the partition is a heuristic). Without
  one the status is ``unknown``: phase 1 is not exhaustive, so finding nothing proves
  nothing. ``infeasible`` only when the space named is empty by counting (the ``stages``
  asked for exceed the graph's atomic ops).
* **Units**: phase 1 works in the graph's time unit; the stage graph handed to phase 2 is in
  seconds (:func:`stages_in_seconds`), as the topology's ``M / B`` times are; the ``eq5_*``
  figures are therefore in seconds.
* **Memory model** of phase 1: the simulator's (:mod:`.opdag`): the smallest memory of the
  accelerators the pair uses, weights (and for training gradients and ``optimizer_states``,
  default 2: Adam), the micro-batches in flight per replica under the objective's schedule,
  recomputation.
* **Layer-level seed** (``layer_seed``, default on): phase 1 first takes the partition of the
  branch-contracted layer path (PipeDream's, a chain of fronted subgraphs of the op DAG
  too); clustering respects it (never fuses ops it puts in different stages), so the
  op-level partition's max stage time is never above it (:mod:`.phase1`). That partition,
  refined at op level and as it is, is also mapped; the simulator keeps the best plan, so
  ``parmesan`` never simulates slower than ``pipedream`` with the same ``(S, R)`` -- by
  construction, since PipeDream's partition and the CS mapping are among its candidates.
  Eq. 3 ignores the all-reduce and bubbles that the simulator charges, so a partition better
  on Eq. 3 can simulate slower (measured: ResNet-50 (8, 2) on two-level 4x4, 0.94x). When the
  op-level lattice cannot be made to fit, the layer candidates are still mapped.
* **The paper's algorithm alone** (``paper_only=true``): no layer seed, and per pair one
  candidate: the op-level partition mapped by the exact mapper under the instantiation of
  the Sec. 5.2 rule (or the ``instantiation`` asked for). ``layer_seed=true`` or a
  ``mapping`` other than ``parmesan`` beside it is refused (:class:`~dnnpart.errors.UsageError`).
* **Simulated mapping objective** (``sim_search``, default on; never with ``paper_only``):
  Eq. 5 under Eq. 6 or Eq. 7 ranks mappings differently from the simulator (:mod:`.simscore`
  names why), so after the candidates are simulated, a swap search scored by the simulator
  starts from the best of them; its mapping is one more candidate (``sim-swaps``).
* **Provenance**: when a pair had several candidates, ``SolveResult.provenance`` names the one
  the simulator kept: its partition (op level, or the layer seed refined or as it is) and its
  mapping (the mapper under Eq. 6 / Eq. 7, CS, p2p-first).
* **Time split**: each pair gets an even share of what is left over the pairs still able to
  win (bound below the best so far); its mapping searches get :data:`MAP_SHARE` of it and
  the rest pays for simulating the candidates.
* Registered ablations differ from ``parmesan`` in one option each (:data:`ABLATIONS`):
  ``parmesan-noclust`` (``k=None``: the exact DP over the atomic ops, small graphs only) and
  ``parmesan-norefine`` (``refine_steps=0``); the layer seed stays as ``parmesan`` has it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dnnpart import interrupt
from dnnpart.errors import ProblemTooLargeError, UsageError
from dnnpart.evaluate import evaluate
from dnnpart.limits import MAX_SEED, max_threads
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.pricing.pairs import Topology
from dnnpart.pricing.stages import max_stage_time
from dnnpart.problem import PIPELINE, Problem
from dnnpart.solvers.dp.ideals import DEFAULT_MAX_IDEALS
from dnnpart.solvers.method import CONTIGUOUS, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.parmesan.candidates import (
    OP_LEVEL,
    layer_partition,
    layer_seed_candidates,
    map_with,
    mapping_text,
    memory_model,
    partition_text,
    plan_from_mapping,
    stages_in_seconds,
)
from dnnpart.solvers.parmesan.opdag import atomic_dag
from dnnpart.solvers.parmesan.pairs import ComputeBound, first_devices, pipeline_pairs
from dnnpart.solvers.parmesan.phase1 import Phase1Result, partition_ops, pipeline_stages
from dnnpart.solvers.parmesan.search import DEFAULT_EPS
from dnnpart.solvers.parmesan.simscore import SIM_SWAPS, MappingSimulator, swap_search
from dnnpart.solvers.result import result_from_plan

__all__ = ["ABLATIONS", "METHODS", "map_with", "memory_model", "pipeline_options",
           "plan_from_mapping", "run_parmesan", "stages_in_seconds"]

MAPPINGS = ("parmesan", "cs", "p2p-first", "random")
#: Fraction of a pair's remaining time given to the mapping searches (the rest: simulation).
MAP_SHARE = 0.7
INSTANTIATIONS = ("auto", "p2p", "allreduce")
#: The one option each registered ablation fixes; everything else as ``parmesan`` has it.
ABLATIONS: dict[str, dict[str, Any]] = {
    "parmesan": {},
    "parmesan-noclust": {"k": None},
    "parmesan-norefine": {"refine_steps": 0},
}
#: Layer-level PipeDream partition on ``S * R`` devices (kept under its former name, which
#: the phase-1 benchmark and tests import).
_layer_partition = layer_partition


def _int_option(name: str, value: Any, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise UsageError(f"option {name}: expected an integer >= {low}, got {value!r}")
    return int(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"option {name}: expected true or false, got {value!r}")
    return value


def _number(name: str, value: Any, ok: Callable[[float], bool], expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(float(value)):
        raise UsageError(f"option {name}: expected {expected}, got {value!r}")
    return float(value)


def run_parmesan(
    problem: Problem, *, method: str, time_limit: float | None, progress: Progress | None,
    stages: Any = None, replicas: Any = None, k: Any = 128, alpha: float = 0.001,
    refine_steps: Any = 100, mapping: str = "parmesan", instantiation: str = "auto",
    eps: float | None = None, gap: float | None = None, optimizer_states: float = 2.0,
    threads: Any = 1, deterministic: bool = False, seed: Any = 0,
    max_ideals: Any = DEFAULT_MAX_IDEALS, graph: Any = None, search_space: str = "",
    layer_seed: bool = False, paper_only: bool = False, path_fallback: bool = False,
    partition_name: str = "op-level partition", sim_search: bool = True, **options: Any,
) -> SolveResult:
    """Both phases over the requested or searched ``(S, R)``; the best simulated plan."""
    if options:
        raise UsageError(f"{method}: unknown option(s) {sorted(options)}")
    if problem.objective.kind != PIPELINE:
        raise UsageError(f"{method} optimises the pipeline objective, not {problem.objective.kind!r}")
    if mapping not in MAPPINGS:
        raise UsageError(f"option mapping: expected one of {list(MAPPINGS)}, got {mapping!r}")
    if instantiation not in INSTANTIATIONS:
        raise UsageError(f"option instantiation: expected one of {list(INSTANTIATIONS)}, "
                         f"got {instantiation!r}")
    tol = eps if eps is not None else gap
    tol = _number("eps/gap", DEFAULT_EPS if tol is None else tol, lambda x: 0 < x < 1,
                  "a number in (0, 1)")
    if k is not None:
        k = _int_option("k", k)
    refine_steps = _int_option("refine_steps", refine_steps, low=0)
    threads = _int_option("threads", threads)
    max_ideals = _int_option("max_ideals", max_ideals)
    alpha = _number("alpha", alpha, lambda x: x >= 0, "a number >= 0")
    optimizer_states = _number("optimizer_states", optimizer_states, lambda x: x >= 0,
                               "a number >= 0")
    layer_seed = _flag("layer_seed", layer_seed)
    deterministic = _flag("deterministic", deterministic)
    paper_only = _flag("paper_only", paper_only)
    sim_search = _flag("sim_search", sim_search)
    if seed is not None:
        seed = _int_option("seed", seed, low=0)
    s_fixed = None if stages is None else _int_option("stages", stages)
    r_fixed = None if replicas is None else _int_option("replicas", replicas)
    clock = Stopwatch(time_limit)
    cluster = problem.cluster
    n_dev = len(cluster.accelerators)
    if n_dev == 0:
        raise UsageError(f"{method}: the cluster has no accelerators to pipeline over")
    work_graph = problem.graph if graph is None else graph
    _, atom = atomic_dag(work_graph)
    n_ops = int(atom.max()) + 1 if atom.size else 0
    bound = ComputeBound.of_problem(problem, work_graph, atom)
    pairs = sorted(pipeline_pairs(n_dev, n_ops, s_fixed, r_fixed),
                   key=lambda p: (bound.of(*p), -p[0] * p[1], p[0]))
    if not pairs:
        why = (f"a pipeline of {s_fixed or 1} stages needs {s_fixed or 1} operators; the graph "
               f"has {n_ops} (after contracting colocated ones)")
        return SolveResult(status=Status.INFEASIBLE, plan=None, objective=math.inf, method=method,
                           wall_time_s=clock.elapsed, search_space=search_space,
                           stats={"why": why, "tried": ""})
    topo = Topology.from_cluster(cluster)
    best: tuple[tuple[int, float], Plan, dict[str, Any], str] | None = None
    best_feasible = math.inf
    tried: list[str] = []
    too_large: ProblemTooLargeError | None = None
    several = False  # whether any pair had more than one candidate (provenance names the pick)
    for i, (s_n, r_n) in enumerate(pairs):
        pair_bound = bound.of(s_n, r_n)
        if clock.expired():  # keep what was found (an anytime method); no pair past the limit
            tried.append(f"S={s_n},R={r_n}: not tried, time is up")
            continue
        if pair_bound >= best_feasible:
            tried.append(f"S={s_n},R={r_n}: skipped, compute bound {pair_bound:.6g} >= best "
                         f"{best_feasible:.6g}")
            continue
        left = None if time_limit is None else max(1e-3, time_limit - clock.elapsed)
        open_pairs = sum(bound.of(*p) < best_feasible for p in pairs[i:])
        share = None if left is None else left / max(1, open_pairs)
        if progress is not None:
            progress.update(f"{method}: S={s_n}, R={r_n}", i / len(pairs))
        pair_start = clock.elapsed
        n_used = s_n * r_n
        mem = memory_model(problem, optimizer_states, replicas=r_n, n_devices=n_used)
        layer: Phase1Result | None = None
        if layer_seed:
            try:
                layer = layer_partition(problem, s_n, n_used, r_n, mem, max_ideals)
            except (ProblemTooLargeError, MemoryError):
                tried.append(f"S={s_n},R={r_n}: layer-path partition too large, skipped")
            except interrupt.Stopped:  # the DP saw the stop flag: no layer candidate
                tried.append(f"S={s_n},R={r_n}: layer-path partition stopped")
        try:
            part = partition_ops(work_graph, s_n, n_used, replicas=r_n, k=k, alpha=alpha,
                                 memory=mem, refine_steps=refine_steps, max_ideals=max_ideals,
                                 respect=None if layer is None else layer.stage_of,
                                 too_large="chain" if path_fallback else "raise")
        except (ProblemTooLargeError, interrupt.Stopped) as exc:
            # the DP's own stop (time limit, Ctrl-C) ends the op level but not the candidates
            # found so far: the layer partition of this pair, the plans of earlier pairs
            what = "too large" if isinstance(exc, ProblemTooLargeError) else "stopped"
            if isinstance(exc, ProblemTooLargeError):
                too_large = exc
            if layer is None:
                tried.append(f"S={s_n},R={r_n}: {what}")
                continue
            # the layer partition is still a candidate; it needs the op DAG only
            tried.append(f"S={s_n},R={r_n} (op level): {what}")
            dag, atoms = atomic_dag(work_graph)
            part = Phase1Result(stage_of=None, atom_stage=None, replicas=None,
                                objective=math.inf, dp_objective=math.inf, n_hyper_ops=0,
                                n_ideals=0, n_moves=0, dag=dag, atom=atoms)
        parts: list[tuple[str, Phase1Result]] = [(OP_LEVEL, part)]
        if layer is not None:
            parts += layer_seed_candidates(part, layer, mem, refine_steps)
        parts = [(src, p) for src, p in parts if p.stage_of is not None
                 and p.atom_stage is not None and math.isfinite(p.objective)]
        if not parts:
            tried.append(f"S={s_n},R={r_n}: no partition within memory")
            continue
        pair_topo = first_devices(topo, n_used)
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
            candidates = map_with(st, pair_topo, mapping, instantiation=instantiation,
                                  eps=tol, time_limit=sub, threads=threads,
                                  deterministic=deterministic, seed=seed, paper_only=paper_only)
            if not candidates:
                tried.append(f"S={s_n},R={r_n} ({source}): no mapping")
                continue
            several = several or len(parts) * len(candidates) > 1
            first_info = candidates[0][2]
            sims: dict[str, float] = {}
            queue = list(candidates)
            searched = not (sim_search and mapping == "parmesan" and not paper_only)
            while queue:
                name, device_of, info = queue.pop(0)
                plan = plan_from_mapping(problem, pt.stage_of, device_of)
                ev = evaluate(problem, plan)
                sims[name] = ev.objective
                if ev.feasible:
                    best_feasible = min(best_feasible, ev.objective)
                # infeasible plans (memory) rank after feasible ones, then by simulated time
                key = (0 if ev.feasible else 1, ev.objective)
                if best is None or key < best[0]:
                    text = (partition_text(source, pt, op_level=partition_name,
                                           clustered=k is not None, refined=refine_steps > 0,
                                           seeded=layer is not None)
                            + " + " + mapping_text(name, info) + f" (S={s_n}, R={r_n})")
                    best = (key, plan, {
                        "stages": s_n, "replicas": r_n, "devices_used": n_used,
                        "eq3_max_stage_time": pt.objective,
                        "eq3_after_dp": pt.dp_objective, "hyper_ops": pt.n_hyper_ops,
                        "ideals": pt.n_ideals, "refinement_moves": pt.n_moves,
                        "eq3_op_level": part.objective, "partition_from": source,
                        "eq3_layer_level": None if layer is None else layer.objective,
                        "coarsenings": pt.n_coarsenings, "lattice": pt.lattice,
                        **first_info, "mapping_pick": name, "_sims": sims,
                        "picked_eq5_max_stage_time": info["eq5_max_stage_time"],
                        "picked_mapping_status": info["mapping_status"],
                        "picked_instantiation": info["instantiation"]}, text)
                if not queue and not searched:
                    # Eq. 5 and the simulator rank mappings differently (:mod:`.simscore`):
                    # swaps scored by the simulator, from the best candidate so far
                    searched = True
                    start_name = min(sims, key=lambda n: sims[n])
                    start = next(m for n, m, _ in candidates if n == start_name)
                    # deterministic runs budget by scores (swap_search's max_evals), not time
                    budget = None if share is None or deterministic else max(
                        1e-3, (share - (clock.elapsed - pair_start)) / (len(parts) - j))
                    scorer = MappingSimulator(problem, pt.stage_of, start, plan_from_mapping)
                    swapped, value, n_eval = swap_search(scorer.score, start, time_limit=budget)
                    if value < sims[start_name] * (1 - 1e-9):
                        queue.append((SIM_SWAPS, swapped, {
                            **first_info, "mapping_status": "heuristic",
                            "eq5_max_stage_time": max_stage_time(
                                st, pair_topo, swapped, first_info["instantiation"]),
                            "sim_search_from": start_name, "sim_search_evals": n_eval}))
            tried.append(f"S={s_n},R={r_n} ({source}): "
                         + ", ".join(f"{n} {v:.6g}" for n, v in sims.items()))
    if best is None:
        if too_large is not None and all("too large" in t for t in tried):
            raise too_large
        # phase 1 is a heuristic (clustering, a memory model, idle CPUs): finding no plan
        # proves nothing
        return SolveResult(status=Status.UNKNOWN, plan=None, objective=math.inf, method=method,
                           wall_time_s=clock.elapsed, search_space=search_space,
                           stats={"why": "no pair gave a partition within memory and a mapping",
                                  "tried": "; ".join(tried)})
    _, plan, stats, text = best
    # the simulated time of every candidate of the picked pair and partition
    stats.update({f"simulated_{n}": v for n, v in stats["_sims"].items()})
    stats = {k2: v for k2, v in stats.items()
             if isinstance(v, (int, float, str, bool)) or v is None}
    return result_from_plan(problem, plan, method=method, clock=clock, proven=False,
                            search_space=search_space, provenance=text if several else "",
                            tried="; ".join(tried), **stats)


def pipeline_options(*, clustering: bool, refinement: bool, seed_option: bool,
                     mapping_default: str = "parmesan") -> tuple[Option, ...]:
    """The typed option schema shared by the Parmesan methods (and pipedream's pipeline mode);
    ``seed_option`` adds ``layer_seed`` and ``paper_only``."""
    out = [
        Option("stages", int, None, "pipeline stages S (default: search every S * R <= D)",
               minimum=1),
        Option("replicas", int, None, "replicas R per stage (S * R <= accelerators)", minimum=1),
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
        Option("threads", int, 1, "mapper worker processes", minimum=1, maximum=max_threads()),
        Option("deterministic", bool, False, "budget mapper targets by nodes, not the clock"),
        Option("seed", int, 0, "seed of the random mapping", minimum=0, maximum=MAX_SEED),
        Option("max_ideals", int, DEFAULT_MAX_IDEALS, "cap on the DP's ideal lattice", minimum=1),
        Option("sim_search", bool, True, "with mapping=parmesan: improve the best candidate "
               "mapping by device swaps scored by the simulator (not with paper_only)"),
    ]
    if seed_option:
        out += [Option("layer_seed", bool, True,
                       "also try PipeDream's layer-path partition (false: the paper's flow)"),
                Option("paper_only", bool, False,
                       "the paper's algorithm alone: no layer seed, one mapping (the mapper's "
                       "optimum) per (S, R)")]
    return tuple(out)


def _with_paper_only(method: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with ``paper_only`` resolved: it turns the layer seed off and keeps the
    paper's mapping; explicit options that say otherwise are refused, naming both."""
    out = dict(options)
    paper_only = _flag("paper_only", out.get("paper_only", False))
    if not paper_only:
        out.setdefault("layer_seed", True)
        return out
    if out.get("layer_seed", False) is not False:
        raise UsageError(f"{method}: option paper_only=true contradicts layer_seed="
                         f"{out['layer_seed']!r} (the paper's flow has no layer-level seed)")
    if out.get("mapping", "parmesan") != "parmesan":
        raise UsageError(f"{method}: option paper_only=true contradicts mapping="
                         f"{out['mapping']!r} (the paper maps with its own search)")
    out["layer_seed"] = False
    return out


def _solve_variant(method: str, problem: Problem, time_limit: float | None,
                   progress: Progress | None, options: dict[str, Any]) -> SolveResult:
    """``parmesan`` or one of its ablations: :data:`ABLATIONS` fixes one option."""
    fixed = ABLATIONS[method]
    given = sorted(set(fixed) & set(options))
    if given:
        raise UsageError(f"{method}: unknown option(s) {given} (the ablation fixes them)")
    return run_parmesan(problem, method=method, time_limit=time_limit, progress=progress,
                        search_space=_SPACE, **fixed, **_with_paper_only(method, options))


_SPACE = ("pipelines of S stages x R replicas (chains of fronted subgraphs) on S * R of the "
          "accelerators")
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
    return _solve_variant("parmesan", problem, time_limit, progress, options)


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
    return _solve_variant("parmesan-noclust", problem, time_limit, progress, options)


PARMESAN_NOCLUST = MethodInfo(
    name="parmesan-noclust", func=solve_parmesan_noclust,
    summary="Parmesan without clustering: exact DP over all atomic ops (small graphs), "
            "refinement, mapping",
    guarantee="ablation; partition exact for Eq. 3 before refinement (lattice guard applies)",
    objectives=(PIPELINE,),
    source="paper 4, ablation",
    options=pipeline_options(clustering=False, refinement=True, seed_option=True),
    anytime=True,
    space=CONTIGUOUS,
)


def solve_parmesan_norefine(problem: Problem, /, *, time_limit: float | None = None,
                            progress: Progress | None = None, **options: Any) -> SolveResult:
    """``parmesan`` with ``refine_steps=0``."""
    return _solve_variant("parmesan-norefine", problem, time_limit, progress, options)


PARMESAN_NOREFINE = MethodInfo(
    name="parmesan-norefine", func=solve_parmesan_norefine,
    summary="Parmesan without refinement: clustering + DP, then mapping",
    guarantee="ablation; heuristic partition, mapping as parmesan",
    objectives=(PIPELINE,),
    source="paper 4, ablation",
    options=pipeline_options(clustering=True, refinement=False, seed_option=True),
    anytime=True,
    space=CONTIGUOUS,
)


METHODS = (PARMESAN, PARMESAN_NOCLUST, PARMESAN_NOREFINE)
