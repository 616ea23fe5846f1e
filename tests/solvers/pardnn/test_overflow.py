"""Memory heuristic I's overflow handler, driven by a brute-force test double of the emulator.

The double is *not* the framework emulator (that is ``dnnpart.simulate``): it schedules every
op at its earliest start with unlimited parallelism and evaluates Eq. 2 term by term at every
event time. The handler only needs *some* schedule with memory curves; its success must be
that schedule's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnpart.graph import NORMAL, REFERENCE, RESIDUAL
from dnnpart.solvers.pardnn import Costs
from dnnpart.solvers.pardnn.overflow import first_overflow, heuristic_one, move_costs


@dataclass
class Curve:
    times: np.ndarray
    at: np.ndarray


@dataclass
class Sched:
    start: np.ndarray
    finish: np.ndarray
    peak_memory: np.ndarray
    memory: list[Curve]


def double(costs: Costs, mem: np.ndarray, cls: np.ndarray, k: int):  # type: ignore[no-untyped-def]
    src, dst = costs.edge_sources(), costs.succ_idx

    def emulate(device: np.ndarray) -> Sched:
        start = np.zeros(costs.n)
        for u, v, w in zip(src, dst, costs.comm, strict=True):  # edges sorted by source: topological
            start[v] = max(start[v], start[u] + costs.comp[u] + (w if device[u] != device[v] else 0.0))
        finish = start + costs.comp
        times = np.unique(np.concatenate((start, finish)))
        curves, peaks = [], np.zeros(k)
        for d in range(k):
            at = []
            for t in times:
                held = set()
                for x in range(costs.n):
                    if device[x] == d and cls[x] == RESIDUAL:
                        held.add(x)
                    elif device[x] == d and cls[x] == NORMAL and start[x] <= t <= finish[x]:
                        held.add(x)
                for u, v in zip(src, dst, strict=True):
                    if not (device[u] == d and cls[u] == RESIDUAL) and finish[u] <= t and device[v] == d \
                            and start[v] >= t:
                        held.add(int(u))
                at.append(sum(mem[x] for x in held))
            curves.append(Curve(times, np.array(at)))
            peaks[d] = max(at) if at else 0.0
        return Sched(start, finish, peaks, curves)

    return emulate


def training_like(rng: np.random.Generator, n: int) -> tuple[Costs, np.ndarray, np.ndarray, np.ndarray]:
    cls = np.full(n, NORMAL, np.int8)
    n_var = max(1, n // 5)
    cls[:n_var] = RESIDUAL
    src, dst = [], []
    for v in range(n_var, n):
        for u in set(rng.integers(0, v, size=int(rng.integers(1, 3))).tolist()):
            src.append(u)
            dst.append(v)
    variable = np.full(n, -1)
    for r in rng.choice(np.arange(n_var, n), size=max(1, n // 10), replace=False):
        ins = [u for u, v in zip(src, dst, strict=True) if v == r and cls[u] == RESIDUAL]
        if ins:
            cls[r] = REFERENCE
            variable[r] = min(ins)
    normal_mem = np.where(cls == NORMAL, rng.integers(1, 10, n), 0)
    mem = np.where(cls == RESIDUAL, rng.integers(1, 30, n), normal_mem)
    costs = Costs.from_edges(n, src, dst, comp=rng.integers(1, 5, n).astype(float),
                             comm=rng.integers(0, 3, len(src)).astype(float))
    return costs, mem.astype(float), cls, variable


def overloaded(seed: int, count: int):  # type: ignore[no-untyped-def]
    """``count`` random training-like instances with everything on device 0 and caps of
    0.5-0.9 x that placement's peak: ``(n, k, costs, mem, cls, variable, emulate, device, caps)``."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n, k = int(rng.integers(6, 22)), int(rng.integers(2, 4))
        costs, mem, cls, variable = training_like(rng, n)
        emulate = double(costs, mem, cls, k)
        device = np.zeros(n, np.int64)  # everything on device 0: overflows to fix
        device[variable >= 0] = device[variable[variable >= 0]]
        caps = np.full(k, float(rng.uniform(0.5, 0.9)) * emulate(device).peak_memory.max())
        yield n, k, costs, mem, cls, variable, emulate, device, caps


