"""Baseline strategies of paper 3 (§6) and the depth-first search of Table 3.

* :func:`data_parallel`: every layer cut in samples over all devices.
* :func:`model_parallel`: every layer's parameters split equally (cut in output channels).
* :func:`owt`: "one weird trick" (Krizhevsky 2014): data parallel up to the first fully
  connected layer, model parallel from there on (fully connected and softmax layers).
* :func:`dfs`: depth-first search over all strategies (layers in topological order), for
  Table 3's baseline; it prunes a branch once its partial Eq. 1 sum reaches the best complete
  strategy found (all terms are non-negative), visits cheaper configurations first, and stops
  at a time budget.

Choice (also in ``docs/methods/optcnn.md``): where a dimension cannot take the full device count
(e.g. 1000 classes on 16 devices, 3 input channels), a baseline uses the largest admissible
degree in that dimension, all others 1.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dnnpart.layerwise.configs import ConfigSpace
from dnnpart.layerwise.tables import CostTables, iteration_time

__all__ = ["DfsResult", "data_parallel", "dfs", "model_parallel", "owt"]

_FC_KINDS = ("fc", "softmax")


def _largest_in(space: ConfigSpace, dim: int) -> int:
    """Index of the configuration with the largest degree in ``dim`` and 1 elsewhere."""
    others = np.delete(space.degrees, dim, axis=1)
    ok = np.flatnonzero((others == 1).all(axis=1))
    return int(ok[np.argmax(space.degrees[ok, dim])])


def data_parallel(tables: CostTables) -> tuple[int, ...]:
    """Sample degree = devices (or the largest admissible) on every layer.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> from dnnpart.layerwise.tables import build_tables
    >>> t = build_tables(lenet5(128), 4, P100, paper_bandwidth(4))
    >>> {tuple(s.degrees[c].tolist()) for s, c in zip(t.spaces, data_parallel(t))}
    {(4, 1, 1, 1)}
    """
    return tuple(_largest_in(s, 0) for s in tables.spaces)


def model_parallel(tables: CostTables) -> tuple[int, ...]:
    """Channel degree = devices (or the largest admissible) on every layer."""
    return tuple(_largest_in(s, 1) for s in tables.spaces)


def owt(tables: CostTables) -> tuple[int, ...]:
    """Data parallel before the first fully connected layer, model parallel from it on."""
    layers = tables.graph.layers
    first_fc = next((i for i, layer in enumerate(layers) if layer.op in _FC_KINDS), len(layers))
    return tuple(_largest_in(s, 1 if i >= first_fc else 0) for i, s in enumerate(tables.spaces))


@dataclass(frozen=True)
class DfsResult:
    """Outcome of :func:`dfs`: the best strategy found, whether the search finished."""

    strategy: tuple[int, ...]
    value: float
    finished: bool
    visited: int
    seconds: float


def dfs(tables: CostTables, time_budget: float = 60.0, *, prune: bool = False,
        slice_steps: int = 1 << 22, should_stop: Callable[[], bool] | None = None) -> DfsResult:
    """Depth-first search over all strategies, layers in topological order (Table 3 baseline).

    Without ``prune`` every strategy is evaluated, as the paper's baseline does (cost
    ``O(E C^N)``); with ``prune`` a branch stops once its partial sum reaches the best strategy
    so far (all terms are non-negative, so the result is still optimal). The search starts
    from the best of the three baselines and stops after ``time_budget`` seconds or once
    ``should_stop()`` is true (both checked every ``slice_steps`` visits), reporting
    ``finished=False`` and its best strategy so far.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> from dnnpart.solvers.optcnn.search import optimize_tables
    >>> from dnnpart.layerwise.tables import build_tables
    >>> t = build_tables(lenet5(64), 2, P100, paper_bandwidth(2))
    >>> r = dfs(t)
    >>> r.finished, abs(r.value - optimize_tables(t).value) < 1e-12
    (True, True)
    """
    from dnnpart.solvers.optcnn.dfs_kernel import dfs_steps

    n = len(tables.spaces)
    sizes = np.asarray([len(s) for s in tables.spaces], dtype=np.int64)
    node_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    node_flat = np.concatenate(tables.node_cost).astype(np.float64)
    into: list[list[int]] = [[] for _ in range(n)]
    for e, (u, v) in enumerate(tables.edges):
        if u >= v:
            raise ValueError("dfs needs layers in topological order")
        into[v].append(e)
    order = [e for v in range(n) for e in into[v]]
    in_ptr = np.concatenate([[0], np.cumsum([len(x) for x in into])]).astype(np.int64)
    in_src = np.asarray([tables.edges[e][0] for e in order], dtype=np.int64)
    lengths = [tables.t_x[e].size for e in order]
    in_off = (np.concatenate([[0], np.cumsum(lengths)[:-1]]) if order else np.zeros(0)).astype(np.int64)
    tab_flat = (np.concatenate([tables.t_x[e].ravel() for e in order]) if order
                else np.zeros(0)).astype(np.float64)
    start = min((data_parallel(tables), model_parallel(tables), owt(tables)),
                key=lambda s: iteration_time(tables, s))
    best = np.asarray([iteration_time(tables, start)])
    best_assign = np.asarray(start, dtype=np.int64)
    assign = np.full(n, -1, dtype=np.int64)
    partial = np.zeros(n, dtype=np.float64)
    state = np.zeros(1, dtype=np.int64)
    visited = 0
    t0 = time.perf_counter()
    while state[0] >= 0 and time.perf_counter() - t0 < time_budget and not (should_stop and should_stop()):
        visited += int(dfs_steps(sizes, node_off, node_flat, in_ptr, in_src, in_off, tab_flat, assign,
                                 partial, state, best, best_assign, slice_steps, prune))
    strategy = tuple(int(c) for c in best_assign)
    return DfsResult(strategy, iteration_time(tables, strategy), bool(state[0] < 0), visited,
                     time.perf_counter() - t0)
