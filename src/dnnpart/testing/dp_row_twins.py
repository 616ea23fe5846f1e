"""Plain-Python twins of the DP's row kernels (:mod:`dnnpart.solvers.dp.kernels`), written
separately from them: each row from the recurrence's definition.

A kernel walks the ideals below a row's ideal depth-first and prices each slice
incrementally as it grows. A twin sweeps those ideals in index order, keeps each ideal's
node set, prices every slice from scratch and gives each cell its least candidate. Same
signatures, same tables: tests swap a twin in for its kernel
(:func:`~dnnpart.solvers.dp.driver.run_dp` looks the kernels up by name) and compare.

What agrees:

* Each cell's value is the least over the same candidates. Sums are taken in another order,
  so values agree to the last bit where sums are exact (integer times, costs and memory, as
  in :func:`~dnnpart.testing.random_problem`), and to rounding otherwise.
* Back-pointers agree in value, not always in choice: among equal candidates the kernel
  keeps the first its walk meets.
* ``counters``: which slices :func:`fill_plain` and :func:`fill_replicated` price does not
  depend on the walk's order (a slice's bound only grows with it), so the twins count the
  same. :func:`fill_bounded` and :func:`fill_masked` count the slices below ``upper``: the
  kernels' cut falls as a row's live cells improve and prices only some of them (never a
  slice that could improve a cell, hence the same tables).

Only for small lattices: every row sweeps every ideal numbered before it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dnnpart.solvers.dp.kernels import (
    KIND_ACC,
    KIND_BASE,
    KIND_CPU,
    KIND_FEWER_ACC,
    KIND_FEWER_CPU,
    cell_is_live,
)

Arrays = tuple[Any, ...]
#: A slice's ``(comp_acc, comp_cpu, mem, comm_in, comm_out, bad_acc, bad_cpu)``.
Price = tuple[float, float, float, float, float, int, int]


def fill_plain(i_start: int, i_end: int, upper: float, lattice: Arrays, slices: Arrays,
               devices: Arrays, walk: Arrays, table: Arrays, counters: Any) -> Any:
    """Twin of :func:`dnnpart.solvers.dp.kernels.fill_plain`.

    Examples
    --------
    >>> import dnnpart.solvers.dp.driver as driver
    >>> from dnnpart.graph.stage_graph import build_stage_graph
    >>> from dnnpart.solvers.dp.ideals import enumerate_stage_ideals
    >>> from dnnpart.testing import chain_problem
    >>> p = chain_problem([4, 1, 1, 4], n_accelerators=2)
    >>> sg = build_stage_graph(p.graph)
    >>> kernel, driver.fill_plain = driver.fill_plain, fill_plain  # found by name
    >>> try:
    ...     out = driver.run_dp(p, sg, enumerate_stage_ideals(sg))
    ... finally:
    ...     driver.fill_plain = kernel
    >>> out.value, out.assignment.tolist(), out.slices_priced
    (5.0, [0, 0, 1, 1], 10)
    """
    nodes = _ideal_nodes(lattice)
    everything = np.ones((table[0].shape[1], table[0].shape[2]), np.bool_)
    for big in range(i_start, i_end):
        _fill_row(big, upper, nodes, lattice, slices, devices, table, counters, everything)
    return counters


def fill_bounded(i_start: int, i_end: int, upper: float, lattice: Arrays, slices: Arrays,
                 devices: Arrays, walk: Arrays, table: Arrays, counters: Any, bound: Arrays,
                 live: Any) -> Any:
    """Twin of :func:`dnnpart.solvers.dp.kernels.fill_bounded` (``live`` is not used)."""
    nodes = _ideal_nodes(lattice)
    for big in range(i_start, i_end):
        _fill_row(big, upper, nodes, lattice, slices, devices, table, counters,
                  _work_live(big, upper, bound, table[0].shape))
    return counters


def fill_masked(i_start: int, i_end: int, upper: float, lattice: Arrays, slices: Arrays,
                devices: Arrays, walk: Arrays, table: Arrays, counters: Any, bound: Arrays,
                live: Any, mask: Arrays) -> Any:
    """Twin of :func:`dnnpart.solvers.dp.kernels.fill_masked` (``live`` is not used)."""
    nodes = _ideal_nodes(lattice)
    mask_of, cell_mask = mask
    for big in range(i_start, i_end):
        kept = _work_live(big, upper, bound, table[0].shape) & (cell_mask[mask_of[big]] != 0)
        _fill_row(big, upper, nodes, lattice, slices, devices, table, counters, kept)
    return counters


def fill_replicated(i_start: int, i_end: int, upper: float, lattice: Arrays, slices: Arrays,
                    devices: Arrays, walk: Arrays, table: Arrays, counters: Any,
                    replicas: Arrays) -> Any:
    """Twin of :func:`dnnpart.solvers.dp.kernels.fill_replicated` (``rep_load`` is not
    used)."""
    max_rep_acc, max_rep_cpu, ar_acc, ar_cpu, _, prev_count = replicas
    dp, prev_lower, prev_kind = table
    n_acc, n_cpu = dp.shape[1] - 1, dp.shape[2] - 1
    acc_cap, cpu_cap, comm_scale, overlap = devices[2:]
    nodes = _ideal_nodes(lattice)

    def kinds(price: Price) -> tuple[bool, bool]:
        mem, bad_acc, bad_cpu = price[2], price[5], price[6]
        return (n_acc > 0 and bad_acc == 0 and mem <= acc_cap,
                n_cpu > 0 and bad_cpu == 0 and mem <= cpu_cap)

    def least_load(price: Price) -> float:
        # compute / k with its all-reduce: below every load on k replicas, growing with
        # the slice
        acc_ok, cpu_ok = kinds(price)
        comp_acc, comp_cpu, mem = price[:3]
        shares = [_on_replicas(comp_acc, mem * ar_acc, k, overlap)
                  for k in range(1, max_rep_acc + 1) if acc_ok]
        shares += [_on_replicas(comp_cpu, mem * ar_cpu, k, overlap)
                   for k in range(1, max_rep_cpu + 1) if cpu_ok]
        return min(shares, default=math.inf)

    for big in range(i_start, i_end):
        _clear_row(big, table)
        if big == 0:
            continue
        for lower, price in _reached_slices(big, nodes, lattice, slices, devices,
                                            lambda price: least_load(price) < upper, counters):
            comp_acc, comp_cpu, mem, comm_in, comm_out, _, _ = price
            acc_ok, cpu_ok = kinds(price)
            acc_load = _acc_load(comp_acc, comm_in, comm_out, comm_scale, overlap) if acc_ok else math.inf
            cpu_load = comp_cpu if cpu_ok else math.inf
            on_acc = {k: acc_load if k == 1 else _on_replicas(acc_load, mem * ar_acc, k, overlap)
                      for k in range(1, max_rep_acc + 1)}
            on_cpu = {k: cpu_load if k == 1 else _on_replicas(cpu_load, mem * ar_cpu, k, overlap)
                      for k in range(1, max_rep_cpu + 1)}
            for a in range(n_acc + 1):
                for c in range(n_cpu + 1):
                    options = [(max(dp[lower, a - k, c], load), KIND_ACC, k)
                               for k, load in on_acc.items() if k <= a]
                    options += [(max(dp[lower, a, c - k], load), KIND_CPU, k)
                                for k, load in on_cpu.items() if k <= c]
                    for value, kind, k in options:
                        if value < dp[big, a, c]:
                            dp[big, a, c] = value
                            prev_lower[big, a, c] = lower
                            prev_kind[big, a, c] = kind
                            prev_count[big, a, c] = k
        _fewer_devices(big, table)
    return counters


def _fill_row(big: int, upper: float, nodes: list[frozenset[int]], lattice: Arrays,
              slices: Arrays, devices: Arrays, table: Arrays, counters: Any, live: Any) -> None:
    """Row ``big`` of every unreplicated twin: the cells marked in ``live`` take the best
    slice whose compute on its kind of device is below ``upper``; no walk at all (the row
    stays ``inf``) without such a cell."""
    dp, prev_lower, prev_kind = table
    _clear_row(big, table)
    use_acc = bool(live[1:, :].any())
    use_cpu = bool(live[:, 1:].any())
    if big == 0 or not (use_acc or use_cpu):
        return
    acc_cap, cpu_cap, comm_scale, overlap = devices[2:]

    def kinds(price: Price) -> tuple[bool, bool]:
        comp_acc, comp_cpu, mem, _, _, bad_acc, bad_cpu = price
        return (use_acc and bad_acc == 0 and mem <= acc_cap and comp_acc < upper,
                use_cpu and bad_cpu == 0 and mem <= cpu_cap and comp_cpu < upper)

    for lower, price in _reached_slices(big, nodes, lattice, slices, devices,
                                        lambda price: any(kinds(price)), counters):
        comp_acc, comp_cpu, _, comm_in, comm_out, _, _ = price
        acc_ok, cpu_ok = kinds(price)
        acc_load = _acc_load(comp_acc, comm_in, comm_out, comm_scale, overlap) if acc_ok else math.inf
        cpu_load = comp_cpu if cpu_ok else math.inf
        for a, c in zip(*np.nonzero(live), strict=True):
            options = []
            if a > 0:
                options.append((max(dp[lower, a - 1, c], acc_load), KIND_ACC))
            if c > 0:
                options.append((max(dp[lower, a, c - 1], cpu_load), KIND_CPU))
            for value, kind in options:
                if value < dp[big, a, c]:
                    dp[big, a, c] = value
                    prev_lower[big, a, c] = lower
                    prev_kind[big, a, c] = kind
    _fewer_devices(big, table)


def _reached_slices(big: int, nodes: list[frozenset[int]], lattice: Arrays, slices: Arrays,
                    devices: Arrays, priced: Callable[[Price], bool],
                    counters: Any) -> list[tuple[int, Price]]:
    """The ideals ``J`` below ideal ``big`` whose slice ``big \\ J`` is priced, each with
    that price; ``counters[0]`` += their number, ``counters[1]`` += the number of slices
    reached but not priced.

    The walk goes from an ideal to the ideals one stage node below it (its down-edges),
    and on from each priced slice only (the slices below one that is not are larger: not
    priced either). So it reaches ``J`` when ``J`` is one node below ``big`` or below an
    ideal whose slice is priced; ideals are numbered after their subsets, so a sweep down
    the numbers meets every ideal after those above it.
    """
    down_ptr, _, down_lower = lattice
    reached = {int(j) for j in down_lower[down_ptr[big]:down_ptr[big + 1]]}
    out = []
    for j in range(big - 1, -1, -1):
        if j not in reached:
            continue
        price = _price(nodes[big] - nodes[j], slices, devices)
        if priced(price):
            counters[0] += 1
            reached.update(int(i) for i in down_lower[down_ptr[j]:down_ptr[j + 1]])
            out.append((j, price))
        else:
            counters[1] += 1
    return out


def _ideal_nodes(lattice: Arrays) -> list[frozenset[int]]:
    """Each ideal's stage nodes: an ideal is any ideal one down-edge below it plus that
    edge's node (ideals are numbered so that subsets come first)."""
    down_ptr, down_node, down_lower = lattice
    nodes: list[frozenset[int]] = []
    for i in range(down_ptr.shape[0] - 1):
        if down_ptr[i] == down_ptr[i + 1]:
            nodes.append(frozenset())
        else:
            e = down_ptr[i]
            nodes.append(nodes[down_lower[e]] | {int(down_node[e])})
    return nodes


