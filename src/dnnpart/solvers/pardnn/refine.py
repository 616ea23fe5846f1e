"""Emulator-scored refinement of a placement along its critical chain (ours, not paper 2's).

Paper 2 stops after LFLAM (and the memory heuristics); ``--method pardnn`` adds this
post-pass (option ``refine_evals``, ``docs/methods/pardnn.md``, "Step-1 portfolio and refinement").
Reason: on unrolled LSTMs (CCR ~4, below the paper's threshold of 10, so LFLAM looks ahead
only for totally communicating clusters) the level-aware balancing leaves transfers and busy
devices on the emulated critical path that one move of one node removes.

* **Critical chain.** From the node finishing last, walk back: when a node started after it
  was ready, its device was busy and the chain continues with the op that ran before it
  there ("busy" node); otherwise it continues with the input that arrived last (its producer's
  finish for a local input, the transfer's arrival for a remote one), and a remote input is
  a "remote" edge of the chain.
* **Moves.** For every remote edge ``u -> v`` of the chain: ``v`` to ``u``'s device and
  ``u`` to ``v``'s; for every busy node, to each other device holding one of its neighbours
  (lowest index first). They are tried alternately by largest delay (the edge's transfer
  time, the node's wait for its device) and from the end of the schedule backwards: measured
  on the captured training graphs, delay order alone found the large gains on Char-CRN and
  the transformer but stalled on Word-RNN at K = 8 (1.070 x LC+GLB against 1.050 for
  chain order), chain order alone the reverse; alternating kept most of both. A node moves
  with its colocation group (through its leader); pinned nodes never move.
* **Acceptance.** The first move whose emulated makespan is strictly lower is kept and the
  chain is recomputed; the pass stops when no move of the chain improves or after
  ``max_evals`` emulations (or ``time_limit`` seconds: the only source of run-to-run
  difference, as for every time-limited method). The result is never worse than the input.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dnnpart.solvers.pardnn.inputs import FloatArray, Int32Array, IntArray


class Emulated(Protocol):
    start: FloatArray
    finish: FloatArray
    ready: FloatArray
    makespan: float
    transfers: tuple[IntArray, IntArray, FloatArray, FloatArray]


@dataclass(frozen=True, slots=True)
class Refined:
    """The refined placement, its makespan, moves kept and emulations spent."""

    device: IntArray
    makespan: float
    moves: int
    evals: int


class Arrivals:
    """When each transfer ``(node, device)`` of an emulation arrives, looked up by binary
    search over sorted keys (a dict of the ~1M transfers of a 200k-node graph cost 0.7 s per
    emulation to build, for the few thousand lookups a chain makes). For a pair sent twice
    the later-listed transfer counts, as a dict built from the list would keep it.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> s = NS(transfers=(np.array([0, 1, 0]), np.array([1, 0, 1]), np.zeros(3), np.array([2., 4., 6.])))
    >>> a = Arrivals(s)
    >>> a.get(0, 1, -1.0), a.get(1, 0, -1.0), a.get(1, 1, -1.0), a.get(5, 9, -1.0)
    (6.0, 4.0, -1.0, -1.0)
    """

    __slots__ = ("_ends", "_keys", "_width")

    def __init__(self, s: Emulated) -> None:
        xs, xd, _, xe = s.transfers
        self._width = int(xd.max()) + 1 if xd.size else 1
        keys = np.asarray(xs, np.int64) * self._width + np.asarray(xd, np.int64)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._ends = np.asarray(xe, np.float64)[order]

    def get(self, u: int, d: int, default: float) -> float:
        """Arrival of ``u``'s output on device ``d``, else ``default``."""
        one = self.lookup(np.array([u], np.int64), np.array([d], np.int64), np.array([default]))
        return float(one[0])

    def lookup(self, u: IntArray, d: IntArray, default: FloatArray) -> FloatArray:
        """:meth:`get` for arrays of pairs at once."""
        out = np.array(default, dtype=np.float64, copy=True)
        ok = np.flatnonzero((d >= 0) & (d < self._width))
        if ok.size == 0 or self._keys.size == 0:
            return out
        key = u[ok].astype(np.int64) * self._width + d[ok]
        i = np.searchsorted(self._keys, key, side="right") - 1
        hit = i >= 0
        hit[hit] = self._keys[i[hit]] == key[hit]
        out[ok[hit]] = self._ends[i[hit]]
        return out


