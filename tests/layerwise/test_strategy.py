"""Eq. 1 of stored strategies: the library's one Eq. 1 against Eq. 1 written out by hand."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dnnpart.devices.specs import DeviceSpec
from dnnpart.layerwise.configs import config_space
from dnnpart.layerwise.costs import compute_time, sync_bytes, sync_time, transfer_costs
from dnnpart.layerwise.hardware import P100, two_level_bandwidth
from dnnpart.layerwise.layers import LayerGraph
from dnnpart.layerwise.models import build_model
from dnnpart.layerwise.strategy import config_row, strategy_bytes, strategy_time
from dnnpart.plan import LayerConfig
from dnnpart.testing.layer_problems import random_layer_graph


def eq1_by_hand(graph: LayerGraph, configs: Sequence[LayerConfig], device: DeviceSpec,
                bandwidth: np.ndarray) -> tuple[float, float]:
    """Oracle: ``t_O = sum_i (t_C + t_S) + sum_edges t_X`` and the bytes moved, layer by layer and
    edge by edge over one-configuration rows, without the cost tables."""
    d = bandwidth.shape[0]
    rows = [config_row(layer, c, d) for layer, c in zip(graph.layers, configs, strict=True)]
    time = moved = 0.0
    for layer, row in zip(graph.layers, rows, strict=True):
        time += float(compute_time(layer, row, device)[0]) + float(sync_time(layer, row, bandwidth)[0])
        moved += float(sync_bytes(layer, row)[0])
    for j, layer in enumerate(graph.layers):
        for k, p in enumerate(layer.inputs):
            t_x, x_bytes = transfer_costs(rows[p], layer, k, rows[j], bandwidth)
            time += float(t_x[0, 0])
            moved += float(x_bytes[0, 0])
    return time, moved


def _random_configs(rng: np.random.Generator, g: LayerGraph, d: int) -> list[LayerConfig]:
    out = []
    for layer in g.layers:
        space = config_space(layer, d)
        k = int(rng.integers(0, len(space)))
        tiles = int(np.prod(space.degrees[k]))
        devices = tuple(int(v) for v in rng.permutation(d)[:tiles])  # any placement of the tiles
        out.append(LayerConfig(tuple(int(v) for v in space.degrees[k]), devices))
    return out


def test_strategy_time_and_bytes_equal_eq1_by_hand_on_any_placement() -> None:
    rng = np.random.default_rng(11)
    for i in range(30):
        g = random_layer_graph(rng) if i % 3 else build_model("lenet5", 8)
        d = int(rng.choice([2, 4]))
        bw = two_level_bandwidth(1 if d == 2 else 2, 2, intra=float(rng.uniform(1e9, 4e9)),
                                 inter=float(rng.uniform(2e8, 1e9)))
        configs = _random_configs(rng, g, d)
        time, moved = eq1_by_hand(g, configs, P100, bw)
        assert strategy_time(g, configs, P100, bw) == pytest.approx(time, rel=1e-12)
        assert strategy_bytes(g, configs, P100, bw) == pytest.approx(moved, rel=1e-12, abs=1e-9)


def test_a_strategy_for_another_layer_count_is_refused() -> None:
    g = build_model("lenet5", 8)
    with pytest.raises(ValueError, match="configurations for"):
        strategy_time(g, [LayerConfig((1, 1, 1, 1), (0,))], P100, two_level_bandwidth(1, 2))
