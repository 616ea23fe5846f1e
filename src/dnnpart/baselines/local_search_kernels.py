"""Kernels for local search: paper-1 loads kept up to date under single-unit moves.

A node's contribution to the loads is its *term*: its compute on its device, its out-transfer
(charged to its device when some successor sits elsewhere) and its in-transfers (charged to
every other accelerator holding one of its successors); nodes whose out-edges carry
different costs pay edge by edge. Moving node ``w`` changes the terms of ``w`` and of its
predecessors only, so a move is: remove those terms, reassign, add them back.

Compiled with numba (these kernels call each other, so they are numba dispatchers from
the start; numba compiles on first call); ``.py_func`` is the uncompiled source (compilation checks).
"""

from __future__ import annotations

import numba
import numpy as np

from dnnpart.interrupt import shield_numba_compiles

shield_numba_compiles()  # numba compilations are not cut by the stop backstop

kernel = numba.njit(cache=True, nogil=True)


@kernel
def node_term(u, sign, assign, cnt, loads, succ_ptr, succ_idx, edge_cost, node_time,
              out_cost, uniform, is_acc):  # type: ignore[no-untyped-def]
    """Add (sign=+1) or remove (sign=-1) the load term of node ``u``."""
    du = assign[u]
    loads[du] += sign * node_time[u, du]
    deg = succ_ptr[u + 1] - succ_ptr[u]
    if uniform[u]:
        if is_acc[du] and deg - cnt[u, du] > 0:
            loads[du] += sign * out_cost[u]
        for x in range(loads.shape[0]):
            if x != du and is_acc[x] and cnt[u, x] > 0:
                loads[x] += sign * out_cost[u]
    else:
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            dv = assign[succ_idx[e]]
            if dv != du:
                if is_acc[du]:
                    loads[du] += sign * edge_cost[e]
                if is_acc[dv]:
                    loads[dv] += sign * edge_cost[e]


@kernel
def move_node(w, target, assign, cnt, loads, memory, node_memory, succ_ptr, succ_idx,
              pred_ptr, pred_idx, edge_cost, node_time, out_cost, uniform, is_acc):  # type: ignore[no-untyped-def]
    """Reassign node ``w`` to ``target``, keeping loads, memory and counters exact."""
    source = assign[w]
    if source == target:
        return
    node_term(w, -1.0, assign, cnt, loads, succ_ptr, succ_idx, edge_cost, node_time,
              out_cost, uniform, is_acc)
    for e in range(pred_ptr[w], pred_ptr[w + 1]):
        node_term(pred_idx[e], -1.0, assign, cnt, loads, succ_ptr, succ_idx, edge_cost,
                  node_time, out_cost, uniform, is_acc)
    for e in range(pred_ptr[w], pred_ptr[w + 1]):
        u = pred_idx[e]
        cnt[u, source] -= 1
        cnt[u, target] += 1
    assign[w] = target
    memory[source] -= node_memory[w]
    memory[target] += node_memory[w]
    node_term(w, 1.0, assign, cnt, loads, succ_ptr, succ_idx, edge_cost, node_time,
              out_cost, uniform, is_acc)
    for e in range(pred_ptr[w], pred_ptr[w + 1]):
        node_term(pred_idx[e], 1.0, assign, cnt, loads, succ_ptr, succ_idx, edge_cost,
                  node_time, out_cost, uniform, is_acc)


@kernel
def descend(assign, cnt, loads, memory, capacity, node_memory, unit_ptr, unit_nodes,
            allowed, succ_ptr, succ_idx, pred_ptr, pred_idx, edge_cost, node_time,
            out_cost, uniform, is_acc, max_iterations):  # type: ignore[no-untyped-def]
    """Apply the best single-unit move until none improves (memory excess, max load).

    ``allowed[unit, device]`` says whether the unit may go to the device. Returns the number
    of moves made.
    """
    n_units = unit_ptr.shape[0] - 1
    d = loads.shape[0]
    moves = 0
    while moves < max_iterations:
        excess = 0.0
        for x in range(d):
            if memory[x] > capacity[x]:
                excess += memory[x] - capacity[x]
        best_excess = excess
        best_load = loads.max()
        best_unit = -1
        best_target = -1
        for unit in range(n_units):
            first = unit_nodes[unit_ptr[unit]]
            source = assign[first]
            for target in range(d):
                if target == source or not allowed[unit, target]:
                    continue
                for i in range(unit_ptr[unit], unit_ptr[unit + 1]):
                    move_node(unit_nodes[i], target, assign, cnt, loads, memory, node_memory,
                              succ_ptr, succ_idx, pred_ptr, pred_idx, edge_cost, node_time,
                              out_cost, uniform, is_acc)
                new_excess = 0.0
                for x in range(d):
                    if memory[x] > capacity[x]:
                        new_excess += memory[x] - capacity[x]
                new_load = loads.max()
                tol = 1e-9 * max(1.0, best_load)
                if new_excess < best_excess - tol or (
                    new_excess <= best_excess + tol and new_load < best_load - tol
                ):
                    best_excess = new_excess
                    best_load = new_load
                    best_unit = unit
                    best_target = target
                for i in range(unit_ptr[unit], unit_ptr[unit + 1]):
                    move_node(unit_nodes[i], source, assign, cnt, loads, memory, node_memory,
                              succ_ptr, succ_idx, pred_ptr, pred_idx, edge_cost, node_time,
                              out_cost, uniform, is_acc)
        if best_unit < 0:
            break
        for i in range(unit_ptr[best_unit], unit_ptr[best_unit + 1]):
            move_node(unit_nodes[i], best_target, assign, cnt, loads, memory, node_memory,
                      succ_ptr, succ_idx, pred_ptr, pred_idx, edge_cost, node_time, out_cost,
                      uniform, is_acc)
        moves += 1
    return moves


def initial_state(assign, n_devices, succ_ptr, succ_idx, edge_cost, node_time, out_cost,
                  uniform, is_acc, node_memory):  # type: ignore[no-untyped-def]
    """Counters, loads and memory of an assignment (plain numpy; run once per restart)."""
    n = assign.shape[0]
    src = np.repeat(np.arange(n), np.diff(succ_ptr))
    cnt = np.zeros((n, n_devices), np.int64)
    np.add.at(cnt, (src, assign[succ_idx]), 1)
    loads = np.zeros(n_devices)
    for u in range(n):
        node_term(u, 1.0, assign, cnt, loads, succ_ptr, succ_idx, edge_cost, node_time,
                  out_cost, uniform, is_acc)
    memory = np.bincount(assign, weights=node_memory, minlength=n_devices).astype(np.float64)
    return cnt, loads, memory