def latest_inputs(pred_ptr: IntArray, pred_idx: Int32Array, device: IntArray, finish: FloatArray,
                  arrivals: Arrivals) -> IntArray:
    """Per node, the input that is there last (its producer's finish on the same device, the
    transfer's arrival from another; the first of equal ones in predecessor order), ``-1``
    for a node without inputs: what the chain walk follows, for every node at once.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> s = NS(transfers=(np.array([0]), np.array([1]), np.zeros(1), np.array([9.0])))
    >>> # 0 -> 2, 1 -> 2; 0 on device 0, 1 and 2 on device 1: 0's output arrives at 9
    >>> latest_inputs(np.array([0, 0, 0, 2]), np.array([0, 1]), np.array([0, 1, 1]),
    ...               np.array([1.0, 5.0, 10.0]), Arrivals(s)).tolist()
    [-1, -1, 0]
    """
    n = device.shape[0]
    counts = np.diff(pred_ptr)
    best = np.full(n, -1, np.int64)
    if pred_idx.size == 0:
        return best
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    u = pred_idx.astype(np.int64)
    at = finish[u].astype(np.float64)
    far = np.flatnonzero(device[u] != device[owner])
    at[far] = arrivals.lookup(u[far], device[owner[far]], at[far])
    has = np.flatnonzero(counts > 0)
    starts = pred_ptr[has]
    top = np.repeat(np.maximum.reduceat(at, starts), counts[has])
    where = np.where(at == top, np.arange(at.size), at.size)
    best[has] = u[np.minimum.reduceat(where, starts)]
    return best


def critical_chain(
    pred_ptr: IntArray, pred_idx: Int32Array, device: IntArray, s: Emulated,
) -> tuple[list[tuple[int, int]], list[int]]:
    remote, busy, _ = chain_walk(pred_ptr, pred_idx, device, s)
    return remote, busy


