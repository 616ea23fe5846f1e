"""``--method pardnn`` and paper 2's baselines for ``--objective makespan``.

PARDNN maps onto the cluster's accelerators (assumed identical: the first one's compute
column and speed, the first accelerator pair's link); ops pinned to another kind go to the
first device of that kind. Edge costs are the emulator's transfer times on that link,
``(latency + bytes / bandwidth) / time_unit_s``. The reported objective is the op-level
emulation's makespan (``evaluate``); the bound is ``max(critical path without
communication, Σ comp / devices)`` with every node at its fastest device.

``memory_heuristic``: ``auto`` (default) emulates the step-1 placement and keeps it when every
accelerator's peak is within ``memory_fraction`` of its memory, else runs heuristic I;
``none``, ``1`` and ``2`` force a choice. (Heuristic II's critical-path split trades
makespan for balanced memory -- on ``zoo:resnet18-training`` over 16 V100s it turns the
bound-matching 1.79 into 1.90 -- so it runs only when asked, as the paper advises.)

Heuristic I runs step 1 without heuristic II, then the overflow
handler with caps ``memory_fraction`` x each accelerator's memory, against
``dnnpart.simulate.emulate_ops``.

**Step-1 portfolio and refinement (options ``cp_guard``, ``lc_slicing``, ``glb_mapping``,
``refine_evals``; our additions, not the paper's; :mod:`dnnpart.solvers.pardnn.portfolio`).**
Step 1 is scored by the op-level emulator beside LFLAM on the linear-clustering slicing,
Alg. 1's slicing mapped by GLB, and the CP heuristic's placement (same costs and
constraints); the two of lowest emulated makespan are refined along their emulated critical
chains (:mod:`dnnpart.solvers.pardnn.refine`, at most ``refine_evals`` emulations each;
default 200, fewer above 20k nodes) and the better is kept (``stats["step1_source"]``:
``pardnn``, ``pardnn-lc-slicing``, ``pardnn-slicing-glb`` or ``cp-heuristic``) as the
placement the memory heuristics start from.
Reason: on the captured training graphs the paper's step 1 alone is strictly faster than
LC+GLB in 9 of 20 cells (``docs/methods/pardnn.md``). ``paper_only=true`` (the same as
``cp_guard=false lc_slicing=false glb_mapping=false refine_evals=0``) gives the paper's
algorithm alone; an explicit setting of one of those four that contradicts it is refused
(:class:`~dnnpart.errors.UsageError` naming both). None of it runs with
``memory_heuristic=2`` (heuristic II is part of step 1 there). The result's ``provenance``
names the kept candidate and its refinement (empty for the paper's algorithm alone).

An operator that no device of the cluster runs makes the instance infeasible: status
``infeasible``, no plan (:func:`dnnpart.evaluate.diagnose.unrunnable_node` says which). An
operator the accelerators cannot run but another device can is pinned to the first such
device (:func:`~dnnpart.solvers.pardnn.constraints.fixed_devices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.evaluate.diagnose import unrunnable_node
from dnnpart.graph import Graph
from dnnpart.plan import Plan, SolveResult
from dnnpart.pricing.pairs import inverse_bandwidth, pair_time
from dnnpart.problem import MAKESPAN, Problem
from dnnpart.solvers.incumbent import offer
from dnnpart.solvers.method import ANY, MethodInfo, Option, Progress, Stopwatch
from dnnpart.solvers.pardnn.constraints import colocation_leaders, fixed_devices
from dnnpart.solvers.pardnn.inputs import Costs, FloatArray, IntArray
from dnnpart.solvers.pardnn.levels import critical_path_length
from dnnpart.solvers.pardnn.memory_balance import CP_SPLIT_THRESHOLD, node_memory
from dnnpart.solvers.pardnn.overflow import MEMORY_FRACTION, heuristic_one
from dnnpart.solvers.pardnn.portfolio import LC_SLICING_MAX_NODES, REFINE_EVALS, REFINE_WORK
from dnnpart.solvers.pardnn.solver import pardnn
from dnnpart.solvers.result import result_from_plan


class Layout:
    """Local device ids: accelerators ``0..K-1`` first, then the other devices."""

    def __init__(self, problem: Problem) -> None:
        cluster = problem.cluster
        accs = list(cluster.accelerators)
        if not accs:
            raise UsageError("cluster: PARDNN needs at least one accelerator")
        others = [d for d in range(cluster.n_devices) if d not in accs]
        self.k = len(accs)
        self.to_global = np.array(accs + others, dtype=np.int64)
        self.kinds = [cluster.devices[d].kind for d in self.to_global]


def problem_costs(problem: Problem) -> tuple[Costs, Layout]:
    from dnnpart.simulate import transfer_bytes

    graph, cluster = problem.graph, problem.cluster
    lay = Layout(problem)
    first = int(lay.to_global[0])
    costs = Costs.from_graph(graph, cluster.devices[first].kind)
    comp = costs.comp / cluster.speeds()[first]
    if lay.k > 1:
        second = int(lay.to_global[1])
        inv = float(inverse_bandwidth(cluster.bandwidth[first, second]))
        lat = float(cluster.latency[first, second])
        comm = pair_time(transfer_bytes(graph), inv, lat) / cluster.time_unit_s
    else:
        comm = costs.comm
    return Costs(succ_ptr=costs.succ_ptr, succ_idx=costs.succ_idx, pred_ptr=costs.pred_ptr,
                 pred_idx=costs.pred_idx, pred_edge=costs.pred_edge, comp=comp,
                 comm=np.asarray(comm, np.float64)), lay


def makespan_bound(problem: Problem) -> float:
    """``max(critical path without communication, Σ comp / devices)``, fastest device per node."""
    graph, cluster = problem.graph, problem.cluster
    cols = [graph.device_kinds.index(k) for k in cluster.kinds()]
    times: FloatArray = (graph.compute_time[:, cols] / cluster.speeds()).min(axis=1)
    costs = Costs.from_graph(graph)
    fastest = Costs(succ_ptr=costs.succ_ptr, succ_idx=costs.succ_idx, pred_ptr=costs.pred_ptr,
                    pred_idx=costs.pred_idx, pred_edge=costs.pred_edge, comp=times, comm=costs.comm)
    return max(critical_path_length(fastest, with_comm=False), float(times.sum()) / cluster.n_devices)


def _emulator(problem: Problem, lay: Layout):  # type: ignore[no-untyped-def]
    from dnnpart.simulate import emulate_ops

    class Local:
        def __init__(self, s: Any) -> None:
            self.start, self.finish = s.start, s.finish
            self.peak_memory = s.peak_memory[lay.to_global]
            self.memory = [s.memory[int(d)] for d in lay.to_global]

    def emulate(device: IntArray) -> Local:
        return Local(emulate_ops(problem.graph, problem.cluster, lay.to_global[device], curves=True))

    return emulate


def _flag(value: bool | str | int, name: str) -> bool:
    if isinstance(value, (bool, int)):
        return bool(value)
    low = str(value).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", "none"):
        return False
    raise UsageError(f"pardnn: option {name}: expected true or false, got {value!r}")


def _local_fixed(graph: Graph, lay: Layout) -> IntArray:
    return fixed_devices(graph, lay.kinds)


#: The settings of the four options of ours that ``paper_only=true`` stands for.
PAPER_ONLY: dict[str, bool | int] = {"cp_guard": False, "lc_slicing": False, "glb_mapping": False,
                                     "refine_evals": 0}


@dataclass(frozen=True, slots=True)
class Portfolio:
    """The step-1 portfolio settings after ``paper_only`` and the defaults are applied."""

    cp_guard: bool
    lc_slicing: bool
    glb_mapping: bool
    refine_evals: int | None

    @property
    def runs(self) -> bool:
        """Whether anything beyond the paper's step 1 runs."""
        return self.cp_guard or self.lc_slicing or self.glb_mapping or self.refine_evals != 0


