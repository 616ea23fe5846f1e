"""PARDNN end to end on graphs: framework constraints, options, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from dnnpart.graph import CONTROL, NORMAL, REFERENCE, RESIDUAL, build_graph
from dnnpart.solvers.pardnn import Costs, pardnn, pardnn_graph
from dnnpart.solvers.pardnn.constraints import reference_variables
from dnnpart.solvers.pardnn.oracles import random_costs


def training_like_graph(seed: int, n: int = 60):  # type: ignore[no-untyped-def]
    """Random DAG with residual variables, reference ops updating them, control nodes, pins."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    cls = np.full(n, NORMAL)
    cls[: n // 6] = RESIDUAL  # variables first (sources)
    for v in range(n // 6, n):
        for u in rng.choice(v, size=min(v, int(rng.integers(1, 4))), replace=False):
            src.append(int(u))
            dst.append(v)
    refs = rng.choice(np.arange(n // 2, n), size=n // 10, replace=False)
    cls[refs] = REFERENCE
    for r in refs:  # each reference op reads one variable
        var = int(rng.integers(0, n // 6))
        if (var, int(r)) not in set(zip(src, dst, strict=True)):
            src.append(var)
            dst.append(int(r))
    plain = np.flatnonzero(cls == NORMAL)
    cls[rng.choice(plain, size=3, replace=False)] = CONTROL
    pin = np.full(n, -1)
    pin[n - 1] = 0  # the last op pinned to the CPU
    return build_graph(
        list(range(n)), src, dst, compute_time=np.c_[rng.integers(1, 9, n), rng.integers(1, 9, n)],
        edge_cost=rng.integers(0, 4, len(src)), memory_class=cls,
        param_bytes=np.where(cls == RESIDUAL, rng.integers(1, 100, n), 0),
        output_bytes=rng.integers(1, 20, n), pin=pin,
    )


@pytest.mark.parametrize("heuristic", ["none", "2"])
def test_constraints_hold_and_output_is_deterministic(heuristic: str) -> None:
    for seed in range(20):
        g = training_like_graph(seed)
        kinds = ["accelerator"] * 4 + ["cpu"]
        a = pardnn_graph(g, 4, device_kinds=kinds, memory_heuristic=heuristic)
        b = pardnn_graph(g, 4, device_kinds=kinds, memory_heuristic=heuristic)
        np.testing.assert_array_equal(a.device, b.device)
        pinned = int(g.index_of([g.n_nodes - 1])[0])
        assert a.device[pinned] == 4  # pinned to the CPU device
        assert np.all(np.delete(a.device, pinned) < 4)  # free ops stay on the accelerators
        var = reference_variables(g)
        refs = np.flatnonzero(var >= 0)
        refs = refs[refs != pinned]
        assert refs.size
        assert np.all(a.device[refs] == a.device[var[refs]])


def test_control_edges_cost_nothing() -> None:
    g = build_graph([0, 1, 2], [0, 1], [1, 2], compute_time=[[1, 1]] * 3, edge_cost=[5, 5],
                    memory_class=[NORMAL, CONTROL, NORMAL])
    assert Costs.from_graph(g).comm.tolist() == [5.0, 0.0]


def test_options_are_checked() -> None:
    c = random_costs(np.random.default_rng(0), min_n=3)
    with pytest.raises(ValueError, match="memory_heuristic"):
        pardnn(c, 2, memory_heuristic="3")
    with pytest.raises(ValueError, match="emulator"):
        pardnn(c, 2, memory_heuristic="1")
    with pytest.raises(ValueError, match="k must be"):
        pardnn(c, 0)
    g = build_graph([0, 1], [0], [1], compute_time=[[1, 1]] * 2, edge_cost=[0], pin=[0, -1])
    with pytest.raises(ValueError, match="pinned to 'cpu'"):
        pardnn_graph(g, 2)


def test_heuristic_two_moves_only_residual_nodes() -> None:
    for seed in range(10):
        g = training_like_graph(seed, n=80)
        kinds = ["accelerator"] * 4 + ["cpu"]
        plain = pardnn_graph(g, 4, device_kinds=kinds, memory_heuristic="none").device
        balanced = pardnn_graph(
            g, 4, device_kinds=kinds, memory_heuristic="2", cp_split_threshold=None
        ).device
        changed = np.flatnonzero(plain != balanced)
        cls = g.memory_classes()
        assert np.all(np.isin(cls[changed], [RESIDUAL, REFERENCE]))


def test_colocation_classes_and_reference_groups_share_a_device() -> None:
    from dnnpart.solvers.pardnn.constraints import colocation_leaders

    rng = np.random.default_rng(5)
    for seed in range(15):
        g0 = training_like_graph(seed)
        n = g0.n_nodes
        color = np.where(rng.random(n) < 0.3, rng.integers(0, 4, n), -1)
        g = build_graph(
            g0.original_ids, g0.original_ids[g0.edge_sources()], g0.original_ids[g0.succ_idx],
            compute_time=g0.compute_time, edge_cost=g0.edge_cost, memory_class=g0.memory_class,
            param_bytes=g0.param_bytes, output_bytes=g0.output_bytes, color_class=color[g0.original_ids],
        )
        leaders = colocation_leaders(g)
        for heuristic in ("none", "2"):
            device = pardnn_graph(g, 3, memory_heuristic=heuristic).device
            for c in np.unique(g.color_class[g.color_class >= 0]):
                assert len(set(device[g.color_class == c].tolist())) == 1
            follow = np.flatnonzero(leaders >= 0)
            assert np.all(device[follow] == device[leaders[follow]])
            var = reference_variables(g)
            refs = np.flatnonzero(var >= 0)
            assert np.all(device[refs] == device[var[refs]])