def _price(stage_nodes: frozenset[int], slices: Arrays, devices: Arrays) -> Price:
    """``(comp_acc, comp_cpu, mem, comm_in, comm_out, bad_acc, bad_cpu)`` of the slice of
    ``stage_nodes``, from scratch: compute and memory summed over its original nodes
    (``bad_*``: those that cannot run on that kind), transfers by the evaluator's rule (a
    uniform node's output once per slice reading it, a non-uniform node's per edge)."""
    member_ptr, member_idx, succ_ptr, succ_idx, pred_ptr, pred_idx, pred_edge = slices[:7]
    edge_cost, node_cost, uniform, outdeg, memory = slices[7:]
    acc_time, cpu_time = devices[0], devices[1]
    inside = {int(member_idx[r]) for s in stage_nodes
              for r in range(member_ptr[s], member_ptr[s + 1])}
    comp_acc = sum(float(acc_time[x]) for x in inside if math.isfinite(acc_time[x]))
    comp_cpu = sum(float(cpu_time[x]) for x in inside if math.isfinite(cpu_time[x]))
    bad_acc = sum(1 for x in inside if not math.isfinite(acc_time[x]))
    bad_cpu = sum(1 for x in inside if not math.isfinite(cpu_time[x]))
    mem = sum(float(memory[x]) for x in inside)
    comm_out = 0.0
    for u in inside:
        edges = range(succ_ptr[u], succ_ptr[u + 1])
        if uniform[u]:
            if sum(1 for e in edges if int(succ_idx[e]) in inside) < outdeg[u]:
                comm_out += float(node_cost[u])
        else:
            comm_out += sum(float(edge_cost[e]) for e in edges if int(succ_idx[e]) not in inside)
    comm_in = 0.0
    senders: set[int] = set()
    for x in inside:
        for q in range(pred_ptr[x], pred_ptr[x + 1]):
            p = int(pred_idx[q])
            if p in inside:
                continue
            if uniform[p]:
                senders.add(p)
            else:
                comm_in += float(edge_cost[pred_edge[q]])
    comm_in += sum(float(node_cost[p]) for p in senders)
    return comp_acc, comp_cpu, mem, comm_in, comm_out, bad_acc, bad_cpu


