"""The method table: every built-in method by name, and :func:`solve`, which runs one.

The table names, for each method, the module that declares it (``METHODS`` there, see
:mod:`dnnpart.solvers.method`). A module is imported the first time one of its methods is
asked for: importing every method module costs about 40 ms, a tenth of a small solve's whole
process, so ``dnnpart solve --method dp`` imports the DP only; listing the methods imports
them all. A test checks that the table and the modules' declarations agree.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from dnnpart import interrupt
from dnnpart.errors import UsageError
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.problem import Objective, Problem
from dnnpart.solvers.incumbent import Incumbent, frame
from dnnpart.solvers.method import (
    ANY,
    CONTIGUOUS,
    DEFAULT_TIME_LIMITS,
    GIVEN,
    LAYERWISE,
    SEARCH_SPACES,
    MethodInfo,
    Option,
    Progress,
    SolverFunc,
    Stopwatch,
    signature_defaults,
)

__all__ = [
    "ANY", "BUILT_IN", "CONTIGUOUS", "DEFAULT_TIME_LIMITS", "GIVEN", "LAYERWISE", "SEARCH_SPACES",
    "MethodInfo", "Option", "Progress", "SolverFunc", "Stopwatch", "available_methods", "get_method",
    "signature_defaults", "solve",
]


# One loader per declaring module; each imports it where the method is first asked for.
def _brute_force() -> Sequence[MethodInfo]:
    from dnnpart.solvers.brute_force import METHODS

    return METHODS


def _dp() -> Sequence[MethodInfo]:
    from dnnpart.solvers.dp.methods import METHODS

    return METHODS


def _ip() -> Sequence[MethodInfo]:
    from dnnpart.solvers.ip.driver import METHODS

    return METHODS


def _optcnn() -> Sequence[MethodInfo]:
    from dnnpart.solvers.optcnn.methods import METHODS

    return METHODS


def _pardnn() -> Sequence[MethodInfo]:
    from dnnpart.solvers.pardnn.method import METHODS

    return METHODS


def _pardnn_baselines() -> Sequence[MethodInfo]:
    from dnnpart.solvers.pardnn.baselines.methods import METHODS

    return METHODS


def _parmesan() -> Sequence[MethodInfo]:
    from dnnpart.solvers.parmesan.solver import METHODS

    return METHODS


def _expert() -> Sequence[MethodInfo]:
    from dnnpart.baselines.expert import METHODS

    return METHODS


def _graph_partitioner() -> Sequence[MethodInfo]:
    from dnnpart.baselines.graph_partitioner import METHODS

    return METHODS


def _greedy() -> Sequence[MethodInfo]:
    from dnnpart.baselines.greedy import METHODS

    return METHODS


def _local_search() -> Sequence[MethodInfo]:
    from dnnpart.baselines.local_search import METHODS

    return METHODS


def _single_device() -> Sequence[MethodInfo]:
    from dnnpart.baselines.single_device import METHODS

    return METHODS


def _pipedream() -> Sequence[MethodInfo]:
    from dnnpart.baselines.pipedream import METHODS

    return METHODS


def _pipeline_split() -> Sequence[MethodInfo]:
    from dnnpart.baselines.pipeline_split import METHODS

    return METHODS


def _block_pipeline() -> Sequence[MethodInfo]:
    from dnnpart.solvers.block_pipeline import METHODS

    return METHODS


#: method name -> the loader of the module that declares it
BUILT_IN: dict[str, Callable[[], Sequence[MethodInfo]]] = {
    "block-pipeline": _block_pipeline,
    "brute-force": _brute_force,
    "brute-force-contiguous": _brute_force,
    "cp-heuristic": _pardnn_baselines,
    "data-parallel": _optcnn,
    "dp": _dp,
    "dpl": _dp,
    "expert": _expert,
    "graph-partitioner": _graph_partitioner,
    "greedy": _greedy,
    "ip": _ip,
    "ip-noncontig": _ip,
    "linear-clustering": _pardnn_baselines,
    "local-search": _local_search,
    "model-parallel": _optcnn,
    "one-accelerator": _single_device,
    "optcnn": _optcnn,
    "optcnn-dfs": _optcnn,
    "owt": _optcnn,
    "pardnn": _pardnn,
    "parmesan": _parmesan,
    "parmesan-noclust": _parmesan,
    "parmesan-norefine": _parmesan,
    "pipedream": _pipedream,
    "pipeline": _pipeline_split,
    "round-robin": _pardnn_baselines,
}

#: Methods loaded so far, by name (the declaring modules' ``METHODS``).
_METHODS: dict[str, MethodInfo] = {}


def _load(loader: Callable[[], Sequence[MethodInfo]]) -> None:
    for info in loader():
        _METHODS.setdefault(info.name, info)


def available_methods() -> list[MethodInfo]:
    """All built-in methods, sorted by name.

    Examples
    --------
    >>> "brute-force" in [m.name for m in available_methods()]
    True
    """
    for loader in dict.fromkeys(BUILT_IN.values()):
        _load(loader)
    return [_METHODS[k] for k in sorted(_METHODS)]


def get_method(name: str) -> MethodInfo:
    """Look a method up by name; ``ValueError`` lists the valid names.

    Imports only the module that declares it.

    Examples
    --------
    >>> get_method("dpl").exact
    False
    >>> get_method("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: unknown method 'nope'; choose one of ['block-pipeline', ...]
    """
    if name not in _METHODS and name in BUILT_IN:
        _load(BUILT_IN[name])
    try:
        return _METHODS[name]
    except KeyError:
        raise UsageError(f"unknown method {name!r}; choose one of {sorted(BUILT_IN)}") from None


def _method_plan(problem: Problem, name: str) -> Plan | None:
    """The plan method ``name`` finds for ``problem`` (under the default objective when it does
    not optimise the problem's), or ``None`` when it finds none or fails: a warm start is
    optional, so its failure only means there is none."""
    info = get_method(name)
    if problem.objective.kind not in info.objectives:
        problem = problem.with_objective(Objective())
        if problem.objective.kind not in info.objectives:
            return None
    try:
        result = solve(problem, name)
    except Exception:  # see the docstring: any failure means no warm start
        return None
    return result.plan


def _method_plans(info: MethodInfo, problem: Problem, options: dict[str, Any]) -> dict[str, Any]:
    """Options declared ``method_plan`` whose text names a method, replaced by its plan."""
    out = dict(options)
    for opt in info.options:
        value = out.get(opt.name)
        if opt.method_plan and isinstance(value, str) and value in BUILT_IN and value != info.name:
            out[opt.name] = _method_plan(problem, value)
    return out


def _keep_incumbent(result: SolveResult, best: Incumbent | None) -> SolveResult:
    """A stopped solve's result, with the best plan its phases offered
    (:mod:`~dnnpart.solvers.incumbent`) where that beats the plan it returned.

    The method's bound stays (a bound on its space holds whatever plan is kept) unless it
    exceeds the kept plan's objective; the status is FEASIBLE: a stopped run proves nothing
    more than its bound.
    """
    if best is None:
        return result
    if result.plan is not None and result.status is not Status.UNKNOWN \
            and not best.objective < result.objective:
        return result
    bound = result.bound if result.bound is not None and result.bound <= best.objective else None
    return dataclasses.replace(
        result, status=Status.FEASIBLE, plan=best.plan, objective=best.objective, bound=bound,
        provenance=f"{best.source}, kept when the run was stopped",
        stats={**result.stats, "note": f"stopped; the best plan so far came from {best.source}"})


def solve(
    problem: Problem, method: str = "dp", /, *, time_limit: float | None = None,
    progress: Progress | None = None, deterministic: bool = False, **options: Any,
) -> SolveResult:
    """Solve ``problem`` with the named method.

    ``time_limit=None`` gives anytime methods their default (:data:`DEFAULT_TIME_LIMITS`);
    ``math.inf`` means no limit. ``deterministic=True`` asks for the same plan run to run:
    methods with a ``deterministic`` option get it (one worker or deterministic time and
    fixed seeds); the others are deterministic already.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> solve(p, "brute-force").objective
    5.0
    >>> solve(p, "brute-force", bogus=1)
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: brute-force: unknown option 'bogus'; valid options: ...
    """
    info = get_method(method)
    checked = info.check_options(options)  # one rule for every method, before anything else
    if type(deterministic) is not bool:
        raise UsageError(f"{method}: option deterministic: expected true or false, got {deterministic!r}")
    if problem.objective.kind not in info.objectives:
        raise UsageError(
            f"method {method!r} optimises {list(info.objectives)}, not {problem.objective.kind!r}"
        )
    if time_limit is not None and not time_limit > 0:
        raise UsageError(f"time_limit must be > 0 seconds, got {time_limit!r}")
    if time_limit is None:
        time_limit = info.default_time_limit
    elif math.isinf(time_limit):
        time_limit = None
    if deterministic and any(o.name == "deterministic" for o in info.options):
        checked["deterministic"] = True
    # Deterministic runs stop on work, not the clock: the watchdog only backstops them.
    watch = time_limit if not checked.get("deterministic") or time_limit is None else 4 * time_limit + 10
    started = time.perf_counter()
    with frame(problem) as kept:
        try:
            with interrupt.guard(watch):
                checked = _method_plans(info, problem, checked)
                result = info.func(problem, time_limit=time_limit, progress=progress, **checked)
                reason = interrupt.stop_reason() or (
                    interrupt.TIME_LIMIT if interrupt.time_limit_hit() else None)
        except (interrupt.Stopped, SystemError) as exc:
            if not interrupt.caused_by_stop(exc):  # a SystemError of its own is a bug: report it
                raise
            reason = interrupt.stop_reason() or interrupt.INTERRUPTED
            result = SolveResult(status=Status.UNKNOWN, plan=None, objective=math.inf, method=method,
                                 wall_time_s=time.perf_counter() - started,
                                 stats={"note": "stopped before the method returned a plan"})
    if reason is not None:
        result = _keep_incumbent(result, kept.best)
        result = dataclasses.replace(result, stats={**result.stats, "stopped": reason})
    if interrupt.depth() == 0:
        interrupt.reset()
    if time_limit is not None:
        result.stats.setdefault("time_limit_s", time_limit)
    return result