def portfolio_settings(paper_only: bool | str, cp_guard: bool | str | None, lc_slicing: bool | str | None,
                       glb_mapping: bool | str | None, refine_evals: int | None) -> Portfolio:
    """Resolve the options; ``None`` is "not set": on (``refine_evals``: auto) unless ``paper_only``.

    Examples
    --------
    >>> portfolio_settings(True, None, False, None, 0).runs
    False
    >>> portfolio_settings(True, True, None, None, None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: pardnn: option paper_only=true conflicts with cp_guard=true (...)
    """
    flags = {name: None if value is None else _flag(value, name)
             for name, value in (("cp_guard", cp_guard), ("lc_slicing", lc_slicing),
                                 ("glb_mapping", glb_mapping))}
    if refine_evals is not None and int(refine_evals) < 0:
        raise UsageError(f"pardnn: option refine_evals: expected >= 0, got {refine_evals!r}")
    evals = None if refine_evals is None else int(refine_evals)
    if _flag(paper_only, "paper_only"):
        given: dict[str, bool | int | None] = {**flags, "refine_evals": evals}
        for name, value in given.items():
            if value is not None and value != PAPER_ONLY[name]:
                text = str(value).lower() if isinstance(value, bool) else str(value)
                raise UsageError(f"pardnn: option paper_only=true conflicts with {name}={text} "
                                 "(paper_only turns cp_guard, lc_slicing, glb_mapping and the "
                                 "refinement off)")
        return Portfolio(cp_guard=False, lc_slicing=False, glb_mapping=False, refine_evals=0)
    return Portfolio(cp_guard=flags["cp_guard"] is not False, lc_slicing=flags["lc_slicing"] is not False,
                     glb_mapping=flags["glb_mapping"] is not False, refine_evals=evals)


