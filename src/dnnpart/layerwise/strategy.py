"""Strategies as per-layer :class:`~dnnpart.plan.LayerConfig` rows, and Eq. 1 over them.

Algorithm 1 works on configuration *indices* into the tables of :mod:`.tables`, whose tiles
sit on the contiguous block ``0 .. p-1`` (:func:`.configs.tile_devices`). A plan stores each
layer's degrees and the devices of its tiles explicitly, so any placement of the tiles can be
scored: :func:`config_row` builds the one-configuration space of a stored configuration, and
:func:`strategy_tables` the cost tables of those rows, so Eq. 1 of a stored strategy is
:func:`.tables.iteration_time` of its tables: one Eq. 1 for both. The tests check it against
Eq. 1 written out by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dnnpart.devices.specs import DeviceSpec
from dnnpart.errors import UsageError
from dnnpart.layerwise.configs import DIMS, ConfigSpace, parallel_dims, tile_boxes
from dnnpart.layerwise.layers import LayerGraph, LayerSpec
from dnnpart.layerwise.tables import CostTables, build_tables, communication_bytes, iteration_time
from dnnpart.plan import LayerConfig

__all__ = ["config_row", "strategy_bytes", "strategy_configs", "strategy_indices", "strategy_tables",
           "strategy_time"]

FloatArray = npt.NDArray[np.float64]


def strategy_configs(tables: CostTables, strategy: Sequence[int]) -> tuple[LayerConfig, ...]:
    """The :class:`LayerConfig` of every layer of a strategy given as table indices.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> from dnnpart.layerwise.tables import build_tables
    >>> t = build_tables(lenet5(8), 2, P100, paper_bandwidth(2))
    >>> strategy_configs(t, [t.spaces[i].index((2, 1, 1, 1)) for i in range(8)])[1]
    LayerConfig(degrees=(2, 1, 1, 1), devices=(0, 1))
    """
    out = []
    for space, k in zip(tables.spaces, strategy, strict=True):
        dev = space.device[k]
        out.append(LayerConfig(tuple(int(d) for d in space.degrees[k]),
                               tuple(int(d) for d in dev[dev >= 0])))
    return tuple(out)


def strategy_indices(tables: CostTables, configs: Sequence[LayerConfig]) -> tuple[int, ...] | None:
    """Table indices of stored configurations, or ``None`` where a layer's tiles are not on the
    tables' contiguous devices (then only :func:`strategy_time` can score it)."""
    out = []
    for space, cfg in zip(tables.spaces, configs, strict=True):
        try:
            k = space.index(cfg.degrees)
        except KeyError:
            return None
        dev = space.device[k]
        if tuple(int(d) for d in dev[dev >= 0]) != cfg.devices:
            return None
        out.append(k)
    return tuple(out)


def config_row(layer: LayerSpec, config: LayerConfig, devices: int) -> ConfigSpace:
    """The one-configuration space of ``config`` on a cluster of ``devices`` devices.

    Raises ``ValueError`` naming the layer when the configuration is not admissible: wrong
    number of degrees, a dimension the layer cannot be cut in (Table 1), a degree that does not
    divide its dimension, or a device outside the cluster.

    Examples
    --------
    >>> from dnnpart.layerwise.models import vgg16
    >>> row = config_row(vgg16(8).layers[1], LayerConfig((2, 1, 1, 1), (3, 1)), 4)
    >>> row.device.tolist(), row.hi[0, 0].tolist()
    ([[3, 1, -1, -1]], [4, 64, 224, 224])
    """
    if len(config.degrees) != len(DIMS):
        raise UsageError(f"layer {layer.name!r}: degrees must be ({', '.join(DIMS)}), got {config.degrees}")
    for d, size, ok, name in zip(config.degrees, layer.out_shape, parallel_dims(layer), DIMS, strict=True):
        if d > 1 and not ok:
            raise UsageError(f"layer {layer.name!r} ({layer.op}) cannot be cut in dimension {name}")
        if size % d:
            raise UsageError(f"layer {layer.name!r}: degree {d} does not divide {name} = {size}")
    if max(config.devices) >= devices:
        raise UsageError(f"layer {layer.name!r}: device {max(config.devices)} is outside the "
                         f"cluster's {devices} devices")
    if config.tiles > devices:
        raise UsageError(f"layer {layer.name!r}: {config.tiles} tiles on {devices} devices")
    deg = np.asarray(config.degrees, dtype=np.int64)
    tlo, thi = tile_boxes(layer.out_shape, deg)
    lo = np.zeros((1, devices, 4), dtype=np.int64)
    hi = np.zeros((1, devices, 4), dtype=np.int64)
    dev = np.full((1, devices), -1, dtype=np.int64)
    p = tlo.shape[0]
    lo[0, :p], hi[0, :p], dev[0, :p] = tlo, thi, config.devices
    return ConfigSpace(deg[None, :], lo, hi, dev)


def _rows(graph: LayerGraph, configs: Sequence[LayerConfig], devices: int) -> tuple[ConfigSpace, ...]:
    if len(configs) != len(graph.layers):
        raise UsageError(f"strategy has {len(configs)} configurations for {len(graph.layers)} layers")
    return tuple(config_row(layer, c, devices) for layer, c in zip(graph.layers, configs, strict=True))


def strategy_tables(graph: LayerGraph, configs: Sequence[LayerConfig], device: DeviceSpec,
                    bandwidth: FloatArray) -> CostTables:
    """The cost tables of stored configurations: one configuration (index 0) per layer.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = lenet5(8)
    >>> t = strategy_tables(g, [LayerConfig((1, 1, 1, 1), (1,))] * len(g), P100, paper_bandwidth(2))
    >>> [len(space) for space in t.spaces] == [1] * len(g)
    True
    """
    bandwidth = np.asarray(bandwidth, dtype=np.float64)
    devices = bandwidth.shape[0]
    return build_tables(graph, devices, device, bandwidth, spaces=_rows(graph, configs, devices))


def strategy_time(graph: LayerGraph, configs: Sequence[LayerConfig], device: DeviceSpec,
                  bandwidth: FloatArray) -> float:
    """Eq. 1 (t_O) of stored configurations: :func:`.tables.iteration_time` over their tables.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> from dnnpart.layerwise.tables import build_tables, iteration_time
    >>> g, bw = lenet5(8), paper_bandwidth(2)
    >>> t = build_tables(g, 2, P100, bw)
    >>> s = [len(x) - 1 for x in t.spaces]
    >>> abs(strategy_time(g, strategy_configs(t, s), P100, bw) - iteration_time(t, s)) < 1e-15
    True
    """
    return iteration_time(strategy_tables(graph, configs, device, bandwidth), [0] * len(graph.layers))


def strategy_bytes(graph: LayerGraph, configs: Sequence[LayerConfig], device: DeviceSpec,
                   bandwidth: FloatArray) -> float:
    """Bytes moved per step (transfers both ways plus parameter sync) of stored configurations.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = lenet5(8)
    >>> strategy_bytes(g, [LayerConfig((1, 1, 1, 1), (0,))] * len(g), P100, paper_bandwidth(2))
    0.0
    """
    tables = strategy_tables(graph, configs, device, bandwidth)
    return communication_bytes(tables, [0] * len(graph.layers))
