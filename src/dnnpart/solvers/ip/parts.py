"""Building blocks shared by the throughput and latency programs.

A *place* is a device (throughput) or a subgraph slot of a device (latency). Its membership
is an ``(n,)`` array ``y`` of variable indices (``-1``: the node cannot be there), so nodes
of one colocation unit may share a variable.

* :func:`add_transfers`: the ``CommIn``/``CommOut`` variables of constraints (4)-(5),
  charged as the evaluator charges them (``pricing/loads.py``): a node with uniform
  out-edge costs pays ``c_u`` once out of its place and once into each other place it feeds;
  a node whose out-edges disagree pays edge by edge (appendix B's subdivision).
* :func:`add_contiguity`: Lemma 4.1's ``z`` variables, restricted to ancestors of the
  nodes that may be in the place (``z`` is 0 elsewhere in the lemma's witness).
* :func:`add_first_use_order`: symmetry breaking for identical devices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dnnpart.graph.algorithms import ancestors
from dnnpart.graph.core import Graph
from dnnpart.solvers.ip.model import MipModel, VarKind

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

OUT, IN = 0, 1


@dataclass
class Transfers:
    """Transfer variables of one place.

    ``terms`` lists ``(var, cost, role)`` (role 0 forward, 1 backward: the producer's);
    ``records`` lists ``(var, direction, u, successors)`` to compute hints; ``dep`` maps a
    node ``u`` outside the place feeding it to a variable that is 1 when it does
    (``CommIn`` of the latency program, also for zero-cost edges).
    """

    terms: list[tuple[int, float, int]] = field(default_factory=list)
    records: list[tuple[int, int, int, tuple[int, ...]]] = field(default_factory=list)
    dep: dict[int, int] = field(default_factory=dict)


def _var(m: MipModel, rows: list[tuple[int, int]]) -> int:
    """A RELAXED variable ``t >= y_a - y_b`` for each ``(a, b)`` of ``rows`` (-1: constant 0)."""
    t = m.add_var(VarKind.RELAXED)
    for a, b in rows:
        idx, coef = [t, a], [1.0, -1.0]
        if b >= 0:
            idx.append(b)
            coef.append(1.0)
        m.add_row(idx, coef, lb=0.0)
    return t


def add_transfers(
    m: MipModel, graph: Graph, y: IntArray, *, node_cost: npt.NDArray[np.float64],
    uniform: BoolArray, with_dependencies: bool = False,
) -> Transfers:
    """Add the transfer variables of one place (see the module docstring).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(2, cost=0.5)
    >>> m = MipModel(); y = np.array([m.add_var(VarKind.BINARY), -1])
    >>> cost, uni = g.node_out_cost()
    >>> add_transfers(m, g, y, node_cost=cost, uniform=uni).terms  # node 0 sends out
    [(1, 0.5, 0)]
    """
    out = Transfers()
    role = graph.is_backward.astype(np.int64)
    for u in range(graph.n_nodes):
        succ = graph.successors(u)
        if succ.size == 0:
            continue
        yu = int(y[u])
        ws = [int(w) for w in succ if int(y[w]) != yu or yu < 0]
        ws = [w for w in ws if not (y[w] < 0 and yu < 0)]
        if not ws:
            continue
        if uniform[u]:
            cost = float(node_cost[u])
            if yu >= 0 and cost > 0:
                # one successor outside (or unable to be) the place is enough to send
                missing = [w for w in ws if y[w] < 0]
                pairs = [(yu, -1)] if missing else list(dict.fromkeys((yu, int(y[w])) for w in ws))
                t = _var(m, pairs)
                out.terms.append((t, cost, int(role[u])))
                out.records.append((t, OUT, u, tuple(ws)))
            inside = [w for w in ws if y[w] >= 0]
            if inside and (cost > 0 or with_dependencies):
                pairs = list(dict.fromkeys((int(y[w]), yu) for w in inside))
                t = _var(m, pairs)
                if cost > 0:
                    out.terms.append((t, cost, int(role[u])))
                out.records.append((t, IN, u, tuple(inside)))
                out.dep[u] = t
            continue
        # non-uniform out-edges: each crossing edge is its own transfer
        start = int(graph.succ_ptr[u])
        dep_pairs: list[tuple[int, int]] = []
        for k, w in enumerate(graph.successors(u).tolist()):
            yw = int(y[w])
            if yw == yu and yu >= 0:
                continue
            cost = float(graph.edge_cost[start + k])
            if yu >= 0 and cost > 0:
                t = _var(m, [(yu, yw)])
                out.terms.append((t, cost, int(role[u])))
                out.records.append((t, OUT, u, (w,)))
            if yw >= 0:
                dep_pairs.append((yw, yu))
                if cost > 0:
                    t = _var(m, [(yw, yu)])
                    out.terms.append((t, cost, int(role[u])))
                    out.records.append((t, IN, u, (w,)))
        if with_dependencies and dep_pairs:
            t = _var(m, list(dict.fromkeys(dep_pairs)))
            out.records.append((t, IN, u, tuple(w for w in graph.successors(u).tolist() if y[w] >= 0)))
            out.dep[u] = t
    return out


def transfer_hint(tr: Transfers, member: BoolArray) -> dict[int, float]:
    """Values of the transfer variables when the place holds exactly ``member``."""
    hint: dict[int, float] = {}
    for var, direction, u, ws in tr.records:
        if direction == OUT:
            value = member[u] and any(not member[w] for w in ws)
        else:
            value = (not member[u]) and any(member[w] for w in ws)
        hint[var] = float(value)
    return hint


def add_contiguity(m: MipModel, graph: Graph, y: IntArray, part: BoolArray) -> IntArray:
    """Force ``{v in part : y_v = 1}`` to be contiguous (Lemma 4.1); returns ``z`` (-1: none).

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> m = MipModel(); y = np.array([m.add_var(VarKind.BINARY) for _ in range(3)])
    >>> z = add_contiguity(m, chain_graph(3), y, np.ones(3, bool))
    >>> (z >= 0).tolist()
    [True, True, True]
    """
    n = graph.n_nodes
    cand = part & (y >= 0)
    z = np.full(n, -1, np.int64)
    if not cand.any():
        return z
    anc = ancestors(graph, cand)
    for v in np.flatnonzero(anc).tolist():
        z[v] = m.add_var(VarKind.RELAXED)
    yy = np.where(part, y, -1)
    for v in np.flatnonzero(cand).tolist():
        m.add_row([z[v], yy[v]], [1.0, -1.0], lb=0.0)  # (11)
    src = graph.edge_sources()
    dst = graph.succ_idx.astype(np.int64)
    for u, w in zip(src.tolist(), dst.tolist(), strict=True):
        if z[w] < 0:
            continue
        m.add_row([z[w], z[u]], [1.0, -1.0], ub=0.0)  # (12)
        if yy[u] >= 0 and yy[u] != yy[w]:
            idx, coef = [z[w], yy[u]], [1.0, 1.0]  # (13): z_w <= y_w - y_u + 1
            if yy[w] >= 0:
                idx.append(yy[w])
                coef.append(-1.0)
            m.add_row(idx, coef, ub=1.0)
    return z


def contiguity_hint(graph: Graph, z: IntArray, member: BoolArray) -> dict[int, float]:
    """``z`` of the lemma's witness: 1 on the ancestors of the place's nodes."""
    anc = ancestors(graph, member) if member.any() else np.zeros(graph.n_nodes, np.bool_)
    return {int(z[v]): float(anc[v]) for v in np.flatnonzero(z >= 0).tolist()}


def add_first_use_order(m: MipModel, on: list[list[list[int]]]) -> list[IntArray]:
    """Identical devices ``j = 0, 1, ...`` are used in the order of their first unit.

    ``on[j][u]`` lists the variables whose sum says unit ``u`` is on device ``j``. Any plan
    can be relabelled so that device ``j`` holds a unit only if device ``j - 1`` holds an
    earlier one, so this keeps the optimum and removes the ``k!`` relabellings. Returns the
    ``used-by`` variables ``b[j][u]`` (1 when device ``j`` holds a unit ``<= u``).
    """
    n_dev = len(on)
    if n_dev < 2:
        return []
    n_units = len(on[0])
    used: list[IntArray] = []
    for j in range(n_dev - 1):
        b = np.array([m.add_var(VarKind.RELAXED) for _ in range(n_units)], np.int64)
        for u in range(n_units):
            idx, coef = [int(b[u])], [1.0]
            if u > 0:
                idx.append(int(b[u - 1]))
                coef.append(-1.0)
            idx += on[j][u]
            coef += [-1.0] * len(on[j][u])
            m.add_row(idx, coef, ub=0.0)  # b_u <= b_{u-1} + on_u
        used.append(b)
    for j in range(1, n_dev):
        for u in range(n_units):
            if not on[j][u]:
                continue
            idx, coef = list(on[j][u]), [1.0] * len(on[j][u])
            if u > 0:
                idx.append(int(used[j - 1][u - 1]))
                coef.append(-1.0)
            m.add_row(idx, coef, ub=0.0)
    return used


def first_use_hint(used: list[IntArray], unit_device: IntArray, devices: list[int]) -> dict[int, float]:
    """Values of :func:`add_first_use_order`'s variables for a plan (units -> devices)."""
    hint: dict[int, float] = {}
    for j, b in enumerate(used):
        seen = np.cumsum(unit_device == devices[j]) > 0
        hint.update({int(b[u]): float(seen[u]) for u in range(b.size)})
    return hint


def relabel_by_first_use(unit_device: IntArray, classes: list[list[int]]) -> dict[int, int]:
    """Device relabelling that puts each class of identical devices in first-use order."""
    mapping: dict[int, int] = {}
    for cls in classes:
        first = {d: (int(np.argmax(unit_device == d)) if np.any(unit_device == d) else 1 << 60) for d in cls}
        for new, old in zip(cls, sorted(cls, key=lambda d: (first[d], d)), strict=True):
            mapping[old] = new
    return mapping


def identical_classes(problem_devices: list[tuple[object, ...]]) -> list[list[int]]:
    """Group device indices by their signature, keeping classes of two or more."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, sig in enumerate(problem_devices):
        groups.setdefault(sig, []).append(i)
    return [g for g in groups.values() if len(g) > 1]

