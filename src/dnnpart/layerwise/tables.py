"""Cost tables of a layer graph on a device set: the precomputed input of Algorithm 1.

:func:`build_tables` runs the three cost functions of :mod:`.costs` over every layer and edge;
:func:`iteration_time` is Eq. 1 (t_O) of a strategy over the tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dnnpart.devices.specs import DeviceSpec
from dnnpart.errors import UsageError
from dnnpart.layerwise.configs import ConfigSpace, config_space, enumerate_degrees, parallel_dims
from dnnpart.layerwise.costs import compute_time, sync_bytes, sync_time, transfer_costs
from dnnpart.layerwise.layers import LayerGraph
from dnnpart.limits import MAX_TABLE_BYTES, check_estimate

__all__ = ["CostTables", "build_tables", "check_table_size", "communication_bytes", "iteration_time",
           "table_peak_bytes"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CostTables:
    """t_C, t_S per layer and configuration, t_X per edge and configuration pair.

    Attributes
    ----------
    graph
        The layer graph.
    spaces
        Configuration space of each layer.
    t_c, t_s
        ``(C_i,)`` per layer.
    edges
        ``(producer, consumer)`` per edge (parallel edges possible).
    t_x
        ``(C_producer, C_consumer)`` per edge.
    s_bytes, x_bytes
        Bytes moved per step by parameter synchronisation (per layer) and by transfers (per
        edge, forward plus backward), for the communication figures (paper's Fig. 8).
    """

    graph: LayerGraph
    spaces: tuple[ConfigSpace, ...]
    t_c: tuple[FloatArray, ...]
    t_s: tuple[FloatArray, ...]
    edges: tuple[tuple[int, int], ...]
    t_x: tuple[FloatArray, ...]
    s_bytes: tuple[FloatArray, ...]
    x_bytes: tuple[FloatArray, ...]

    @property
    def node_cost(self) -> list[FloatArray]:
        """``t_C + t_S`` per layer: the node term of Eq. 1."""
        return [c + s for c, s in zip(self.t_c, self.t_s, strict=True)]


def table_peak_bytes(layers: LayerGraph, devices: int) -> int:
    """Working memory of :func:`build_tables`' largest edge priced with numpy arrays, from the
    configuration counts alone (cheap: degree vectors, no tiles): 32 bytes per pair of tiles
    (``C_producer x C_consumer x devices^2``), the float64 arrays over those pairs that
    :func:`~dnnpart.layerwise.costs.transfer_costs` would hold at once (volumes, seconds, a
    masked copy) with room. Its compiled loop for large edges holds none of them but visits
    every pair, so the same bound keeps an edge's work within what a time limit can wait for
    (the loop does not stop midway).

    Examples
    --------
    >>> from dnnpart.layerwise.models import alexnet
    >>> table_peak_bytes(alexnet(32 * 4), 4) < table_peak_bytes(alexnet(32 * 64), 64)
    True
    """
    return _peak_bytes(layers, [len(enumerate_degrees(layer.out_shape, parallel_dims(layer), devices))
                                for layer in layers.layers], devices)


def _peak_bytes(layers: LayerGraph, counts: Sequence[int], devices: int) -> int:
    """:func:`table_peak_bytes` from each layer's configuration count."""
    pairs = max((counts[p] * counts[j] for j, layer in enumerate(layers.layers) for p in layer.inputs),
                default=0)
    return pairs * devices * devices * 4 * 8


def check_table_size(layers: LayerGraph, devices: int) -> None:
    """Refuse cost tables whose working arrays would pass :data:`~dnnpart.limits.MAX_TABLE_BYTES`
    (128 devices on AlexNet: 2 GB for one edge, 97 s), before any is built; :func:`build_tables`
    makes the same check on the configuration spaces it enumerates.

    Examples
    --------
    >>> from dnnpart.layerwise.models import alexnet
    >>> check_table_size(alexnet(32 * 128), 128)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: --cluster: 128 devices: cost-table working memory estimated at 2.13 GB, ...
    """
    _check_peak(table_peak_bytes(layers, devices), devices)


def _check_peak(peak: int, devices: int) -> None:
    check_estimate(peak, MAX_TABLE_BYTES, f"--cluster: {devices} devices", "cost-table working memory",
                   "OptCNN's tables grow with the square of the devices and their configurations; "
                   "use fewer devices")


def shared_spaces(graph: LayerGraph, devices: int) -> tuple[ConfigSpace, ...]:
    """Every layer's configuration space, one object per (cut rule, output shape): a space
    depends on nothing else, and :func:`build_tables` prices the edges between equal pairs of
    spaces once.

    Examples
    --------
    >>> from dnnpart.layerwise.models import inception_v3
    >>> g = inception_v3(32)
    >>> spaces = shared_spaces(g, 2)
    >>> len(spaces) == len(g.layers), len({id(s) for s in spaces}) < len(spaces)
    (True, True)
    """
    shared: dict[tuple[Any, ...], ConfigSpace] = {}
    out = []
    for layer in graph.layers:
        key = (parallel_dims(layer), layer.out_shape)
        if key not in shared:
            shared[key] = config_space(layer, devices)
        out.append(shared[key])
    return tuple(out)


def build_tables(graph: LayerGraph, devices: int, device: DeviceSpec, bandwidth: FloatArray, *,
                 spaces: Sequence[ConfigSpace] | None = None, transfers: str = "links") -> CostTables:
    """Configuration spaces and all cost tables of ``graph`` on ``devices`` devices.

    ``spaces`` (one per layer) replaces the enumerated configuration spaces, e.g. one stored
    configuration per layer (:func:`~dnnpart.layerwise.strategy.strategy_tables`);
    ``transfers`` is t_X's and t_S's link accounting
    (:data:`~dnnpart.layerwise.costs.TRANSFER_MODELS`).

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> t = build_tables(lenet5(64), 2, P100, paper_bandwidth(2))
    >>> len(t.t_x), t.t_x[0].shape
    (7, (4, 5))
    """
    bandwidth = np.asarray(bandwidth, dtype=np.float64)
    if bandwidth.shape != (devices, devices):
        raise UsageError(f"bandwidth must be ({devices}, {devices}), got {bandwidth.shape}")
    if spaces is None:
        spaces = shared_spaces(graph, devices)
        # check_table_size on the spaces' own counts, before any table is built
        _check_peak(_peak_bytes(graph, [len(s) for s in spaces], devices), devices)
    spaces = tuple(spaces)
    if len(spaces) != len(graph.layers):
        raise UsageError(f"{len(spaces)} configuration spaces for {len(graph.layers)} layers")
    t_c = tuple(compute_time(layer, s, device) for layer, s in zip(graph.layers, spaces, strict=True))
    t_s = tuple(sync_time(layer, s, bandwidth, transfers=transfers)
                for layer, s in zip(graph.layers, spaces, strict=True))
    s_bytes = tuple(sync_bytes(layer, s) for layer, s in zip(graph.layers, spaces, strict=True))
    edges: list[tuple[int, int]] = []
    t_x: list[FloatArray] = []
    x_bytes: list[FloatArray] = []
    # an edge's tables depend on the two spaces and the consumer's reading geometry only:
    # repeated modules (Inception's, ResNet's blocks) price each distinct edge once
    priced: dict[tuple[Any, ...], tuple[FloatArray, FloatArray]] = {}
    for j, layer in enumerate(graph.layers):
        for k, p in enumerate(layer.inputs):
            edges.append((p, j))
            key = (id(spaces[p]), id(spaces[j]), k, layer.op, layer.in_shapes, layer.out_shape,
                   layer.kernel, layer.stride, layer.padding)
            if key in priced:  # a copy: the searches may reduce tables in place
                time_table, moved = (a.copy() for a in priced[key])
            else:
                time_table, moved = priced[key] = transfer_costs(spaces[p], layer, k, spaces[j],
                                                                 bandwidth, transfers=transfers)
            t_x.append(time_table)
            x_bytes.append(moved)
    return CostTables(graph, spaces, t_c, t_s, tuple(edges), tuple(t_x), s_bytes, tuple(x_bytes))


def iteration_time(tables: CostTables, strategy: Sequence[int]) -> float:
    """Eq. 1: ``t_O = sum_i (t_C + t_S)(c_i) + sum_e t_X(e, c_i, c_j)`` of a strategy.

    ``strategy[i]`` is the configuration index of layer ``i``.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> t = build_tables(lenet5(64), 2, P100, paper_bandwidth(2))
    >>> iteration_time(t, [0] * 8) == sum(float(c[0]) for c in t.t_c)
    True
    """
    if len(strategy) != len(tables.spaces):
        raise UsageError(f"strategy has {len(strategy)} entries for {len(tables.spaces)} layers")
    total = sum(float(c[s]) for c, s in zip(tables.node_cost, strategy, strict=True))
    for (u, v), x in zip(tables.edges, tables.t_x, strict=True):
        total += float(x[strategy[u], strategy[v]])
    return total


def communication_bytes(tables: CostTables, strategy: Sequence[int]) -> float:
    """Bytes moved per step by a strategy: transfers (both directions) plus parameter sync.

    Examples
    --------
    >>> from dnnpart.layerwise.hardware import P100, paper_bandwidth
    >>> from dnnpart.layerwise.models import lenet5
    >>> t = build_tables(lenet5(64), 2, P100, paper_bandwidth(2))
    >>> communication_bytes(t, [0] * 8)   # one device: nothing moves
    0.0
    """
    total = sum(float(b[s]) for b, s in zip(tables.s_bytes, strategy, strict=True))
    for (u, v), x in zip(tables.edges, tables.x_bytes, strict=True):
        total += float(x[strategy[u], strategy[v]])
    return total
