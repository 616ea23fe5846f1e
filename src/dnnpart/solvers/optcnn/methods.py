"""Registered methods of paper 3 for ``--objective iteration``.

* ``optcnn`` -- Algorithm 1 (node/edge elimination, exact completion): an optimal strategy
  under Eq. 1 over the configuration space of :mod:`.configs` (tiles on devices ``0..p-1``).
* ``data-parallel``, ``model-parallel``, ``owt`` -- the paper's baselines (:mod:`.baselines`).
* ``optcnn-dfs`` -- depth-first search over all strategies (the paper's Table 3 baseline);
  optimal when it finishes within the time limit, else its best strategy so far.

Every method builds the cost tables from the problem (:func:`dnnpart.evaluate.iteration.
iteration_setting`: the layer graph scaled to ``batch x d`` samples, the device preset's
roofline, the cluster's bandwidth matrix) and returns a plan with one
:class:`~dnnpart.plan.LayerConfig` per layer. The reported objective is the evaluator's value
of that plan; the search's own t_O is ``stats["search_value"]`` (equal to 1e-9, tested).
Statistics: ``final_nodes`` (K), eliminations, completion path, table and search seconds,
``bytes_per_step``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from dnnpart.errors import UsageError
from dnnpart.limits import check_batch
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.problem import ITERATION, Problem
from dnnpart.solvers.method import LAYERWISE, MethodInfo, Option, Progress, Stopwatch

__all__ = ["solve_data_parallel", "solve_dfs", "solve_model_parallel", "solve_optcnn", "solve_owt"]

SOURCE = "Jia et al. 2018, Exploring hidden dimensions in parallelizing CNNs (OptCNN)"
_SPACE = "layer-wise configurations (power-of-two degrees in n, c, h, w; tiles on devices 0..p-1)"


def _no_unknown(method: str, options: dict[str, Any]) -> None:
    if options:
        raise UsageError(f"{method}: unknown option(s) {sorted(options)}")


def _tables(problem: Problem) -> tuple[Any, float]:
    from dnnpart.evaluate.iteration import iteration_setting
    from dnnpart.layerwise.tables import build_tables

    check_batch(problem.objective.batch, "objective batch (--batch)")
    layers, device, bandwidth = iteration_setting(problem)
    t0 = time.perf_counter()
    tables = build_tables(layers, bandwidth.shape[0], device, bandwidth)
    return tables, time.perf_counter() - t0


def _result(problem: Problem, method: str, tables: Any, strategy: Sequence[int], value_s: float,
            status: Status, started: float, stats: dict[str, Any]) -> SolveResult:
    from dnnpart.evaluate.iteration import iteration_value
    from dnnpart.layerwise.strategy import strategy_configs

    plan = Plan.from_layer_configs(strategy_configs(tables, strategy))
    objective, figures = iteration_value(problem, plan)
    stats = {**stats, "search_value": value_s / problem.cluster.time_unit_s,
             "bytes_per_step": figures["bytes_per_step"], "global_batch": figures["global_batch"]}
    # an exact search's value is its own bound over the space (gap 0); heuristics have none
    bound = objective if status == Status.OPTIMAL else None
    return SolveResult(status=status, plan=plan, objective=objective, method=method, bound=bound,
                       wall_time_s=time.perf_counter() - started, search_space=_SPACE, stats=stats)


def solve_optcnn(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
                 enum_limit: int = 1 << 20, **options: Any) -> SolveResult:
    """Algorithm 1 on the problem's cost tables; ``stats["final_nodes"]`` is K.

    Examples
    --------
    >>> from dnnpart.cost import resolve_cluster
    >>> from dnnpart.layerwise.graphs import layer_graph
    >>> from dnnpart.problem import Objective
    >>> p = Problem(graph=layer_graph("lenet5"), cluster=resolve_cluster("2xP100").cluster,
    ...             objective=Objective(kind="iteration"))
    >>> r = solve_optcnn(p)
    >>> r.status.value, r.stats["final_nodes"]
    ('optimal', 2)
    """
    from dnnpart.solvers.optcnn.search import optimize_tables

    _no_unknown("optcnn", options)
    started = time.perf_counter()
    if isinstance(enum_limit, bool) or not isinstance(enum_limit, int) or enum_limit < 0:
        raise UsageError(f"optcnn: option enum_limit must be an integer >= 0, got {enum_limit!r}")
    tables, table_s = _tables(problem)
    t0 = time.perf_counter()
    found = optimize_tables(tables, enum_limit=enum_limit)
    stats = {"final_nodes": found.final_nodes, "node_eliminations": found.node_eliminations,
             "edge_eliminations": found.edge_eliminations, "completion": found.completion,
             "conditioned": found.conditioned, "table_time_s": table_s,
             "search_time_s": time.perf_counter() - t0}
    return _result(problem, "optcnn", tables, found.strategy, found.value, Status.OPTIMAL, started, stats)


OPTCNN = MethodInfo(
    name="optcnn", func=solve_optcnn,
    summary="layer-wise parallelism: node/edge elimination (Alg. 1), exact completion, undo",
    guarantee="optimal t_O (Eq. 1) over the layer-wise configuration space",
    objectives=(ITERATION,),
    exact=True,
    source=SOURCE + ", Alg. 1",
    options=(Option("enum_limit", int, 1 << 20, "final-graph strategies enumerated at once; beyond "
                    "that, exact conditioning", minimum=0),),
    space=LAYERWISE,
)


def _baseline(name: str, pick: Callable[[Any], tuple[int, ...]]) -> Callable[..., SolveResult]:
    def solve_baseline(problem: Problem, /, *, time_limit: float | None = None,
                       progress: Progress | None = None, **options: Any) -> SolveResult:
        from dnnpart.layerwise.tables import iteration_time

        _no_unknown(name, options)
        started = time.perf_counter()
        tables, table_s = _tables(problem)
        strategy = pick(tables)
        return _result(problem, name, tables, strategy, iteration_time(tables, strategy), Status.FEASIBLE,
                       started, {"table_time_s": table_s})

    solve_baseline.__name__ = f"solve_{name.replace('-', '_')}"
    solve_baseline.__doc__ = f"The {name} baseline of paper 3 (:mod:`dnnpart.solvers.optcnn.baselines`)."
    return solve_baseline


def _data(tables: Any) -> tuple[int, ...]:
    from dnnpart.solvers.optcnn.baselines import data_parallel

    return data_parallel(tables)


def _model(tables: Any) -> tuple[int, ...]:
    from dnnpart.solvers.optcnn.baselines import model_parallel

    return model_parallel(tables)


def _owt(tables: Any) -> tuple[int, ...]:
    from dnnpart.solvers.optcnn.baselines import owt

    return owt(tables)


solve_data_parallel = _baseline("data-parallel", _data)
solve_model_parallel = _baseline("model-parallel", _model)
solve_owt = _baseline("owt", _owt)
DATA_PARALLEL = MethodInfo(
    name="data-parallel", func=solve_data_parallel,
    summary="every layer split in the sample dimension over all devices",
    guarantee="heuristic (paper 3 baseline)", objectives=(ITERATION,), source=SOURCE + ", §6",
    space=LAYERWISE,
)
MODEL_PARALLEL = MethodInfo(
    name="model-parallel", func=solve_model_parallel,
    summary="every layer split in the channel dimension over all devices",
    guarantee="heuristic (paper 3 baseline)", objectives=(ITERATION,), source=SOURCE + ", §6",
    space=LAYERWISE,
)
OWT = MethodInfo(
    name="owt", func=solve_owt,
    summary="one weird trick: data parallel convolutions, model parallel FC layers",
    guarantee="heuristic (paper 3 baseline)", objectives=(ITERATION,), source=SOURCE + ", §6",
    space=LAYERWISE,
)


def solve_dfs(problem: Problem, /, *, time_limit: float | None = None, progress: Progress | None = None,
              prune: bool = False, **options: Any) -> SolveResult:
    """Exhaustive DFS (``prune=True`` cuts branches at the incumbent, still exact).

    Examples
    --------
    >>> from dnnpart.cost import resolve_cluster
    >>> from dnnpart.layerwise.graphs import layer_graph
    >>> from dnnpart.problem import Objective
    >>> p = Problem(graph=layer_graph("lenet5", 8), cluster=resolve_cluster("2xP100").cluster,
    ...             objective=Objective(kind="iteration", batch=4))
    >>> r = solve_dfs(p, prune=True)
    >>> r.status.value, abs(r.objective - solve_optcnn(p).objective) < 1e-9
    ('optimal', True)
    """
    from dnnpart.solvers.optcnn.baselines import dfs

    _no_unknown("optcnn-dfs", options)
    started = time.perf_counter()
    if not isinstance(prune, bool):
        raise UsageError(f"optcnn-dfs: option prune must be true or false, got {prune!r}")
    tables, table_s = _tables(problem)
    # the stopwatch stops the search at the time limit and on Ctrl-C (the registry's stop
    # flag); the budget is only a backstop
    watch = Stopwatch(time_limit)
    watch.started = started
    budget = float("inf") if time_limit is None else max(0.0, time_limit - (time.perf_counter() - started))
    found = dfs(tables, budget, prune=prune, slice_steps=1 << 18, should_stop=watch.expired)
    status = Status.OPTIMAL if found.finished else Status.FEASIBLE
    stats: dict[str, Any] = {"finished": found.finished, "visited": found.visited,
                             "table_time_s": table_s, "search_time_s": found.seconds}
    if not found.finished:
        from dnnpart import interrupt

        stats["stopped"] = interrupt.stop_reason() or interrupt.TIME_LIMIT
    return _result(problem, "optcnn-dfs", tables, found.strategy, found.value, status, started, stats)


OPTCNN_DFS = MethodInfo(
    name="optcnn-dfs", func=solve_dfs,
    summary="depth-first search over every layer-wise strategy (paper 3's Table 3 baseline)",
    guarantee="optimal t_O (Eq. 1) when it finishes within the time limit",
    objectives=(ITERATION,),
    exact=True,
    source=SOURCE + ", Table 3",
    options=(Option("prune", bool, False, "cut a branch once its partial t_O reaches the incumbent "
                    "(still exact)"),),
    anytime=True,
    space=LAYERWISE,
)


METHODS = (OPTCNN, DATA_PARALLEL, MODEL_PARALLEL, OWT, OPTCNN_DFS)
