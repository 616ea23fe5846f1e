"""Replay of layer-wise strategies: naive twin of the scheduler, bytes and t_O cross-checks."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.layerwise.configs import config_space
from dnnpart.layerwise.hardware import P100, paper_bandwidth, two_level_bandwidth
from dnnpart.layerwise.layers import LayerGraph
from dnnpart.layerwise.models import build_model
from dnnpart.layerwise.strategy import strategy_bytes, strategy_configs, strategy_time
from dnnpart.layerwise.tables import build_tables, communication_bytes, iteration_time
from dnnpart.plan import LayerConfig
from dnnpart.simulate.layerwise import (
    SYNC_MODES,
    ReplayTasks,
    build_replay_tasks,
    replay_strategy,
    schedule_tasks,
)
from dnnpart.solvers.optcnn.search import optimize_tables
from dnnpart.testing.layer_problems import random_layer_graph


def naive_schedule(tasks: ReplayTasks) -> tuple[np.ndarray, np.ndarray]:
    """Twin of :func:`schedule_tasks`: every step scans all tasks whose dependencies are done
    and starts the one with the earliest possible start (ties: lowest index)."""
    n = len(tasks)
    start = [None] * n
    end = [None] * n
    free = [0.0] * len(tasks.resources)
    for _ in range(n):
        best = None
        for i in range(n):
            if end[i] is not None or any(end[d] is None for d in tasks.deps[i]):
                continue
            ready = max([end[d] for d in tasks.deps[i]], default=0.0)
            est = max(ready, free[tasks.resource[i]])
            if best is None or est < best[0]:
                best = (est, i)
        assert best is not None, "cycle"
        est, i = best
        start[i], end[i] = est, est + float(tasks.duration[i])
        free[tasks.resource[i]] = end[i]
    return np.asarray(start), np.asarray(end)


def random_tasks(rng: np.random.Generator) -> ReplayTasks:
    n, r = int(rng.integers(1, 25)), int(rng.integers(1, 4))
    deps = tuple(
        tuple(sorted(rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False).tolist()))
        if i else ()
        for i in range(n))
    # integer durations make ties common, which is where the two could disagree
    return ReplayTasks(resources=tuple(f"r{k}" for k in range(r)), resource=rng.integers(0, r, n),
                       duration=rng.integers(0, 4, n).astype(float), deps=deps,
                       kind=("compute",) * n, what=("t",) * n, moved_bytes=np.zeros(n))


def test_scheduler_equals_naive_twin() -> None:
    rng = np.random.default_rng(17)
    for _ in range(300):
        tasks = random_tasks(rng)
        s, e = schedule_tasks(tasks)
        ns, ne = naive_schedule(tasks)
        np.testing.assert_array_equal(s, ns)
        np.testing.assert_array_equal(e, ne)


def random_configs(rng: np.random.Generator, g: LayerGraph, d: int) -> list[LayerConfig]:
    out = []
    for layer in g.layers:
        space = config_space(layer, d)
        k = int(rng.integers(0, len(space)))
        tiles = int(np.prod(space.degrees[k]))
        devices = tuple(int(v) for v in rng.permutation(d)[:tiles])   # any placement, not only 0..p-1
        out.append(LayerConfig(tuple(int(v) for v in space.degrees[k]), devices))
    return out


def test_replay_random_strategies_twin_and_bytes() -> None:
    rng = np.random.default_rng(3)
    for _ in range(40):
        g = random_layer_graph(rng)
        d = int(rng.choice([2, 4]))
        bw = two_level_bandwidth(1 if d == 2 else 2, 2, intra=float(rng.uniform(1e9, 4e9)),
                                 inter=float(rng.uniform(2e8, 1e9)))
        configs = random_configs(rng, g, d)
        sync = SYNC_MODES[int(rng.integers(0, len(SYNC_MODES)))]
        tasks = build_replay_tasks(g, configs, P100, bw, sync=sync)
        s, e = schedule_tasks(tasks)
        _, ne = naive_schedule(tasks)
        np.testing.assert_allclose(e, ne, rtol=0, atol=0)
        # every dependency is respected and no resource runs two tasks at once
        for i, deps in enumerate(tasks.deps):
            assert all(e[dep] <= s[i] for dep in deps)
        for r in range(len(tasks.resources)):
            idx = np.flatnonzero(tasks.resource == r)
            order = idx[np.argsort(s[idx], kind="stable")]
            assert np.all(s[order][1:] >= e[order][:-1] - 1e-15)
        # the replay moves exactly the bytes the cost model counts
        r = replay_strategy(g, configs, P100, bw)
        ones = build_tables(g, d, P100, bw)
        idx = [ones.spaces[i].index(c.degrees) for i, c in enumerate(configs)]
        if all(c.devices == tuple(range(c.tiles)) for c in configs):
            assert r.moved_bytes == pytest.approx(communication_bytes(ones, idx), rel=1e-12)
        assert r.moved_bytes == pytest.approx(strategy_bytes(g, configs, P100, bw), rel=1e-12, abs=1e-9)


def test_single_device_chain_replays_to_t_o() -> None:
    g = build_model("alexnet", 32)
    t = build_tables(g, 1, P100, paper_bandwidth(1))
    s = [0] * len(g)
    r = replay_strategy(g, strategy_configs(t, s), P100, paper_bandwidth(1))
    assert r.makespan == pytest.approx(iteration_time(t, s), rel=1e-12)


def test_strategy_time_equals_tables_on_contiguous_devices() -> None:
    rng = np.random.default_rng(5)
    g = build_model("lenet5", 16)
    t = build_tables(g, 4, P100, paper_bandwidth(4))
    for _ in range(20):
        s = [int(rng.integers(0, len(sp))) for sp in t.spaces]
        assert strategy_time(g, strategy_configs(t, s), P100, paper_bandwidth(4)) == \
            pytest.approx(iteration_time(t, s), rel=1e-12)


@pytest.mark.parametrize(("model", "devices"), [("alexnet", 4), ("vgg16", 4), ("alexnet", 16)])
def test_replay_within_ten_percent_of_t_o(model: str, devices: int) -> None:
    """Issue 17 acceptance: the optimal strategy's replay is within 10% of its t_O."""
    bw = paper_bandwidth(devices)
    t = build_tables(build_model(model, 32 * devices), devices, P100, bw)
    best = optimize_tables(t)
    r = replay_strategy(t.graph, strategy_configs(t, best.strategy), P100, bw)
    assert r.additive == pytest.approx(best.value, rel=1e-9)
    assert 0.9 <= r.ratio <= 1.1


