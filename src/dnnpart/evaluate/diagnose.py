"""Plain-language diagnostics of a problem and its plan: what binds, what was offloaded.

* :func:`binding_constraint`: why no plan fits -- an operator no device of the cluster runs
  (:func:`unrunnable_node`), else the largest single operator against the largest
  accelerator, else the whole model against all accelerators together (with objectives whose
  memory is freed over time, the bytes held all run: the residual ones);
* :func:`why_infeasible`: the line above, else the first constraint the plan a heuristic
  found breaks (a method that returns its best plan though it breaks memory);
* :func:`host_offload`: a plan that runs operators on a host CPU (slow; usually a sign the
  accelerators are too small), with the share of compute it takes there;
* :func:`bottleneck` and :func:`bound_is_one_operator`: the most loaded stage, or the bound,
  is one indivisible operator (with its backward): more devices will not help.
"""

from __future__ import annotations

import numpy as np

from dnnpart._arrays import unique_ints
from dnnpart.graph import RESIDUAL
from dnnpart.plan import Plan
from dnnpart.problem import LATENCY, THROUGHPUT, Problem

#: Objectives whose memory model charges each operator's bytes for the whole run (paper 1),
#: so the sum over operators is what every plan needs; the others free activations.
ADDITIVE_MEMORY = (THROUGHPUT, LATENCY)


def _gb(x: float) -> str:
    return f"{x / 1e9:.3g} GB" if x >= 1e8 else f"{x / 1e6:.3g} MB"


def binding_constraint(problem: Problem) -> str | None:
    """The memory constraint that cannot hold, in one line (``None``: none is evident).

    Examples
    --------
    >>> import dataclasses, numpy as np
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0], n_accelerators=2, memory_bytes=2e9)
    >>> g = dataclasses.replace(p.graph, memory_bytes=np.array([3e9, 1e9]))
    >>> binding_constraint(dataclasses.replace(p, graph=g))
    "'0' needs 3 GB, the largest accelerator has 2 GB"
    """
    unrunnable = unrunnable_node(problem)
    if unrunnable is not None:
        return unrunnable
    g, c = problem.graph, problem.cluster
    need = np.asarray(g.memory_bytes, dtype=float)
    if g.param_bytes is not None:
        need = np.maximum(need, np.asarray(g.param_bytes, dtype=float))
    accs = list(c.accelerators)
    if not accs or need.size == 0:
        return None
    cap = c.memory_capacity()[accs]
    largest = float(cap.max())
    v = int(need.argmax())
    if need[v] > largest:
        return f"{g.names[v]!r} needs {_gb(float(need[v]))}, the largest accelerator has {_gb(largest)}"
    if problem.objective.kind in ADDITIVE_MEMORY:
        total, what = float(need.sum()), "the model needs"
    else:  # memory over lifetimes: only what lives all run adds up on every plan
        total = float(need[g.memory_classes() == RESIDUAL].sum())
        what = "its parameters and optimizer state (held all run) need"
    if total > float(cap.sum()):
        return (f"{what} {_gb(total)} in all, the {len(accs)} accelerators hold "
                f"{_gb(float(cap.sum()))} together")
    return None


def why_infeasible(problem: Problem, plan: Plan | None = None) -> str | None:
    """Why no feasible plan came out, in one line: :func:`binding_constraint` when one holds
    (no plan can meet it), else the first violation of ``plan`` (the method's best plan breaks
    it; another plan might not); ``None`` when ``plan`` is feasible or neither says anything.

    Examples
    --------
    >>> import dataclasses, numpy as np
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0], n_accelerators=2, memory_bytes=1.5)
    >>> p = dataclasses.replace(p, graph=dataclasses.replace(p.graph, memory_bytes=np.ones(2)))
    >>> why_infeasible(p, Plan(assignment=[0, 0]))  # doctest: +NORMALIZE_WHITESPACE
    'the plan found breaks acc0: memory 2 B exceeds capacity 1.5 B; no plan within the
    constraints was found'
    >>> why_infeasible(p, Plan(assignment=[0, 1])) is None
    True
    """
    from dnnpart.evaluate import evaluate

    if plan is not None:
        ev = evaluate(problem, plan)
        if ev.feasible:
            return None
    why = binding_constraint(problem)
    if why is not None or plan is None:
        return why
    return f"the plan found breaks {ev.violations[0]}; no plan within the constraints was found"