def test_success_is_the_emulators_verdict_and_references_follow() -> None:
    successes = 0
    for n, k, costs, mem, cls, variable, emulate, device, caps in overloaded(0, 60):
        result = heuristic_one(costs, device, mem=mem, memory_class=cls, caps=caps, emulate=emulate,
                               variable=variable)
        refs = variable >= 0
        assert np.all(result.device[refs] == result.device[variable[refs]])
        peaks = emulate(result.device).peak_memory
        np.testing.assert_array_equal(peaks, result.peaks)
        if result.success:
            successes += 1
            assert np.all(peaks <= caps)
            assert result.failure is None
        else:
            f = result.failure
            assert f is not None and 0 <= f.device < k and f.excess_bytes > 0
            assert f.node == -1 or result.device[f.node] == f.device
        assert result.moved_nodes <= n  # a node moves at most once
    assert successes >= 30


def test_no_move_when_everything_fits_and_failure_when_nothing_can() -> None:
    rng = np.random.default_rng(1)
    costs, mem, cls, variable = training_like(rng, 12)
    emulate = double(costs, mem, cls, 2)
    device = np.arange(12) % 2
    device[variable >= 0] = device[variable[variable >= 0]]
    peaks = emulate(device).peak_memory
    fine = heuristic_one(costs, device, mem=mem, memory_class=cls, caps=peaks.copy(), emulate=emulate,
                         variable=variable)
    assert fine.success and fine.moved_nodes == 0 and np.array_equal(fine.device, device)
    tiny = heuristic_one(costs, device, mem=mem, memory_class=cls, caps=np.full(2, 0.5), emulate=emulate,
                         variable=variable)
    assert not tiny.success and tiny.failure is not None and tiny.failure.excess_bytes > 0


def test_move_cost_is_eq4_and_first_overflow() -> None:
    c = Costs.from_edges(3, [0, 1], [1, 2], comp=[1.0, 2.0, 3.0], comm=[5.0, 7.0])
    assert move_costs(c, np.array([0, 0, 1])).tolist() == [6.0, 7.0, 3.0]
    assert first_overflow(Curve(np.array([0.0, 1.0, 2.0]), np.array([1.0, 5.0, 9.0])), 4.0) == (1.0, 1.0)
    assert first_overflow(Curve(np.array([0.0]), np.array([1.0])), 4.0) is None


def test_window_max_and_lifetimes() -> None:
    from dnnpart.solvers.pardnn.overflow import lifetimes, window_max

    curve = Curve(np.array([0.0, 2.0, 4.0, 6.0]), np.array([1.0, 7.0, 3.0, 5.0]))
    assert window_max(curve, 2.5, 3.5) == 7.0  # the value in force at 2.5 was set at 2.0
    assert window_max(curve, 4.0, 5.9) == 3.0
    assert window_max(curve, -1.0, 10.0) == 7.0
    c = Costs.from_edges(3, [0, 1], [1, 2], comp=[1.0, 1.0, 1.0], comm=[0.0, 0.0])
    start, finish = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    lo, hi = lifetimes(c, start, finish, np.array([True, False, False]))
    assert lo.tolist() == [-np.inf, 1.0, 2.0] and hi.tolist() == [np.inf, 2.0, 3.0]


def test_time_limit_zero_reports_the_input_placement() -> None:
    rng = np.random.default_rng(2)
    costs, mem, cls, _ = training_like(rng, 14)
    emulate = double(costs, mem, cls, 2)
    device = np.zeros(14, np.int64)
    caps = np.full(2, 0.5 * emulate(device).peak_memory.max())
    r = heuristic_one(costs, device, mem=mem, memory_class=cls, caps=caps, emulate=emulate, time_limit=0.0)
    assert not r.success and r.moved_nodes == 0 and np.array_equal(r.device, device)