def test_sync_after_backward_waits_for_every_backward_task() -> None:
    """The default sync mode: no gradient or parameter leaves before the backward pass ends;
    eager sync may leave earlier, and moves the same bytes."""
    rng = np.random.default_rng(17)
    earlier = 0
    for _ in range(30):
        g = random_layer_graph(rng, max_layers=7)
        d = int(rng.choice([2, 4]))
        bw = paper_bandwidth(d)
        configs = random_configs(rng, g, d)
        moved = []
        for sync in SYNC_MODES:
            tasks = build_replay_tasks(g, configs, P100, bw, sync=sync)
            s, e = schedule_tasks(tasks)
            sync_idx = [i for i, k in enumerate(tasks.kind) if k == "sync"]
            backward = [i for i, w in enumerate(tasks.what) if w.startswith("B ")]
            if sync_idx and sync == "after-backward":
                assert s[sync_idx].min() >= e[backward].max() - 1e-15
            if sync_idx and sync == "eager":
                earlier += bool(s[sync_idx].min() < e[backward].max())
            moved.append(float(tasks.moved_bytes.sum()))
        assert moved[0] == pytest.approx(moved[1], rel=1e-12)
    assert earlier > 0  # the eager mode does overlap somewhere


def test_unknown_sync_mode_is_refused() -> None:
    g = build_model("lenet5", 8)
    with pytest.raises(ValueError, match="sync"):
        build_replay_tasks(g, [LayerConfig((1, 1, 1, 1), (0,))] * len(g), P100, paper_bandwidth(1),
                           sync="late")


def test_serialised_replay_is_bounded_by_t_o_on_random_strategies() -> None:
    """With nothing overlapping on a device, the replay never exceeds Eq. 1 (same tasks, same costs)."""
    rng = np.random.default_rng(11)
    for _ in range(60):
        g = random_layer_graph(rng, max_layers=7)
        d = int(rng.choice([2, 4, 8]))
        bw = paper_bandwidth(d) if rng.random() < 0.5 else two_level_bandwidth(d // 2, 2, 3e9, 1e9)
        configs = random_configs(rng, g, d)
        r = replay_strategy(g, configs, P100, bw, serialise=True)
        assert r.makespan <= r.additive * (1 + 1e-9)
        assert r.moved_bytes == pytest.approx(replay_strategy(g, configs, P100, bw).moved_bytes, rel=1e-12)


@pytest.mark.parametrize(("model", "devices"), [("alexnet", 2), ("alexnet", 16), ("vgg16", 4)])
def test_serialised_replay_of_the_optimum_is_t_o(model: str, devices: int) -> None:
    """Issue 17: the replay's gap to t_O is overlap only -- serialised per device it is t_O."""
    bw = paper_bandwidth(devices)
    t = build_tables(build_model(model, 32 * devices), devices, P100, bw)
    configs = strategy_configs(t, optimize_tables(t).strategy)
    serial = replay_strategy(t.graph, configs, P100, bw, serialise=True)
    assert serial.makespan == pytest.approx(serial.additive, rel=1e-12)
    assert replay_strategy(t.graph, configs, P100, bw).makespan <= serial.makespan
