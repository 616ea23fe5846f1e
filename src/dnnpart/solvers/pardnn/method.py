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
LC+GLB in 9 of 20 cells (``docs/methods/pardnn.md``). ``cp_guard=false lc_slicing=false
glb_mapping=false refine_evals=0`` gives the paper's step 1 unchanged. None of it runs with
``memory_heuristic=2`` (heuristic II is part of step 1 there).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnpart.graph import Graph
from dnnpart.plan import Plan, SolveResult
from dnnpart.pricing.pairs import inverse_bandwidth, pair_time
from dnnpart.problem import MAKESPAN, Problem
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
            raise ValueError("cluster: PARDNN needs at least one accelerator")
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
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _local_fixed(graph: Graph, lay: Layout) -> IntArray:
    return fixed_devices(graph, lay.kinds)


def solve_pardnn(
    problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
    memory_heuristic: str | int = "auto", memory_fraction: float = MEMORY_FRACTION,
    cp_split_threshold: float | str | None = CP_SPLIT_THRESHOLD, cp_guard: bool | str = True,
    lc_slicing: bool | str = True, glb_mapping: bool | str = True, refine_evals: int | None = None,
    **_: Any,
) -> SolveResult:
    clock = Stopwatch(time_limit)
    memory_heuristic = str(memory_heuristic)  # the schema gives text; direct calls may pass 1
    if memory_heuristic not in ("auto", "none", "1", "2"):
        raise ValueError(f"memory_heuristic must be one of auto, none, 1, 2; got {memory_heuristic!r}")
    threshold: float | None
    if cp_split_threshold is None or (isinstance(cp_split_threshold, str)
                                      and cp_split_threshold.lower() in ("none", "off")):
        threshold = None
    else:
        threshold = float(cp_split_threshold)
    if not 0 < float(memory_fraction) <= 1:
        raise ValueError(f"memory_fraction must lie in (0, 1], got {memory_fraction!r}")
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
    if step1 == "none" and lay.k > 1:
        from dnnpart.solvers.pardnn.portfolio import step_one_portfolio

        evals = None if refine_evals is None else int(refine_evals)
        if evals is not None and evals < 0:
            raise ValueError(f"refine_evals must be >= 0, got {refine_evals!r}")
        device, more = step_one_portfolio(
            graph, problem.cluster, costs, lay.k, lay.to_global, device, fixed, variable,
            slicing=result.slicing, cp_guard=_flag(cp_guard, "cp_guard"),
            lc_slicing=_flag(lc_slicing, "lc_slicing"), glb_mapping=_flag(glb_mapping, "glb_mapping"),
            refine_evals=evals,
            time_limit=None if time_limit is None else max(0.5 * (time_limit - clock.elapsed), 0.0),
            stop=clock.expired)
        stats.update(more)
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
    return result_from_plan(problem, plan, method="pardnn", clock=clock, proven=False,
                            bound=makespan_bound(problem), search_space="placements", **stats)


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
        Option("cp_guard", bool, True, "keep the CP heuristic's placement where it emulates "
               "faster than step 1 (ours, not the paper's)"),
        Option("lc_slicing", bool, True, "also try LFLAM on the linear-clustering slicing "
               f"(graphs up to {LC_SLICING_MAX_NODES} nodes; ours, not the paper's)"),
        Option("glb_mapping", bool, True, "also try Alg. 1's slicing mapped by GLB (EST-first) "
               "instead of LFLAM (ours, not the paper's)"),
        Option("refine_evals", int, None, "emulations for the critical-chain refinement of step 1 "
               f"(none: {REFINE_EVALS}, fewer above {REFINE_WORK // REFINE_EVALS} nodes; 0: no "
               "refinement; ours, not the paper's)", minimum=0),
    ),
    space=ANY,
)


METHODS = (PARDNN,)
