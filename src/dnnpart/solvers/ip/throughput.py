"""Paper 1's max-load integer program (Fig. 6, sections 5.1.3, 5.2, 5.3).

Variables
---------
* ``x[u, d]`` binary: colocation unit ``u`` (a colour class, or a lone node) on device ``d``;
  only where every node of the unit runs on ``d`` (finite time) and the unit fits its memory.
* transfer variables of :func:`~dnnpart.solvers.ip.parts.add_transfers` on accelerators;
* ``z`` of Lemma 4.1 per device and per part (forward, backward) when contiguous;
* ``b`` of the first-use symmetry breaking per class of identical devices;
* ``L_g`` (time): the max load of group ``g``: one group ``FW + BW`` (PipeDream form) or two
  groups ``FW`` and ``BW`` (GPipe form ``max FW + max BW``). The objective is ``sum L_g``.

Every device's load rows follow the evaluator's overlap mode (appendix C.1): ``L >= compute +
in + out`` (``none``), ``L >= compute, L >= in + out`` (``compute-comm``) or ``L >= compute,
L >= in, L >= out`` (``full-duplex``). CPUs pay no transfers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.evaluate import Evaluation, evaluate
from dnnpart.graph.algorithms import colocation_units
from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind
from dnnpart.solvers.ip.parts import (
    OUT,
    Transfers,
    add_contiguity,
    add_first_use_order,
    add_transfers,
    contiguity_hint,
    first_use_hint,
    identical_classes,
    relabel_by_first_use,
    transfer_hint,
)

IntArray = npt.NDArray[np.int64]
_MEMORY_TOLERANCE = 1e-12


def device_times(problem: Problem) -> npt.NDArray[np.float64]:
    """``(n, d)`` compute time of every node on every device (``inf``: unsupported)."""
    g, c = problem.graph, problem.cluster
    return np.stack([g.time_on(dev.kind) / dev.speed for dev in c.devices], axis=1)


def transfer_scale(problem: Problem) -> npt.NDArray[np.float64]:
    """Per device factor on transfer costs: the host link's, 0 on CPUs (evaluator rule)."""
    c = problem.cluster
    return np.where(c.is_accelerator(), c.host_link_scale, 0.0)


def horizon(problem: Problem, times: npt.NDArray[np.float64]) -> float:
    """An upper bound on any plan's load or latency (all work and transfers in sequence)."""
    finite = np.where(np.isfinite(times), times, 0.0)
    scale = float(transfer_scale(problem).max(initial=0.0))
    comm = 2.0 * float(problem.graph.edge_cost.sum()) * scale
    return float(finite.max(axis=1, initial=0.0).sum() + comm + 1.0)


def group_loads(ev: Evaluation, groups: list[tuple[int, ...]]) -> list[npt.NDArray[np.float64]]:
    """Per-device loads of each objective group: FW + BW (PipeDream form), or FW and BW."""
    return [ev.load if len(g) == 2 else ev.forward_load if g == (0,) else ev.backward_load for g in groups]


def device_signatures(problem: Problem) -> list[tuple[object, ...]]:
    c = problem.cluster
    return [(d.kind, d.memory_bytes, d.speed, float(c.host_link_scale[i])) for i, d in enumerate(c.devices)]