def unrunnable_node(problem: Problem) -> str | None:
    """An operator that no device of the cluster can run (no finite compute time on any of
    its kinds), in one line; ``None`` when every operator runs somewhere. Then no plan exists.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0], n_accelerators=2)
    >>> unrunnable_node(p) is None
    True
    """
    g, c = problem.graph, problem.cluster
    cols = [g.device_kinds.index(k) for k in set(c.kinds()) if k in g.device_kinds]
    runs = np.isfinite(g.compute_time[:, cols]).any(axis=1)
    if runs.all():
        return None
    v = int(np.flatnonzero(~runs)[0])
    return (f"{int((~runs).sum())} operator(s), e.g. {g.names[v]!r}, run on no device of the "
            f"cluster (it has {', '.join(sorted(set(c.kinds())))}; add a device that runs them)")


def host_offload(problem: Problem, plan: Plan) -> str | None:
    """A warning line when the plan runs operators on a host CPU (``None`` otherwise).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 3.0], n_accelerators=1, n_cpus=1)
    >>> host_offload(p, Plan(assignment=[0, 1]))
    'warning: 1 operator(s), 75% of the compute, run on the host CPU cpu0; the accelerators may be too small'
    """
    g, c = problem.graph, problem.cluster
    cpus = list(c.cpus)
    if not cpus:
        return None
    work = np.asarray(g.compute_time[:, 0], dtype=float)
    work = np.where(np.isfinite(work), work, 0.0)
    # operators no accelerator runs must be on a CPU: only the others are offloaded
    movable = (np.isfinite(g.time_on("accelerator")) if "accelerator" in g.device_kinds
               else np.ones(g.n_nodes, dtype=bool))
    on_cpu = np.isin(plan.assignment, cpus) & (work > 0) & movable
    if not on_cpu.any():
        return None
    share = 100.0 * float(work[on_cpu].sum()) / max(float(work.sum()), 1e-300)
    if share < 1.0:  # a few tiny operators (reading inputs...) cost nothing where they are
        return None
    names = ", ".join(sorted({c.devices[int(d)].name for d in plan.assignment[on_cpu]}))
    return (f"warning: {int(on_cpu.sum())} operator(s), {share:.0f}% of the compute, run on the host "
            f"CPU {names}; the accelerators may be too small")


def _unit_of(problem: Problem) -> np.ndarray:
    """The indivisible unit of every node (:func:`~dnnpart.graph.algorithms.colocation_units`)."""
    from dnnpart.graph.algorithms import colocation_units

    ptr, nodes = colocation_units(problem.graph)
    unit = np.empty(problem.graph.n_nodes, dtype=np.int64)
    unit[nodes] = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    return unit


def _label(problem: Problem, nodes: np.ndarray, labels: dict[str, str] | None) -> str:
    g = problem.graph
    forward = [int(v) for v in nodes if not g.is_backward[int(v)]]
    name = g.names[forward[0] if forward else int(nodes[0])]
    return (labels or {}).get(name, name)


def _what(problem: Problem, nodes: np.ndarray, labels: dict[str, str] | None, *,
          time_of: bool = False) -> str:
    """``one operator, `NAME``` or, for a unit of several (a block at block granularity),
    ``one unit of K operators (`PATHS`)``; ``time_of``: the same, naming its time."""
    from dnnpart.graph.contract import common_prefix

    g = problem.graph
    forward = [int(v) for v in nodes if not g.is_backward[int(v)]]
    if len(forward) <= 1:
        own = "one operator's time" if time_of else "one operator"
        return f"{own}, `{_label(problem, nodes, labels)}`"
    paths = list(dict.fromkeys(g.module_paths[v] for v in forward if g.module_paths[v])) \
        if g.module_paths is not None else []
    where = common_prefix(paths) or ", ".join(paths[:2]) + (", ..." if len(paths) > 2 else "")
    return (f"{'the time of ' if time_of else ''}one unit of {len(forward)} operators "
            f"(`{where or _label(problem, nodes, labels)}`)")