def chain_walk(
    pred_ptr: IntArray, pred_idx: Int32Array, device: IntArray, s: Emulated,
    arrivals: Arrivals | None = None,
) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """``(remote edges, busy nodes, chain)`` of the emulated critical chain, from its end
    backwards; ``arrivals``: ``s``'s transfers (:class:`Arrivals`), when already built.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> # a -> b -> c, b on device 1 (a transfer of 1 each way), all ops of length 1
    >>> s = NS(start=np.array([0., 2., 4.]), finish=np.array([1., 3., 5.]),
    ...        ready=np.array([0., 2., 4.]), transfers=(np.array([0, 1]), np.array([1, 0]),
    ...        np.array([1., 3.]), np.array([2., 4.])))
    >>> critical_chain(np.array([0, 0, 1, 2]), np.array([0, 1]), np.array([0, 1, 0]), s)
    ([(1, 2), (0, 1)], [])
    """
    start, finish, ready = s.start, s.finish, s.ready
    arrive = arrivals if arrivals is not None else Arrivals(s)
    n = device.shape[0]
    if n == 0:
        return [], [], []
    order = np.lexsort((np.arange(n), start, device))
    prev = np.full(n, -1, np.int64)
    same = device[order[1:]] == device[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    latest = latest_inputs(pred_ptr, pred_idx, device, finish, arrive).tolist()
    waited = ((start > ready) & (prev >= 0)).tolist()
    prev_of, dev = prev.tolist(), device.tolist()
    remote: list[tuple[int, int]] = []
    busy: list[int] = []
    v = int(np.argmax(finish))
    nodes = [v]
    for _ in range(2 * n):  # each step goes to an earlier op: at most n steps
        if waited[v]:
            busy.append(v)
            v = prev_of[v]
            nodes.append(v)
            continue
        best = latest[v]
        if best < 0:
            break
        if dev[best] != dev[v]:
            remote.append((best, v))
        v = best
        nodes.append(v)
    return remote, busy, nodes




def candidates(
    pred_ptr: IntArray, pred_idx: Int32Array, succ_ptr: IntArray, succ_idx: Int32Array, device: IntArray,
    s: Emulated, order: str = "mixed",
) -> list[tuple[int, int]]:
    """Moves ``(node, device)`` to try for the emulated critical chain (see the module).

    ``order``: ``chain`` (from the end of the schedule backwards), ``delay`` (largest delay
    first: a remote edge's transfer time, a busy node's wait) or ``mixed`` (alternately the
    next of each, the default).
    """
    arrive = Arrivals(s)
    remote, busy, _ = chain_walk(pred_ptr, pred_idx, device, s, arrive)
    scored: list[tuple[float, int, int, int]] = []
    i = 0
    for u, v in remote:
        delay = arrive.get(u, int(device[v]), float(s.finish[u])) - float(s.finish[u])
        scored += [(-delay, i, v, int(device[u])), (-delay, i + 1, u, int(device[v]))]
        i += 2
    for v in busy:
        wait = float(s.start[v] - s.ready[v])
        near = np.concatenate((pred_idx[pred_ptr[v]:pred_ptr[v + 1]], succ_idx[succ_ptr[v]:succ_ptr[v + 1]]))
        for d in sorted(set(device[near].tolist())):
            if d != device[v]:
                scored.append((-wait, i, v, d))
                i += 1
    chain_order = [(x, d) for _, _, x, d in scored]
    by_delay = [(x, d) for _, _, x, d in sorted(scored)]
    if order == "delay":
        return by_delay
    if order == "chain":
        return chain_order
    mixed: list[tuple[int, int]] = []  # alternately the largest delay and the latest on the chain
    for a, b in zip(by_delay, chain_order, strict=True):
        mixed += [a, b]
    return mixed


def refine(
    device: IntArray,
    emulate: Callable[[IntArray], Emulated],
    *,
    pred_ptr: IntArray,
    pred_idx: Int32Array,
    succ_ptr: IntArray,
    succ_idx: Int32Array,
    k: int,
    variable: IntArray | None = None,
    fixed: IntArray | None = None,
    max_evals: int = 200,
    time_limit: float | None = None,
    stop: Callable[[], bool] | None = None,
) -> Refined:
    """Move single nodes (with their groups) off the emulated critical chain; see the module.

    ``device`` holds local devices ``0..k-1`` for the nodes that may move; ``variable``
    (node -> leader, ``-1`` = free or leader) and ``fixed`` (node -> pinned device, ``-1`` =
    free) constrain the moves; ``device`` is not modified. ``stop`` (e.g. a stopwatch's
    ``expired``, true on Ctrl-C) ends the pass like the budget, with the best placement so far.
    """
    began = time.perf_counter()
    device = np.asarray(device, np.int64).copy()
    n = device.shape[0]
    var = np.full(n, -1, np.int64) if variable is None else np.asarray(variable, np.int64)
    fix = np.full(n, -1, np.int64) if fixed is None else np.asarray(fixed, np.int64)
    groups: dict[int, list[int]] = {}
    for r in np.flatnonzero(var >= 0).tolist():
        groups.setdefault(int(var[r]), [int(var[r])]).append(r)
    s = emulate(device)
    best = float(s.makespan)
    moves = evals = 0
    while evals < max_evals:
        cands = candidates(pred_ptr, pred_idx, succ_ptr, succ_idx, device, s)
        improved = False
        tried: set[tuple[int, int]] = set()
        for x, d in cands:
            leader = int(var[x]) if var[x] >= 0 else x
            if (leader, d) in tried or not 0 <= d < k or fix[leader] >= 0 or device[leader] == d:
                continue
            if evals >= max_evals or (time_limit is not None and time.perf_counter() - began > time_limit) \
                    or (stop is not None and stop()):
                return Refined(device, best, moves, evals)
            tried.add((leader, d))
            members = groups.get(leader, [leader])
            old = device[members].copy()
            device[members] = d
            t = emulate(device)
            evals += 1
            if t.makespan < best:
                best, s, improved = float(t.makespan), t, True
                moves += 1
                break
            device[members] = old
        if not improved:
            break
    return Refined(device, best, moves, evals)

