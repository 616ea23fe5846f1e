"""Paper 1's latency integer program (Figs. 3 and 4, Lemma 4.1, sections 4, 4.1, 4.2).

Places: each accelerator has ``q`` subgraph *slots* run in slot order (constraint (14)); a
training graph gets ``q`` forward slots followed by ``q`` backward slots per accelerator, so
forward and backward parts are contiguous separately (section 4.2). CPUs are unlimited, as
in the paper and the evaluator: each CPU node runs as soon as its inputs are in DRAM. With
``contiguous_cpus`` every CPU is a place whose part is contiguous (what brute force over
contiguous splits searches); otherwise all CPU nodes go to the fastest CPU (Fig. 3's ``i=0``).

Variables (times in seconds)
----------------------------
* ``x[v, p]`` binary: node ``v`` in place ``p``;
* transfer/dependency variables of :func:`~dnnpart.solvers.ip.parts.add_transfers` per slot
  (``CommIn``, ``CommOut``), charged as the evaluator charges subgraph boundaries;
* ``Start_j``, ``Finish_j`` per slot, ``Latency_v`` per node, ``TotalLatency``.

Rows (6) and (10) are enforced by their binary (CP-SAT) or in the big-M form of Lemma 4.1
with ``M`` = an upper bound on any plan's latency (HiGHS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.evaluate.latency import derive_subgraphs, single_sample_latency
from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.solvers.ip.model import MipModel, RowKind, VarKind
from dnnpart.solvers.ip.parts import (
    Transfers,
    add_contiguity,
    add_transfers,
    contiguity_hint,
    transfer_hint,
)
from dnnpart.solvers.ip.throughput import device_times, horizon, transfer_scale

IntArray = npt.NDArray[np.int64]
_MEMORY_TOLERANCE = 1e-12


@dataclass
class LatencyModel:
    """The built program and what is needed to read plans out of it and hint it."""

    problem: Problem
    model: MipModel
    place_device: list[int]  #: device of each place
    place_slot: list[int]  #: slot ordinal of each place (0 on CPUs)
    x: IntArray  #: (n, places) variable or -1
    start: dict[int, int] = field(default_factory=dict)
    finish: dict[int, int] = field(default_factory=dict)
    latency: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    total: int = -1
    transfers: dict[int, Transfers] = field(default_factory=dict)
    z: dict[tuple[int, int], IntArray] = field(default_factory=dict)
    infeasible_node: int = -1

    def decode(self, values: npt.NDArray[np.float64]) -> Plan:
        """Plan (with subgraph ordinals) of a solution."""
        xv = np.where(self.x >= 0, values[np.maximum(self.x, 0)], -1.0)
        place = np.argmax(xv, axis=1)
        dev = np.asarray(self.place_device)[place]
        slot = np.asarray(self.place_slot)[place]
        return Plan(assignment=dev.astype(np.int32), subgraph=np.maximum(slot, 0).astype(np.int32))

    def places_of(self, plan: Plan) -> IntArray | None:
        """Place of every node of ``plan``, or ``None`` when the plan is outside the model."""
        g = self.problem.graph
        a = plan.assignment.astype(np.int64)
        lookup = {(d, s): p for p, (d, s) in enumerate(zip(self.place_device, self.place_slot, strict=True))}
        cpu_places = [p for p, s in enumerate(self.place_slot) if s < 0]
        is_acc = self.problem.cluster.is_accelerator()
        place = np.full(g.n_nodes, -1, np.int64)
        for d in np.unique(a).tolist():
            nodes = np.flatnonzero(a == d)
            if not is_acc[d]:
                direct = lookup.get((d, -1))
                if direct is None and len(cpu_places) == 1:
                    direct = cpu_places[0]  # CPUs are unlimited: any CPU stands for the pool
                if direct is None:
                    return None
                place[nodes] = direct
                continue
            ords = (derive_subgraphs(g, a, d) if plan.subgraph is None
                    else plan.subgraph[nodes].astype(np.int64))
            rank = {o: i for i, o in enumerate(sorted(set(ords.tolist())))}
            for v, o in zip(nodes.tolist(), ords.tolist(), strict=True):
                slot = rank[o]
                if g.is_training and self.q_per_part:
                    slot += self.q_per_part if g.is_backward[v] else 0
                p = lookup.get((d, slot))
                if p is None or self.x[v, p] < 0:
                    return None
                place[v] = p
        return place

    q_per_part: int = 0

    def set_hint(self, plan: Plan) -> Plan | None:
        """Hint the solver with ``plan``; returns the plan as the model places it, or None."""
        place = self.places_of(plan)
        if place is None:
            return None
        g = self.problem.graph
        dev = np.asarray(self.place_device)[place]
        slot = np.asarray(self.place_slot)[place]
        hinted = Plan(assignment=dev.astype(np.int32), subgraph=np.maximum(slot, 0).astype(np.int32))
        lat = single_sample_latency(g, self.problem.cluster, hinted.assignment.astype(np.int64),
                                    hinted.subgraph.astype(np.int64) if hinted.subgraph is not None else None)
        if not math.isfinite(lat.latency):
            return None
        hint = self.model.hint
        hint.clear()
        for v in range(g.n_nodes):
            for p in np.flatnonzero(self.x[v] >= 0).tolist():
                hint[int(self.x[v, p])] = float(place[v] == p)
        for p, tr in self.transfers.items():
            hint.update(transfer_hint(tr, place == p))
        for (p, part), z in self.z.items():
            hint.update(contiguity_hint(g, z, (place == p) & (g.is_backward == bool(part))))
        for v in range(g.n_nodes):
            hint[int(self.latency[v])] = float(lat.node_finish[v])
        prev_finish: dict[int, float] = {}
        for p in sorted(self.start, key=lambda p: (self.place_device[p], self.place_slot[p])):
            d = self.place_device[p]
            nodes = np.flatnonzero(place == p)
            if nodes.size:
                unit = int(lat.unit_of_node[nodes[0]])
                s, f = float(lat.unit_start[unit]), float(lat.unit_finish[unit])
            else:
                s = f = prev_finish.get(d, 0.0)
            hint[self.start[p]], hint[self.finish[p]] = s, f
            prev_finish[d] = f
        hint[self.total] = float(lat.latency)
        return hinted


def build_latency(
    problem: Problem, *, subgraphs_per_device: int = 1, contiguous_cpus: bool = True,
) -> LatencyModel:
    """Write the latency program of ``problem`` (see the module docstring).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> from dnnpart.problem import Objective
    >>> p = chain_problem([4, 1], n_accelerators=2).with_objective(Objective(kind="latency"))
    >>> lm = build_latency(p)
    >>> lm.x.shape
    (2, 2)
    """
    graph, cluster = problem.graph, problem.cluster
    n = graph.n_nodes
    q = int(subgraphs_per_device)
    times = device_times(problem)
    scale = transfer_scale(problem)
    cap = cluster.memory_capacity()
    training = graph.is_training
    place_device: list[int] = []
    place_slot: list[int] = []
    place_part: list[int] = []  # -1: any part
    for d in cluster.accelerators:
        for s in range(2 * q if training else q):
            place_device.append(d)
            place_slot.append(s)
            place_part.append((1 if s >= q else 0) if training else -1)
    cpus = list(cluster.cpus)
    if cpus and not contiguous_cpus:
        speeds = cluster.speeds()
        cpus = [max(cpus, key=lambda c: (speeds[c], -c))]
    for c in cpus:
        place_device.append(c)
        place_slot.append(-1)
        place_part.append(-1)
    n_places = len(place_device)
    m = MipModel()
    x = np.full((n, n_places), -1, np.int64)
    infeasible = -1
    for v in range(n):
        for p in range(n_places):
            d = place_device[p]
            if not math.isfinite(times[v, d]):
                continue
            if place_part[p] >= 0 and place_part[p] != int(graph.is_backward[v]):
                continue
            if graph.memory_bytes[v] > cap[d] * (1 + _MEMORY_TOLERANCE):
                continue
            x[v, p] = m.add_var(VarKind.BINARY)
        if not (x[v] >= 0).any():
            infeasible = v
        m.add_row(x[v][x[v] >= 0], np.ones(int((x[v] >= 0).sum())), lb=1.0, ub=1.0)
    lm = LatencyModel(problem=problem, model=m, place_device=place_device, place_slot=place_slot,
                      x=x, infeasible_node=infeasible, q_per_part=q if training else 0)
    devices = sorted(set(place_device))
    by_device = {d: [p for p in range(n_places) if place_device[p] == d] for d in devices}
    # colocation: per device, not per slot (section 4.1)
    cls = graph.color_class
    for c in np.unique(cls[cls >= 0]).tolist():
        members = np.flatnonzero(cls == c)
        for u, v in zip(members[:-1].tolist(), members[1:].tolist(), strict=True):
            for d in devices:
                xs_u = [int(x[u, p]) for p in by_device[d] if x[u, p] >= 0]
                xs_v = [int(x[v, p]) for p in by_device[d] if x[v, p] >= 0]
                if xs_u or xs_v:
                    m.add_row(xs_u + xs_v, [1.0] * len(xs_u) + [-1.0] * len(xs_v), lb=0.0, ub=0.0)
    for d in devices:
        if not math.isfinite(cap[d]):
            continue
        idx = [int(x[v, p]) for p in by_device[d] for v in range(n) if x[v, p] >= 0]
        coef = [float(graph.memory_bytes[v]) for p in by_device[d] for v in range(n) if x[v, p] >= 0]
        if sum(coef) > cap[d] * (1 + _MEMORY_TOLERANCE):
            m.add_row(idx, coef, ub=float(cap[d]), kind=RowKind.CAPACITY)

    top = horizon(problem, times)
    lm.latency = np.array([m.add_var(VarKind.TIME, ub=top) for _ in range(n)], np.int64)
    lm.total = m.add_var(VarKind.TIME, ub=top)
    m.objective = [lm.total]
    node_cost, uniform = graph.node_out_cost()
    parts = [p for p in (0, 1) if np.any(graph.is_backward == bool(p))]
    for p in range(n_places):
        d = place_device[p]
        y = x[:, p]
        if place_slot[p] < 0:
            if contiguous_cpus:
                for part in parts:
                    lm.z[(p, part)] = add_contiguity(m, graph, y, graph.is_backward == bool(part))
            continue
        start, finish = m.add_var(VarKind.TIME, ub=top), m.add_var(VarKind.TIME, ub=top)
        lm.start[p], lm.finish[p] = start, finish
        tr = add_transfers(m, graph, y, node_cost=node_cost, uniform=uniform, with_dependencies=True)
        lm.transfers[p] = tr
        idx, coef = [finish, start], [1.0, -1.0]
        for v in np.flatnonzero(y >= 0).tolist():
            if times[v, d] > 0:
                idx.append(int(y[v]))
                coef.append(-float(times[v, d]))
        for t, cost, _ in tr.terms:
            idx.append(t)
            coef.append(-cost * float(scale[d]))
        m.add_row(idx, coef, lb=0.0, kind=RowKind.TIME)  # (7)
        for u, dep in tr.dep.items():  # (6): inputs are in DRAM before the slot starts
            m.add_row([start, int(lm.latency[u])], [1.0, -1.0], lb=0.0, kind=RowKind.TIME,
                      enforce=dep, big_m=top)
        for v in np.flatnonzero(y >= 0).tolist():  # (10)
            m.add_row([int(lm.latency[v]), finish], [1.0, -1.0], lb=0.0, kind=RowKind.TIME,
                      enforce=int(y[v]), big_m=top)
        if place_slot[p] > 0:  # (14)
            m.add_row([start, lm.finish[p - 1]], [1.0, -1.0], lb=0.0, kind=RowKind.TIME)
        for part in parts:
            part_mask = graph.is_backward == bool(part)
            if training and place_part[p] != part:
                continue
            lm.z[(p, part)] = add_contiguity(m, graph, y, part_mask)
    cpu_places = [p for p in range(n_places) if place_slot[p] < 0]
    for v in range(n):  # (8), (9)
        idx, coef = [int(lm.latency[v])], [1.0]
        for p in cpu_places:
            if x[v, p] >= 0 and times[v, place_device[p]] > 0:
                idx.append(int(x[v, p]))
                coef.append(-float(times[v, place_device[p]]))
        preds = graph.predecessors(v).tolist()
        if not preds:
            if len(idx) > 1:
                m.add_row(idx, coef, lb=0.0, kind=RowKind.TIME)
        for u in preds:
            m.add_row([*idx, int(lm.latency[u])], [*coef, -1.0], lb=0.0, kind=RowKind.TIME)
    for v in np.flatnonzero(graph.out_degree() == 0).tolist():
        m.add_row([lm.total, int(lm.latency[v])], [1.0, -1.0], lb=0.0, kind=RowKind.TIME)
    return lm