def solve_pardnn(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    memory_heuristic: str | int = "auto", memory_fraction: float = MEMORY_FRACTION,
    cp_split_threshold: float | str | None = CP_SPLIT_THRESHOLD, paper_only: bool | str = False,
    cp_guard: bool | str | None = None, lc_slicing: bool | str | None = None,
    glb_mapping: bool | str | None = None, refine_evals: int | None = None, **_: Any,
) -> SolveResult:
    clock = Stopwatch(time_limit)
    memory_heuristic = str(memory_heuristic)  # the schema gives text; direct calls may pass 1
    if memory_heuristic not in ("auto", "none", "1", "2"):
        raise UsageError(f"pardnn: option memory_heuristic: expected one of auto, none, 1, 2; got "
                         f"{memory_heuristic!r}")
    threshold: float | None
    if cp_split_threshold is None or (isinstance(cp_split_threshold, str)
                                      and cp_split_threshold.lower() in ("none", "off")):
        threshold = None
    else:
        threshold = float(cp_split_threshold)
    if not 0 < float(memory_fraction) <= 1:
        raise UsageError(f"pardnn: option memory_fraction: expected a number in (0, 1], got "
                         f"{memory_fraction!r}")
    settings = portfolio_settings(paper_only, cp_guard, lc_slicing, glb_mapping, refine_evals)
    common: dict[str, Any] = {"method": "pardnn", "clock": clock, "search_space": "placements"}
    nowhere = unrunnable_node(problem)
    if nowhere is not None:  # no placement runs every op: proven infeasible
        return result_from_plan(problem, None, proven=True, infeasible=nowhere, **common)
    common["bound"] = makespan_bound(problem)
    graph = problem.graph
    costs, lay = problem_costs(problem)
    res, nor = node_memory(graph)
    variable = colocation_leaders(graph)
    fixed = _local_fixed(graph, lay)
    step1 = "none" if memory_heuristic in ("1", "auto") else memory_heuristic
    result = pardnn(costs, lay.k, res_mem=res, nor_mem=nor, variable=variable, fixed=fixed,
                    memory_heuristic=step1, cp_split_threshold=threshold)
    device = result.device
    stats: dict[str, Any] = {k: v for k, v in result.info.items()}
    portfolio = step1 == "none" and lay.k > 1 and settings.runs
    if portfolio or memory_heuristic in ("1", "auto"):  # a later phase may be cut by a stop
        offer(problem, Plan(assignment=lay.to_global[device].astype(np.int32)), "pardnn step 1")
    if portfolio:
        from dnnpart.solvers.pardnn.portfolio import step_one_portfolio

        device, more = step_one_portfolio(
            graph, problem.cluster, costs, lay.k, lay.to_global, device, fixed, variable,
            slicing=result.slicing, cp_guard=settings.cp_guard, lc_slicing=settings.lc_slicing,
            glb_mapping=settings.glb_mapping, refine_evals=settings.refine_evals,
            time_limit=None if time_limit is None else max(0.5 * (time_limit - clock.elapsed), 0.0),
            stop=clock.expired)
        stats.update(more)
        if memory_heuristic in ("1", "auto"):
            offer(problem, Plan(assignment=lay.to_global[device].astype(np.int32)),
                  provenance(stats))
    elif step1 == "none":
        stats["step1_source"] = "pardnn"
    caps = memory_fraction * problem.cluster.memory_capacity()[lay.to_global[: lay.k]]
    if memory_heuristic == "auto":
        from dnnpart.simulate import emulate_ops

        peaks = emulate_ops(graph, problem.cluster, lay.to_global[device], curves=False).peak_memory
        fits = bool(np.all(peaks[lay.to_global[: lay.k]] <= caps))
        stats["auto_fits_without_heuristic"] = fits
        memory_heuristic = "none" if fits else "1"
    if memory_heuristic == "1":
        from dnnpart.simulate import tensor_bytes

        h1 = heuristic_one(costs, device, mem=tensor_bytes(graph), memory_class=graph.memory_classes(),
                           caps=caps, emulate=_emulator(problem, lay), variable=variable,
                           fixed=fixed >= 0,
                           time_limit=None if time_limit is None else max(time_limit - clock.elapsed, 0.0),
                           stop=clock.expired)
        device = h1.device
        stats.update(heuristic1_success=h1.success, heuristic1_moved=h1.moved_nodes,
                     heuristic1_rounds=h1.rounds)
        if h1.failure is not None:
            f = h1.failure
            stats["heuristic1_failure"] = (
                f"device {problem.cluster.devices[int(lay.to_global[f.device])].name} overflows by "
                f"{f.excess_bytes:.0f} bytes at t={f.time:g}"
                + (f" while {graph.label(f.node)} runs" if f.node >= 0 else ""))
    plan = Plan(assignment=lay.to_global[device].astype(np.int32))
    return result_from_plan(problem, plan, proven=False, provenance=provenance(stats) if portfolio else "",
                            **common, **stats)


