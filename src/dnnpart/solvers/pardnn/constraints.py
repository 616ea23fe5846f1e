"""Framework constraints (paper 2, §4): reference ops, control nodes, pinned ops.

* A ``reference`` op mutates a residual tensor and must sit with it. Its variable is its
  lowest-numbered ``residual`` predecessor, else its lowest-numbered ``residual`` successor; a
  reference op with neither is placed freely. Reference ops follow their variable after
  mapping and whenever a memory heuristic moves the variable.
* ``control`` nodes carry no data: their out-edges cost nothing (see
  :mod:`dnnpart.solvers.pardnn.inputs`) and they hold no memory; they are placed freely.
* A pinned op (``Graph.pin``) goes to the first device of its kind and is kept out of the
  clusters; the mapping counts its work on that device from the start.
* ``forward_of`` and paper 1's colocation classes constrain nothing here (issue 16, item 4).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnnpart.graph import NO_PIN, REFERENCE, RESIDUAL, Graph
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
    """Node -> device index for pinned nodes (first device of the pinned kind), ``-1`` else.

    Raises
    ------
    ValueError
        A node is pinned to a kind no device has.

    Examples
    --------
    >>> from dnnpart.graph import build_graph
    >>> g = build_graph([0, 1], [0], [1], compute_time=[[1, 1]] * 2, edge_cost=[0], pin=[0, -1])
    >>> fixed_devices(g, ["accelerator", "accelerator", "cpu"]).tolist()
    [2, -1]
    """
    pins = graph.pins()
    fixed = np.full(graph.n_nodes, -1, np.int64)
    for kind_index in np.unique(pins[pins != NO_PIN]):
        kind = graph.device_kinds[int(kind_index)]
        if kind not in device_kinds:
            first = int(np.flatnonzero(pins == kind_index)[0])
            raise ValueError(f"node {graph.label(first)} is pinned to {kind!r} but no device has that kind")
        fixed[pins == kind_index] = list(device_kinds).index(kind)
    return fixed


def follow_variables(device: IntArray, variable: IntArray) -> IntArray:
    """Put every reference op on its variable's device (in place; returned for chaining)."""
    ref = np.flatnonzero(variable >= 0)
    device[ref] = device[variable[ref]]
    return device
