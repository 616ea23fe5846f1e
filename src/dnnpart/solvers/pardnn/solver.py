"""PARDNN end to end (paper 2): slicing, optional CP split, LFLAM, constraints, memory heuristic.

``memory_heuristic``: ``"2"`` (residual balancing and critical-path split, §3.2.2) or
``"none"``. Heuristic I (§3.2.1) needs a cluster and the op-level emulator: it runs in
``--method pardnn`` (:mod:`dnnpart.solvers.pardnn.method`) or through
:func:`dnnpart.solvers.pardnn.overflow.heuristic_one`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dnnpart.errors import UsageError
from dnnpart.graph import Graph
from dnnpart.solvers.pardnn import kernels as kern
from dnnpart.solvers.pardnn.constraints import colocation_leaders, fixed_devices, follow_variables
from dnnpart.solvers.pardnn.inputs import Costs, FloatArray, IntArray
from dnnpart.solvers.pardnn.mapping import lflam
from dnnpart.solvers.pardnn.memory_balance import (
    CP_SPLIT_THRESHOLD,
    balance_residuals,
    node_memory,
    split_critical_path,
)
from dnnpart.solvers.pardnn.slicing import Slicing, slice_graph

MEMORY_HEURISTICS = ("none", "1", "2")


@dataclass(slots=True, eq=False)
class PardnnResult:
    """Node -> device, the slicing it came from, and figures (stage times in seconds)."""

    device: IntArray
    slicing: Slicing
    info: dict[str, float] = field(default_factory=dict)


def pardnn(
    costs: Costs,
    k: int,
    *,
    res_mem: FloatArray | None = None,
    nor_mem: FloatArray | None = None,
    variable: IntArray | None = None,
    fixed: IntArray | None = None,
    memory_heuristic: str = "2",
    cp_split_threshold: float | None = CP_SPLIT_THRESHOLD,
) -> PardnnResult:
    """Place the nodes of ``costs`` on ``k`` identical devices.

    Parameters
    ----------
    res_mem, nor_mem : residual / normal bytes per node (zeros when absent).
    variable : node -> the node it must sit with (reference ops, colocation groups; see
        :func:`~dnnpart.solvers.pardnn.constraints.colocation_leaders`), ``-1`` = free.
    fixed : node -> device for pinned nodes, ``-1`` = free.

    Examples
    --------
    >>> c = Costs.from_edges(4, [0, 0, 1, 2], [1, 2, 3, 3], comp=[1.0, 5.0, 5.0, 1.0],
    ...                      comm=[0.1, 0.1, 0.1, 0.1])
    >>> pardnn(c, 2).device.tolist()
    [0, 0, 1, 0]
    """
    if k < 1:
        raise UsageError(f"k must be >= 1, got {k}")
    if memory_heuristic not in MEMORY_HEURISTICS:
        raise UsageError(
            f"memory_heuristic must be one of {list(MEMORY_HEURISTICS)}, got {memory_heuristic!r}"
        )
    if memory_heuristic == "1":
        raise UsageError(
            "memory_heuristic=1 needs a cluster and the op-level emulator: use --method pardnn "
            "or dnnpart.solvers.pardnn.overflow.heuristic_one"
        )
    n = costs.n
    zeros = np.zeros(n)
    res = zeros if res_mem is None else np.asarray(res_mem, np.float64)
    nor = zeros if nor_mem is None else np.asarray(nor_mem, np.float64)
    var = np.full(n, -1, np.int64) if variable is None else np.asarray(variable, np.int64)
    fix = np.full(n, -1, np.int64) if fixed is None else np.asarray(fixed, np.int64)
    var = np.where(fix < 0, var, -1)  # a pin outranks following a variable
    info: dict[str, float] = {}
    t0 = time.perf_counter()
    slicing = slice_graph(costs, k, fix < 0)
    t1 = time.perf_counter()
    info["slicing_s"] = t1 - t0
    split = 0
    if memory_heuristic == "2":
        slicing, split = split_critical_path(slicing, res + nor, cp_split_threshold)
    info["cp_split_nodes"] = float(split)
    device, stats = lflam(costs, slicing, fix)
    t2 = time.perf_counter()
    info["mapping_s"] = t2 - t1
    info.update(stats)
    follow_variables(device, var)
    moved = 0
    if memory_heuristic == "2":
        _, first_use = kern.span_bounds(costs.succ_ptr, costs.succ_idx, costs.comp, _tl(costs))
        movable = fix < 0
        res_free = np.where(movable, res, 0.0)
        moved = balance_residuals(device, res_free, nor, k, need_time=first_use, variable=var)
    info["memory_moved_nodes"] = float(moved)
    info["memory_s"] = time.perf_counter() - t2
    return PardnnResult(device=device, slicing=slicing, info=info)


def _tl(costs: Costs) -> FloatArray:
    alive = np.ones(costs.n, np.bool_)
    return np.asarray(kern.top_levels(costs.succ_ptr, costs.succ_idx, costs.comp, costs.comm, alive))


def pardnn_graph(
    graph: Graph,
    k: int,
    *,
    device_kinds: Sequence[str] | None = None,
    memory_heuristic: str = "2",
    cp_split_threshold: float | None = CP_SPLIT_THRESHOLD,
) -> PardnnResult:
    """:func:`pardnn` on a :class:`~dnnpart.graph.Graph` with its framework constraints.

    ``device_kinds`` lists the kind of every device (default: ``k`` accelerators); pinned
    nodes go to the first device of their kind.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> pardnn_graph(chain_graph(4), 2).device.tolist()
    [0, 0, 0, 0]
    """
    kinds = list(device_kinds) if device_kinds is not None else ["accelerator"] * k
    costs = Costs.from_graph(graph)
    res, nor = node_memory(graph)
    return pardnn(
        costs, k, res_mem=res, nor_mem=nor, variable=colocation_leaders(graph),
        fixed=fixed_devices(graph, kinds), memory_heuristic=memory_heuristic,
        cp_split_threshold=cp_split_threshold,
    )
