"""Memory heuristic I (paper 2, §3.2.1): emulate, find the first overflow, move nodes away.

The framework-scheduler emulator and the Eq. 2 memory tracker are *not* here: the caller
passes ``emulate(device) -> schedule`` (the shared op-level emulator of ``dnnpart.simulate``,
whose result carries ``start``, ``finish``, ``peak_memory`` and per-device memory curves with
``times`` / ``at``). Every round re-emulates, so success is always the emulator's verdict.

One round relieves every device over its cap (largest excess first) against one emulation,
at its first overflow and then at its peak:

* ``t*`` is the first curve time where ``pe`` holds more than its cap; ``O`` the excess there.
* **Memory potential** ``M_pot(n, t*)`` of a movable node ``n`` on ``pe`` (not pinned, not
  already moved, not a reference op -- those follow their variable): its own bytes if it is
  residual, or normal and alive on ``pe`` at ``t*`` (``st(n) <= t* <= `` its last local
  consumer's start or its finish), plus the bytes of every input ``u`` held on ``pe`` at
  ``t*`` only for ``n`` (``ft(u) <= t* <= st(n)`` and ``n`` is the one consumer of ``u`` on
  ``pe`` starting at or after ``t*``; residual inputs excluded, they stay anyway).
* **move_cost** (Eq. 4): ``comp(n)`` + the communication of ``n`` with its neighbours on
  ``pe`` (which moving it creates).
* **Greedy 0-1 min-knapsack over two heaps**: heap A by ``move_cost / M_pot``, heap B (nodes
  with ``M_pot > O``) by ``move_cost``; the tops of both are taken, the one of lower
  ``move_cost`` is moved (ties: heap A's), the other goes back. Stops once the moved
  potentials cover ``O``.
* **Target device** (the paper is silent): a move loads the target over the node's whole
  lifetime -- from the earliest finish of its inputs to the latest start of its consumers,
  the whole run for a residual node -- so the target's *highest* consumption over that
  window (from its emulated curve, plus what this round already moved there with
  overlapping windows) plus the node's footprint (its own bytes and its non-residual inputs
  not already there) must stay within the cap. Among the devices that pass, the one of
  lowest such consumption wins, ties to the most communication with ``n``, then the lowest
  index. A node no device can take is dropped for the round.

A moved node is never moved again. The handler stops with success when no device exceeds
its cap, and with failure when a round moves nothing or ``max_rounds`` is reached, or when
the ``time_limit`` would be passed: before each device's relief and before each round's
closing emulation, the time left must cover one more emulation (as long as the last one
took), so a run ends within about one relief step of its budget instead of finishing a
round past it. A failure
returns the best placement seen (smallest worst excess over the caps, the input placement
included) and names, for it, the device, the node running there at ``t*`` (or the last one
started before), ``t*`` and the bytes over the cap.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dnnpart.graph import RESIDUAL
from dnnpart.solvers.pardnn.inputs import Costs, FloatArray, IntArray

#: Default share of each device's memory heuristic I may use (paper 2, §4: 10% spared).
MEMORY_FRACTION = 0.9


class Curve(Protocol):
    times: FloatArray
    at: FloatArray


class Schedule(Protocol):
    start: FloatArray
    finish: FloatArray
    peak_memory: FloatArray
    memory: Sequence[Curve] | None


@dataclass(frozen=True, slots=True)
class Overflow:
    """Where heuristic I gave up: device, time, the node running there, bytes over the cap."""

    device: int
    time: float
    node: int
    excess_bytes: float


@dataclass(slots=True, eq=False)
class HeuristicOneResult:
    device: IntArray
    success: bool
    moved_nodes: int
    rounds: int
    peaks: FloatArray
    failure: Overflow | None = None


def first_overflow(curve: Curve, cap: float) -> tuple[float, float] | None:
    """``(t*, excess)`` at the first curve time above ``cap``, or ``None``."""
    over = np.flatnonzero(curve.at > cap)
    if over.size == 0:
        return None
    i = int(over[0])
    return float(curve.times[i]), float(curve.at[i] - cap)


def memory_potentials(
    costs: Costs, device: IntArray, mem: FloatArray, residual: np.ndarray, start: FloatArray,
    finish: FloatArray, pe: int, t: float,
) -> FloatArray:
    """``M_pot(n, t)`` for every node (0 off ``pe``), as in the module docstring."""
    from dnnpart.solvers.pardnn import kernels

    pot: FloatArray = kernels.memory_potentials_kernel(
        costs.succ_ptr, costs.succ_idx, np.asarray(device, np.int64), np.asarray(mem, np.float64),
        np.asarray(residual, np.bool_), np.asarray(start, np.float64), np.asarray(finish, np.float64),
        int(pe), float(t))
    return pot


def move_costs(costs: Costs, device: IntArray) -> FloatArray:
    """Eq. 4 for every node: comp + communication with neighbours on its own device."""
    src, dst = costs.edge_sources(), costs.succ_idx
    same = device[src] == device[dst]
    cost = costs.comp.copy()
    np.add.at(cost, src[same], costs.comm[same])
    np.add.at(cost, dst[same], costs.comm[same])
    return cost


def _comm_with(costs: Costs, device: IntArray, v: int, k: int) -> FloatArray:
    out = np.zeros(k)
    succ = costs.succ_idx[costs.succ_ptr[v]:costs.succ_ptr[v + 1]]
    np.add.at(out, device[succ], costs.comm[costs.succ_ptr[v]:costs.succ_ptr[v + 1]])
    lo, hi = costs.pred_ptr[v], costs.pred_ptr[v + 1]
    np.add.at(out, device[costs.pred_idx[lo:hi]], costs.comm[costs.pred_edge[lo:hi]])
    return out


def heuristic_one(
    costs: Costs,
    device: IntArray,
    *,
    mem: FloatArray,
    memory_class: np.ndarray,
    caps: FloatArray,
    emulate: Callable[[IntArray], Schedule],
    variable: IntArray | None = None,
    fixed: np.ndarray | None = None,
    max_rounds: int | None = None,
    time_limit: float | None = None,
    stop: Callable[[], bool] | None = None,
) -> HeuristicOneResult:
    """Move nodes until the emulated memory of every device stays within ``caps``.

    ``caps`` are the usable bytes per device (already times ``memory_fraction``); devices
    at or beyond ``len(caps)`` are not managed. ``device`` is not modified. ``max_rounds``
    (default |V|), ``time_limit`` (seconds) and ``stop`` (e.g. a stopwatch's ``expired``,
    true on Ctrl-C; checked where the time is) end the search as a failure.
    """
    began = time.perf_counter()
    device = np.asarray(device, np.int64).copy()
    n, k = costs.n, len(caps)
    residual = np.asarray(memory_class) == RESIDUAL
    var = np.full(n, -1, np.int64) if variable is None else np.asarray(variable, np.int64)
    locked = np.zeros(n, np.bool_) if fixed is None else np.asarray(fixed, np.bool_).copy()
    locked |= var >= 0  # reference ops move with their variable only
    followers: dict[int, list[int]] = {}
    for r in np.flatnonzero(var >= 0).tolist():
        followers.setdefault(int(var[r]), []).append(r)
    limit = max_rounds if max_rounds is not None else max(n, 1)
    moved = 0
    rounds = 0
    best: tuple[float, IntArray, int, Any] | None = None  # (worst excess, device, moved, schedule)
    deadline = math.inf if time_limit is None else began + time_limit

    def halt(at: float, emulation_s: float) -> bool:
        return at + emulation_s > deadline or (stop is not None and stop())

    while True:
        t_emulate = time.perf_counter()
        sched = emulate(device)
        now = time.perf_counter()
        emulation_s = now - t_emulate
        peaks = np.asarray(sched.peak_memory, np.float64)[:k]
        excess = peaks - caps
        if np.all(excess <= 0):
            return HeuristicOneResult(device, True, moved, rounds, peaks)
        if best is None or float(excess.max()) < best[0]:
            best = (float(excess.max()), device.copy(), moved, sched)
        # a round ends with an emulation: do not start one the budget cannot finish
        if rounds >= limit or sched.memory is None or halt(now, emulation_s):
            return _failure(best, rounds, caps)
        rounds += 1
        start, finish = np.asarray(sched.start), np.asarray(sched.finish)
        cost = move_costs(costs, device)
        window_lo, window_hi = lifetimes(costs, start, finish, residual)
        added: list[list[tuple[float, float, float]]] = [[] for _ in range(k)]
        moved_now = 0
        for pe in np.argsort(-excess, kind="stable").tolist():  # every overflowing device, worst first
            if halt(time.perf_counter(), emulation_s):
                return _failure(best, rounds, caps)  # the budget is checked inside rounds too
            found = first_overflow(sched.memory[pe], float(caps[pe])) if excess[pe] > 0 else None
            if found is None:
                continue
            # the first overflow, then the peak (a later time, usually) against the same emulation
            curve = sched.memory[pe]
            i = int(np.argmax(curve.at))
            for point in (found, (float(curve.times[i]), float(curve.at[i] - caps[pe]))):
                if point is not found and point[0] == found[0]:
                    continue
                count = _relieve(costs, device, pe, point, caps, sched, mem, residual, locked, cost,
                                 window_lo, window_hi, added, followers)
                moved += count
                moved_now += count
        if moved_now == 0 or halt(time.perf_counter(), emulation_s):
            return _failure(best, rounds, caps)


def _relieve(
    costs: Costs, device: IntArray, pe: int, found: tuple[float, float], caps: FloatArray,
    sched: Schedule, mem: FloatArray, residual: np.ndarray, locked: np.ndarray, cost: FloatArray,
    window_lo: FloatArray, window_hi: FloatArray, added: list[list[tuple[float, float, float]]],
    followers: dict[int, list[int]],
) -> int:
    """Greedy min-knapsack for the first overflow of ``pe``; moves nodes in place, returns how many."""
    k = len(caps)
    t, overflow = found
    curves = sched.memory
    assert curves is not None
    start, finish = np.asarray(sched.start), np.asarray(sched.finish)
    pot = memory_potentials(costs, device, mem, residual, start, finish, pe, t)
    cand = np.flatnonzero((pot > 0) & ~locked & (device == pe))
    heap_a = [(float(cost[v] / pot[v]), int(v)) for v in cand]
    heap_b = [(float(cost[v]), int(v)) for v in cand if pot[v] > overflow]
    heapq.heapify(heap_a)
    heapq.heapify(heap_b)
    taken: set[int] = set()
    freed = 0.0
    moved = 0
    while freed < overflow and (heap_a or heap_b):
        while heap_a and heap_a[0][1] in taken:
            heapq.heappop(heap_a)
        while heap_b and heap_b[0][1] in taken:
            heapq.heappop(heap_b)
        if not heap_a and not heap_b:
            break
        a = heap_a[0][1] if heap_a else -1
        b = heap_b[0][1] if heap_b else -1
        v = a if b < 0 or (a >= 0 and cost[a] <= cost[b]) else b
        heapq.heappop(heap_a if v == a else heap_b)
        taken.add(v)
        comm = _comm_with(costs, device, v, max(k, int(device.max()) + 1))[:k]
        foot = footprints(costs, device, mem, residual, v, k)
        lo, hi = float(window_lo[v]), float(window_hi[v])
        level = [
            window_max(curves[q], lo, hi) + sum(x for x0, x1, x in added[q] if x0 <= hi and lo <= x1)
            for q in range(k)
        ]
        ok = [q for q in range(k) if q != pe and level[q] + foot[q] <= caps[q]]
        if not ok:
            continue
        q = min(ok, key=lambda d: (level[d], -comm[d], d))
        device[v] = q
        for r in followers.get(v, []):
            device[r] = q
        locked[v] = True
        added[q].append((lo, hi, float(foot[q])))
        freed += float(pot[v])
        moved += 1
    return moved


def lifetimes(
    costs: Costs, start: FloatArray, finish: FloatArray, residual: np.ndarray
) -> tuple[FloatArray, FloatArray]:
    """Window in which a moved node (and the inputs it pulls) can occupy its new device.

    From the earliest finish of its inputs (or its own start) to the latest start of its
    consumers (or its own finish); the whole run for residual nodes.
    """
    src, dst = costs.edge_sources(), costs.succ_idx
    lo = start.copy()
    np.minimum.at(lo, dst, finish[src])
    hi = finish.copy()
    np.maximum.at(hi, src, start[dst])
    lo[residual] = -np.inf
    hi[residual] = np.inf
    return lo, hi


def window_max(curve: Curve, lo: float, hi: float) -> float:
    """Largest curve value over ``[lo, hi]`` (the value in force at ``lo`` included)."""
    times, at = curve.times, curve.at
    if times.size == 0:
        return 0.0
    i0 = max(int(np.searchsorted(times, lo, side="right")) - 1, 0)
    i1 = max(int(np.searchsorted(times, hi, side="right")), i0 + 1)
    return float(at[i0:i1].max())


def footprints(costs: Costs, device: IntArray, mem: FloatArray, residual: np.ndarray, v: int,
               k: int) -> FloatArray:
    """Bytes node ``v`` would add to each device: its own plus inputs not already there."""
    foot = np.full(k, float(mem[v]))
    if residual[v]:
        return foot
    lo, hi = costs.pred_ptr[v], costs.pred_ptr[v + 1]
    for u in costs.pred_idx[lo:hi].tolist():
        if mem[u] > 0 and not residual[u]:
            foot += mem[u]
            if 0 <= device[u] < k:
                foot[device[u]] -= mem[u]
    return foot


def _failure(
    best: tuple[float, IntArray, int, Any] | None, rounds: int, caps: FloatArray
) -> HeuristicOneResult:
    """Report on the best placement seen (least worst excess): its first overflow."""
    assert best is not None
    _, device, moved, sched = best
    k = len(caps)
    peaks = np.asarray(sched.peak_memory, np.float64)[:k]
    pe = int(np.argmax(peaks - caps))
    curve = None if sched.memory is None else sched.memory[pe]
    found = first_overflow(curve, float(caps[pe])) if curve is not None else None
    t, overflow = found if found is not None else (float("nan"), float(peaks[pe] - caps[pe]))
    start, finish = np.asarray(sched.start), np.asarray(sched.finish)
    on = np.flatnonzero(device == pe)
    node = -1
    if on.size and not math.isnan(t):
        running = on[(start[on] <= t) & (t <= finish[on])]
        before = on[start[on] <= t]
        if running.size:
            node = int(running[np.argmax(start[running])])
        elif before.size:
            node = int(before[np.argmax(start[before])])
    return HeuristicOneResult(device, False, moved, rounds, peaks, Overflow(pe, t, node, overflow))