def _acc_load(comp: float, comm_in: float, comm_out: float, comm_scale: float,
              overlap: int) -> float:
    """An accelerator's load (paper 1, appendix C.1): compute and scaled transfers, added
    (overlap ``"none"``), or compute against both directions or each one."""
    sent_in, sent_out = comm_in * comm_scale, comm_out * comm_scale
    if overlap == 0:
        return comp + sent_in + sent_out
    return max(comp, sent_in + sent_out) if overlap == 1 else max(comp, max(sent_in, sent_out))


def _on_replicas(load: float, sync: float, k: int, overlap: int) -> float:
    """A slice's load on ``k`` replicas (paper 1, appendix C.2): a ``k``-th of ``load``
    with the all-reduce ``(k - 1) / k * sync``, added (overlap ``"none"``) or max-ed."""
    share, allreduce = load / k, (k - 1) * sync / k
    return share + allreduce if overlap == 0 else max(share, allreduce)


def _work_live(big: int, upper: float, bound: Arrays, shape: tuple[int, ...]) -> Any:
    """The cells of row ``big`` the work bound keeps
    (:func:`~dnnpart.solvers.dp.kernels.cell_is_live`)."""
    work, total_work, inv_ratio = bound
    n_acc, n_cpu = shape[1] - 1, shape[2] - 1
    return np.array([[cell_is_live(work[big], total_work, upper, a, c, n_acc, n_cpu, inv_ratio)  # type: ignore[no-untyped-call]
                      for c in range(n_cpu + 1)] for a in range(n_acc + 1)], dtype=np.bool_)


def _clear_row(big: int, table: Arrays) -> None:
    dp, prev_lower, prev_kind = table
    dp[big] = 0.0 if big == 0 else math.inf
    prev_lower[big] = -1
    prev_kind[big] = KIND_BASE


def _fewer_devices(big: int, table: Arrays) -> None:
    """A split over at most ``a`` accelerators and ``c`` CPUs may use fewer."""
    dp, _, prev_kind = table
    for a in range(dp.shape[1]):
        for c in range(dp.shape[2]):
            if a > 0 and dp[big, a - 1, c] < dp[big, a, c]:
                dp[big, a, c] = dp[big, a - 1, c]
                prev_kind[big, a, c] = KIND_FEWER_ACC
            if c > 0 and dp[big, a, c - 1] < dp[big, a, c]:
                dp[big, a, c] = dp[big, a, c - 1]
                prev_kind[big, a, c] = KIND_FEWER_CPU