def naive_potentials(costs: Costs, device: np.ndarray, mem: np.ndarray, residual: np.ndarray,
                     start: np.ndarray, finish: np.ndarray, pe: int, t: float) -> np.ndarray:
    """M_pot node by node, straight from the definition in overflow.py's docstring."""
    src, dst = costs.edge_sources().tolist(), costs.succ_idx.tolist()
    pot = np.zeros(costs.n)
    for n in range(costs.n):
        if device[n] != pe:
            continue
        local = [start[v] for u, v in zip(src, dst, strict=True) if u == n and device[v] == pe]
        end = max([finish[n], *local])
        if residual[n] or start[n] <= t <= end:
            pot[n] += mem[n]
    for u in range(costs.n):
        later = [v for x, v in zip(src, dst, strict=True) if x == u and device[v] == pe and start[v] >= t]
        if len(later) == 1 and finish[u] <= t and not residual[u] and mem[u] > 0:
            pot[later[0]] += mem[u]
    return pot


def test_memory_potentials_kernel_and_twin_equal_the_definition() -> None:
    from dnnpart.solvers.pardnn import kernels
    from dnnpart.solvers.pardnn.overflow import memory_potentials

    rng = np.random.default_rng(5)
    for _ in range(200):
        n, k = int(rng.integers(2, 25)), int(rng.integers(1, 4))
        costs, mem, cls, _ = training_like(rng, n)
        device = rng.integers(0, k, n)
        start = rng.integers(0, 10, n).astype(float)
        finish = start + rng.integers(0, 3, n)
        residual = cls == RESIDUAL
        pe, t = int(rng.integers(0, k)), float(rng.integers(0, 12))
        expected = naive_potentials(costs, device, mem, residual, start, finish, pe, t)
        np.testing.assert_allclose(memory_potentials(costs, device, mem, residual, start, finish, pe, t),
                                   expected)
        twin = kernels.memory_potentials_kernel.py_func(costs.succ_ptr, costs.succ_idx, device, mem,
                                                        residual, start, finish, pe, t)
        np.testing.assert_allclose(twin, expected)


def test_time_limit_is_enforced_inside_rounds(monkeypatch) -> None:
    """A fake clock where each emulation costs 10 s: with 25 s, a third emulation (ending at
    30 s) must never start, although the budget is not yet spent when the second one ends."""
    import types

    from dnnpart.solvers.pardnn import overflow

    clock = [0.0]
    monkeypatch.setattr(overflow, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    long_runs = 0
    for _n, _k, costs, mem, cls, variable, inner, device, caps in overloaded(0, 60):
        calls = [0]

        def emulate(device, inner=inner, calls=calls):  # type: ignore[no-untyped-def]
            clock[0] += 10.0
            calls[0] += 1
            return inner(device)

        free = heuristic_one(costs, device, mem=mem, memory_class=cls, caps=caps, emulate=emulate,
                             variable=variable)
        unlimited = calls[0]
        calls[0], clock[0] = 0, 0.0
        capped = heuristic_one(costs, device, mem=mem, memory_class=cls, caps=caps, emulate=emulate,
                               variable=variable, time_limit=25.0)
        assert clock[0] <= 25.0 and calls[0] == min(unlimited, 2)
        assert capped.success == (free.success and unlimited <= 2)
        long_runs += unlimited >= 3
    assert long_runs >= 3  # the limit actually cut some runs short


def test_a_stop_request_ends_heuristic_one_with_the_input_placement() -> None:
    for _n, _k, costs, mem, cls, variable, emulate, device, caps in overloaded(3, 5):
        r = heuristic_one(costs, device, mem=mem, memory_class=cls, caps=caps, emulate=emulate,
                          variable=variable, stop=lambda: True)
        fits = bool(np.all(emulate(device).peak_memory <= caps))
        assert r.success == fits and r.moved_nodes == 0 and np.array_equal(r.device, device)
