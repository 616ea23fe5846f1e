"""Routing on threads: chunks of sources routed at once (compiled kernels release the GIL)
give the matrices of one thread, with and without a hop matrix (per-thread scratch)."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.devices import routing


@pytest.mark.parametrize("rule", ["widest", "store-and-forward"])
@pytest.mark.parametrize("hops", [True, False])
def test_threads_give_the_matrices_of_one_thread(rule: str, hops: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    n = 160  # past the plain-Python size: compiled kernels, several chunks
    a, b = np.triu_indices(n, 1)
    keep = rng.random(a.size) < 0.5  # not complete: the heap kernels too
    a, b = a[keep], b[keep]
    bw = rng.choice([5.0, 25.0, 50.0, 150.0], size=a.size)
    lat = rng.choice([0.0, 1e-6], size=a.size)
    monkeypatch.setattr(routing, "CHUNK_WORK", 20_000)  # many small chunks
    monkeypatch.setattr(routing, "route_threads", lambda: 1)
    one = routing.route(n, a, b, bw, lat, rule=rule, hops=hops)
    pools: list[int] = []

    class Counted(routing.ThreadPoolExecutor):  # type: ignore[misc]
        def __init__(self, workers: int) -> None:
            pools.append(workers)
            super().__init__(workers)

    monkeypatch.setattr(routing, "ThreadPoolExecutor", Counted)
    monkeypatch.setattr(routing, "route_threads", lambda: 3)
    three = routing.route(n, a, b, bw, lat, rule=rule, hops=hops)
    assert pools == [3]  # the threaded path ran
    for x, y in zip(one, three, strict=True):
        assert np.array_equal(x, y)