@dataclass
class ThroughputModel:
    """The built program and what is needed to read plans out of it and hint it."""

    problem: Problem
    model: MipModel
    x: IntArray  #: (units, devices) variable or -1
    unit_of: IntArray
    n_units: int
    groups: list[tuple[int, ...]]
    load_vars: list[int]
    classes: list[list[int]]
    transfers: dict[int, Transfers] = field(default_factory=dict)
    z: dict[tuple[int, int], IntArray] = field(default_factory=dict)
    used: list[tuple[list[int], list[IntArray]]] = field(default_factory=list)
    device_load_vars: list[list[int]] = field(default_factory=list)
    infeasible_unit: int = -1

    def decode(self, values: npt.NDArray[np.float64]) -> Plan:
        """The plan of a solution: each unit on its device with the largest ``x``."""
        xv = np.where(self.x >= 0, values[np.maximum(self.x, 0)], -1.0)
        unit_device = np.argmax(xv, axis=1).astype(np.int32)
        return Plan(assignment=unit_device[self.unit_of])

    def set_hint(self, plan: Plan) -> Plan:
        """Hint the solver with ``plan`` (relabelled to the symmetry breaking); returns it."""
        a = plan.assignment.astype(np.int64)
        unit_device = np.zeros(self.n_units, np.int64)
        unit_device[self.unit_of] = a
        mapping = relabel_by_first_use(unit_device, self.classes)
        unit_device = np.array([mapping.get(int(d), int(d)) for d in unit_device], np.int64)
        relabelled = Plan(assignment=unit_device[self.unit_of].astype(np.int32))
        hint = self.model.hint
        hint.clear()
        for u in range(self.n_units):
            for d in range(self.x.shape[1]):
                if self.x[u, d] >= 0:
                    hint[int(self.x[u, d])] = float(unit_device[u] == d)
        node_dev = unit_device[self.unit_of]
        for d, tr in self.transfers.items():
            hint.update(transfer_hint(tr, node_dev == d))
        g = self.problem.graph
        for (d, part), z in self.z.items():
            hint.update(contiguity_hint(g, z, (node_dev == d) & (g.is_backward == bool(part))))
        for devices, used in self.used:
            hint.update(first_use_hint(used, unit_device, devices))
        ev = evaluate(self.problem, relabelled)
        for gi, (var, loads) in enumerate(zip(self.load_vars, group_loads(ev, self.groups), strict=True)):
            hint[var] = float(loads.max())
            if self.device_load_vars:
                own = self.device_load_vars[gi]
                hint.update({j: float(v) for j, v in zip(own, loads.tolist(), strict=True)})
        return relabelled