def provenance(stats: dict[str, Any]) -> str:
    """Where the plan of the step-1 portfolio came from: the kept candidate, its refinement
    and heuristic I's moves (the caller leaves it empty where the portfolio did not run).

    Examples
    --------
    >>> provenance({"step1_source": "cp-heuristic", "refine_moves": 3, "refine_evals": 41})
    'cp-heuristic, refined along the emulated critical chain: 3 moves in 41 emulations'
    >>> provenance({"step1_source": "pardnn-slicing-glb", "heuristic1_moved": 2})
    'pardnn-slicing-glb, not refined; then memory heuristic I moved 2 nodes'
    >>> provenance({"step1_source": "pardnn", "refine_moves": 0, "refine_evals": 7})
    'pardnn; the critical-chain refinement found no better move in 7 emulations'
    >>> provenance({"step1_source": "pardnn"})
    'pardnn, not refined'
    """
    source = stats.get("step1_source", "pardnn")
    if stats.get("refine_moves"):
        text = (f"{source}, refined along the emulated critical chain: {stats['refine_moves']} "
                f"moves in {stats['refine_evals']} emulations")
    elif stats.get("refine_evals"):
        text = (f"{source}; the critical-chain refinement found no better move in "
                f"{stats['refine_evals']} emulations")
    elif "refine_moves" in stats:
        text = f"{source}; its critical chain offered the refinement no move to try"
    else:
        text = f"{source}, not refined"
    if stats.get("heuristic1_moved"):
        text += f"; then memory heuristic I moved {stats['heuristic1_moved']} nodes"
    return text


PARDNN = MethodInfo(
    name="pardnn", func=solve_pardnn,
    objectives=(MAKESPAN,),
    summary="PARDNN: slicing into K heaviest paths, LFLAM mapping, memory heuristic I or II",
    guarantee="heuristic; with memory_heuristic=1 success means every emulated peak fits "
              "memory_fraction of its device",
    source="paper 2 (Qararyah et al. 2021), §3–4",
    options=(
        Option("memory_heuristic", str, "auto", "memory step: auto (I when needed), none, 1 or 2",
               choices=("auto", "none", "1", "2")),
        Option("memory_fraction", float, MEMORY_FRACTION, "share of each device's memory to fill",
               minimum=1e-9, maximum=1.0),
        Option("cp_split_threshold", float, CP_SPLIT_THRESHOLD,
               "split the critical path above this ratio (none: never)", minimum=0.0, nullable=True),
        Option("paper_only", bool, False, "the paper's algorithm alone: cp_guard, lc_slicing, "
               "glb_mapping off and refine_evals=0 (an explicit contrary setting is refused)"),
        Option("cp_guard", bool, None, "keep the CP heuristic's placement where it emulates "
               "faster than step 1 (none: true unless paper_only; ours, not the paper's)"),
        Option("lc_slicing", bool, None, "also try LFLAM on the linear-clustering slicing "
               f"(graphs up to {LC_SLICING_MAX_NODES} nodes; none: true unless paper_only; ours, "
               "not the paper's)"),
        Option("glb_mapping", bool, None, "also try Alg. 1's slicing mapped by GLB (EST-first) "
               "instead of LFLAM (none: true unless paper_only; ours, not the paper's)"),
        Option("refine_evals", int, None, "emulations for the critical-chain refinement of step 1 "
               f"(none: {REFINE_EVALS}, fewer above {REFINE_WORK // REFINE_EVALS} nodes, 0 with "
               "paper_only; 0: no refinement; ours, not the paper's)", minimum=0),
    ),
    space=ANY,
)


METHODS = (PARDNN,)