def bottleneck(problem: Problem, plan: Plan, *, labels: dict[str, str] | None = None) -> str | None:
    """One line when a most loaded stage is a single indivisible operator (``None`` otherwise).

    An operator (with its backward, which must run beside it) cannot be split between devices:
    when it alone makes the largest load and already runs at its fastest, no plan over more
    devices of these kinds shortens the step. Stages are numbered in pipeline order (the order
    the plan first uses the devices in). ``labels`` maps node names to readable names (module
    paths). Throughput and pipeline objectives only.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 1.0, 9.0, 1.0], n_accelerators=3)
    >>> print(bottleneck(p, Plan(assignment=[0, 0, 1, 2]), labels={"2": "lm_head.matmul"}))
    bottleneck: stage 1 (acc1) is one operator, `lm_head.matmul` (9 of its 9 load); more devices will not help
    >>> bottleneck(p, Plan(assignment=[0, 0, 0, 1])) is None
    True
    """
    from dnnpart.evaluate import evaluate
    from dnnpart.pricing.loads import node_times

    if problem.objective.kind not in ("throughput", "pipeline") or plan.layer_configs is not None:
        return None
    g, c = problem.graph, problem.cluster
    assignment = np.asarray(plan.assignment, dtype=np.int64)
    ev = evaluate(problem, plan)
    times = node_times(g, c, assignment)
    unit_of = _unit_of(problem)
    load = np.asarray(ev.load, dtype=np.float64)
    # any of the most loaded devices (ties included) that holds one operator bounds the step
    for d in (int(x) for x in np.flatnonzero(load >= load.max() * (1 - 1e-9))):
        on = np.flatnonzero((assignment == d) & (times > 0))
        if on.size and unique_ints(unit_of[on]).size == 1:
            break
    else:
        return None
    unit = np.flatnonzero(unit_of == unit_of[on[0]])
    here = float(times[on].sum())
    best = float(_unit_times(problem, unit_of)[unit_of[on[0]]])
    order = list(dict.fromkeys(int(x) for x in assignment))
    head = (f"bottleneck: stage {order.index(d)} ({c.devices[d].name}) is "
            f"{_what(problem, unit, labels)} ({here:.4g} of its {float(ev.load[d]):.4g} load)")
    if here > best * (1 + 1e-9):
        return head + f"; it runs in {best:.4g} on a faster device"
    return head + "; more devices will not help"


def _unit_times(problem: Problem, unit_of: np.ndarray) -> np.ndarray:
    """The fastest compute time of every unit on any one device."""
    g, c = problem.graph, problem.cluster
    columns = np.array([g.device_kinds.index(k) for k in c.kinds()], dtype=np.int64)
    per_device = g.compute_time[:, columns] / c.speeds()[None, :]
    sums = np.zeros((int(unit_of.max()) + 1, c.n_devices))
    np.add.at(sums, unit_of, per_device)
    best: np.ndarray = np.where(np.isfinite(sums), sums, np.inf).min(axis=1)
    return best


def bound_is_one_operator(problem: Problem, bound: float | None, *,
                          labels: dict[str, str] | None = None) -> str | None:
    """One line when a throughput bound equals the fastest time of one indivisible operator.

    Then that operator alone is the limit: no plan, on any number of devices of these kinds,
    has a smaller max load.

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([1.0, 9.0, 1.0], n_accelerators=3)
    >>> bound_is_one_operator(p, 9.0)
    "the bound 9 is one operator's time, `1`: no split beats it; more devices will not help"
    >>> bound_is_one_operator(p, 10.0) is None
    True
    """
    if problem.objective.kind != "throughput" or bound is None or not np.isfinite(bound) or bound <= 0:
        return None
    unit_of = _unit_of(problem)
    best = _unit_times(problem, unit_of)
    finite = np.where(np.isfinite(best), best, -np.inf)
    k = int(np.argmax(finite))
    largest = float(finite[k])
    if not np.isfinite(largest) or abs(bound - largest) > 1e-6 * max(abs(bound), 1e-12):
        return None
    nodes = np.flatnonzero(unit_of == k)
    what = _what(problem, nodes, labels, time_of=True)
    return f"the bound {bound:.4g} is {what}: no split beats it; more devices will not help"