def build_throughput(
    problem: Problem, *, contiguous: bool, contiguous_cpus: bool = True, symmetry: bool = True,
    device_loads: bool = False, communication: bool = True, largest_units: int | None = None,
) -> ThroughputModel:
    """Write the max-load program of ``problem`` (see the module docstring).

    With ``device_loads`` every device gets its own load variable per group (``L_g >= l_dg
    >= pieces``; ``device_load_vars[g][d]``), which a search may weigh in its objective.

    Without ``communication`` no transfer is written: the program of the same problem with
    every transfer free, a relaxation whose optimum (and any bound on it) is a lower bound of
    the real one (see :func:`dnnpart.solvers.ip.bounds.packing_bound`). With
    ``largest_units=N`` (non-contiguous only) only the ``N`` units of largest least compute
    time get variables: the others are left out (not placed anywhere), a further relaxation
    that only :func:`~dnnpart.solvers.ip.bounds.packing_bound` uses (such a model's solutions
    are no plans).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> tm = build_throughput(chain_problem([4, 1, 1, 4], n_accelerators=2), contiguous=True)
    >>> tm.x.shape, len(tm.load_vars)
    ((4, 2), 1)
    """
    graph, cluster, objective = problem.graph, problem.cluster, problem.objective
    n, n_dev = graph.n_nodes, cluster.n_devices
    times = device_times(problem)
    scale = transfer_scale(problem)
    cap = cluster.memory_capacity()
    unit_ptr, unit_nodes = colocation_units(graph)
    n_units = unit_ptr.shape[0] - 1
    unit_of = np.empty(n, np.int64)
    unit_of[unit_nodes] = np.repeat(np.arange(n_units), np.diff(unit_ptr))
    unit_time = np.zeros((n_units, n_dev))
    np.add.at(unit_time, unit_of, times)
    unit_mem = np.bincount(unit_of, weights=graph.memory_bytes, minlength=n_units)

    m = MipModel()
    x = np.full((n_units, n_dev), -1, np.int64)
    allowed = np.isfinite(unit_time) & (unit_mem[:, None] <= cap[None, :] * (1 + _MEMORY_TOLERANCE))
    infeasible_unit = -1
    kept: list[int] = list(range(n_units))
    if largest_units is not None:
        if contiguous:
            raise ValueError("largest_units drops units: only for the non-contiguous program")
        least = np.where(allowed, unit_time, np.inf).min(axis=1, initial=np.inf)
        kept = sorted(np.argsort(-least, kind="stable")[:largest_units].tolist())
    for u in kept:
        for d in np.flatnonzero(allowed[u]).tolist():
            x[u, d] = m.add_var(VarKind.BINARY)
        if not allowed[u].any():
            infeasible_unit = u
        m.add_row(x[u][x[u] >= 0], np.ones(int((x[u] >= 0).sum()), np.float64), lb=1.0, ub=1.0)
    for d in range(n_dev):
        col = np.flatnonzero(x[:, d] >= 0)
        if math.isfinite(cap[d]) and unit_mem[col].sum() > cap[d] * (1 + _MEMORY_TOLERANCE):
            m.add_row(x[col, d], unit_mem[col].astype(np.float64), ub=float(cap[d]), kind=RowKind.CAPACITY)

    parts = [p for p in (0, 1) if np.any(graph.is_backward == bool(p))]
    two_forms = objective.training == "gpipe" and len(parts) == 2
    groups: list[tuple[int, ...]] = [(p,) for p in parts] if two_forms else [tuple(parts)]
    top = horizon(problem, times)
    load_vars = [m.add_var(VarKind.TIME, ub=top) for _ in groups]
    m.objective = list(load_vars)

    node_cost, uniform = graph.node_out_cost()
    tm = ThroughputModel(problem=problem, model=m, x=x, unit_of=unit_of, n_units=n_units,
                         groups=groups, load_vars=load_vars, classes=[], infeasible_unit=infeasible_unit)
    role = graph.is_backward.astype(np.int64)
    if device_loads:
        tm.device_load_vars = [[m.add_var(VarKind.TIME, ub=top) for _ in range(n_dev)] for _ in groups]
    for d in range(n_dev):
        y = x[unit_of, d]
        # compute per part, on the unit variables
        compute: list[dict[int, float]] = [{}, {}]
        for v in np.flatnonzero(y >= 0).tolist():
            if times[v, d] > 0:
                bucket = compute[int(role[v])]
                bucket[int(y[v])] = bucket.get(int(y[v]), 0.0) + float(times[v, d])
        comm_in: list[list[tuple[int, float]]] = [[], []]
        comm_out: list[list[tuple[int, float]]] = [[], []]
        if scale[d] > 0 and communication:
            tr = add_transfers(m, graph, y, node_cost=node_cost, uniform=uniform)
            tm.transfers[d] = tr
            outs = {r[0] for r in tr.records if r[1] == OUT}
            for t, cost, r in tr.terms:
                (comm_out if t in outs else comm_in)[r].append((t, cost * float(scale[d])))
        for gi, (group, load) in enumerate(zip(groups, load_vars, strict=True)):
            if device_loads:
                own = tm.device_load_vars[gi][d]
                m.add_row([load, own], [1.0, -1.0], lb=0.0, kind=RowKind.TIME)
                load = own
            comp = [(v, c) for p in group for v, c in compute[p].items()]
            cin = [tc for p in group for tc in comm_in[p]]
            cout = [tc for p in group for tc in comm_out[p]]
            if objective.overlap == "none":
                pieces = [comp + cin + cout]
            elif objective.overlap == "compute-comm":
                pieces = [comp, cin + cout]
            else:
                pieces = [comp, cin, cout]
            for terms in pieces:
                if terms:
                    m.add_row([load] + [t for t, _ in terms], [1.0] + [-c for _, c in terms],
                              lb=0.0, kind=RowKind.TIME)
        if contiguous and (cluster.devices[d].is_accelerator or contiguous_cpus):
            for p in parts:
                tm.z[(d, p)] = add_contiguity(m, graph, y, graph.is_backward == bool(p))
    if symmetry:
        tm.classes = identical_classes(device_signatures(problem))
        for cls in tm.classes:
            on = [[[int(x[u, d])] if x[u, d] >= 0 else [] for u in range(n_units)] for d in cls]
            tm.used.append((cls, add_first_use_order(m, on)))
    return tm
