"""Framework constraints (paper 2, §4): reference ops, control nodes, pinned ops.

* A ``reference`` op mutates a residual tensor and must sit with it. Its variable is its
  lowest-numbered ``residual`` predecessor, else its lowest-numbered ``residual`` successor; a
  reference op with neither is placed freely. Reference ops follow their variable after
  mapping and whenever a memory heuristic moves the variable.
* ``control`` nodes carry no data: their out-edges cost nothing (see
  :mod:`dnnpart.solvers.pardnn.inputs`) and they hold no memory; they are placed freely.
* A pinned op (``Graph.pin``) goes to the first device of its kind and is kept out of the
  clusters; the mapping counts its work on that device from the start.
* An op the mapped-onto kind (the first device's) cannot run -- no finite compute time, e.g.
  an op only the CPU implements -- is treated as pinned to the first device whose kind runs
  it (choice: the paper assumes every op runs on every GPU; the first such device rather than
  the fastest keeps all such ops on one host, as a pin would). None runs it: it stays free
  and the evaluator reports the plan infeasible.
* A colocation class (below) with a pinned member is pinned as a whole, to the device of its
  lowest-numbered pinned member: the evaluator requires the class on one device. (A pin
  still outranks following a variable: a pinned reference op does not pull its variable.)
* ``forward_of`` constrains nothing (backward ops are placed freely). Colocation classes
  (``Graph.color_class``, "equal classes must share a device") are hard constraints of the
  shared evaluator for every objective, so they are honoured like reference ops:
  :func:`colocation_leaders` joins every reference op with its variable and every colocation
  class into groups; each group follows one leader (its lowest-numbered residual node, else
  its lowest-numbered node), and memory heuristics move groups through their leader.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dnnpart.errors import UsageError
from dnnpart.graph import NO_CLASS, NO_PIN, REFERENCE, RESIDUAL, Graph
from dnnpart.solvers.pardnn.inputs import IntArray


def reference_variables(graph: Graph) -> IntArray:
    """Node -> the residual node it must sit with (``-1`` for none).

    Examples
    --------
    >>> from dnnpart.graph import build_graph
    >>> g = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1, 1]] * 3, edge_cost=[0, 0],
    ...                 memory_class=[1, 2, 0])
    >>> reference_variables(g).tolist()
    [-1, 0, -1]
    """
    n = graph.n_nodes
    cls = graph.memory_classes()
    var = np.full(n, -1, np.int64)
    for v in np.flatnonzero(cls == REFERENCE):
        preds = graph.predecessors(int(v))
        res = preds[cls[preds] == RESIDUAL]
        if res.size == 0:
            succs = graph.successors(int(v))
            res = succs[cls[succs] == RESIDUAL]
        if res.size:
            var[v] = int(res.min())
    return var


def fixed_devices(graph: Graph, device_kinds: Sequence[str]) -> IntArray:
    """Node -> device index for pinned nodes, ``-1`` for free ones (see the module docstring).

    A pinned node goes to the first device of its kind; a node ``device_kinds[0]`` cannot
    run, to the first device whose kind runs it; then every colocation class with a pinned
    member goes where its lowest-numbered pinned member goes.

    Raises
    ------
    UsageError
        A node is pinned to a kind no device has.

    Examples
    --------
    >>> import math
    >>> from dnnpart.graph import build_graph
    >>> g = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1, 1], [1, 1], [1, math.inf]],
    ...                 edge_cost=[0, 0], pin=[0, -1, -1])
    >>> g.device_kinds
    ('cpu', 'accelerator')
    >>> fixed_devices(g, ["accelerator", "accelerator", "cpu"]).tolist()
    [2, -1, 2]
    """
    pins = graph.pins()
    kinds = list(device_kinds)
    fixed = np.full(graph.n_nodes, -1, np.int64)
    for kind_index in np.unique(pins[pins != NO_PIN]):
        kind = graph.device_kinds[int(kind_index)]
        if kind not in kinds:
            first = int(np.flatnonzero(pins == kind_index)[0])
            raise UsageError(f"node {graph.label(first)} is pinned to {kind!r} but the cluster has "
                             f"no device of that kind (it has {sorted(set(kinds))})")
        fixed[pins == kind_index] = kinds.index(kind)
    if kinds and kinds[0] in graph.device_kinds:
        unrunnable = (fixed < 0) & ~np.isfinite(graph.time_on(kinds[0]))
        for d, kind in enumerate(kinds):
            if kind in graph.device_kinds and np.any(unrunnable):
                runs = unrunnable & np.isfinite(graph.time_on(kind))
                fixed[runs] = d
                unrunnable &= ~runs
    return _pin_classes(fixed, graph.color_class)


def _pin_classes(fixed: IntArray, color_class: npt.NDArray[np.integer]) -> IntArray:
    """Pin every colocation class with a pinned member to its lowest-numbered pinned
    member's device."""
    pinned = np.flatnonzero((fixed >= 0) & (color_class != NO_CLASS))[::-1]  # lowest id last
    if pinned.size == 0:
        return fixed
    device_of = dict(zip(color_class[pinned].tolist(), fixed[pinned].tolist(), strict=True))
    members = np.flatnonzero((fixed < 0) & np.isin(color_class, list(device_of)))
    fixed[members] = [device_of[c] for c in color_class[members].tolist()]
    return fixed


def follow_variables(device: IntArray, variable: IntArray) -> IntArray:
    """Put every reference op on its variable's device (in place; returned for chaining)."""
    ref = np.flatnonzero(variable >= 0)
    device[ref] = device[variable[ref]]
    return device


def colocation_leaders(graph: Graph) -> IntArray:
    """Node -> the leader it must sit with (``-1`` for leaders and free nodes).

    Groups join each reference op with its variable (:func:`reference_variables`) and every
    colocation class; the leader is the group's lowest-numbered residual node, else its
    lowest-numbered node.

    Examples
    --------
    >>> from dnnpart.graph import build_graph
    >>> g = build_graph([0, 1, 2, 3], [0, 1, 2], [1, 2, 3], compute_time=[[1, 1]] * 4,
    ...                 edge_cost=[0, 0, 0], memory_class=[1, 2, 0, 0], color_class=[-1, -1, 5, 5])
    >>> colocation_leaders(g).tolist()
    [-1, 0, -1, 2]
    """
    n = graph.n_nodes
    parent = np.arange(n)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    var = reference_variables(graph)
    for v in np.flatnonzero(var >= 0).tolist():
        union(v, int(var[v]))
    cls = graph.color_class
    members = np.flatnonzero(cls != NO_CLASS)
    if members.size:
        order = members[np.argsort(cls[members], kind="stable")]
        same = cls[order[1:]] == cls[order[:-1]]
        for a, b in zip(order[:-1][same].tolist(), order[1:][same].tolist(), strict=True):
            union(a, b)
    root = np.array([find(v) for v in range(n)], dtype=np.int64)
    residual = graph.memory_classes() == RESIDUAL
    leader = root.copy()  # lowest id per group (union keeps the smaller root)
    best_res = np.full(n, n, np.int64)
    np.minimum.at(best_res, root[residual], np.flatnonzero(residual))
    has_res = best_res[root] < n
    leader[has_res] = best_res[root][has_res]
    out = np.where(leader == np.arange(n), -1, leader)
    sizes = np.bincount(root, minlength=n)
    out[sizes[root] == 1] = -1
    return out.astype(np.int64)
