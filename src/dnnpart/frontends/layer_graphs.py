"""``builtin:NAME`` layer graphs (paper 3's networks) as shared :class:`~dnnpart.graph.core.Graph` s.

The six networks of :mod:`dnnpart.solvers.optcnn.models` -- ``lenet5``, ``alexnet``,
``vgg16``, ``inception_v3`` (no auxiliary head), ``resnet50``, ``resnet152`` -- become graphs
with one node per layer: names, op kinds (``op_types``), ``param_bytes`` (FP32),
``output_bytes``, forward compute times priced by the roofline of the ``P100`` preset
(accelerator column) and of the ``cpu`` preset (CPU column), in ms, and edge costs of the
output bytes at the preset's host link. ``memory_bytes`` is 0: paper 3's cost model has no
memory term, so no memory constraint applies to these graphs.

**Layer attributes** (op kind, shapes, kernel/stride/padding, parameters) are what the
``iteration`` objective reads. Until the graph carries a layer-attribute table of its own
(issue 14's ``LayerAttrs``), the :class:`~dnnpart.solvers.optcnn.layers.LayerGraph` a graph
was built from is kept beside it in this process (:func:`layers_of`); a graph read back from
a native file has none, and the ``iteration`` objective then says so.

Choice: in GRAPH arguments these six names resolve to layer graphs (they need no torch);
``dnnpart import builtin:resnet50`` still builds the torch module of the same name.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np

from dnnpart.cost.model import CostModel
from dnnpart.graph.core import Graph, build_graph
from dnnpart.solvers.optcnn.configs import config_space
from dnnpart.solvers.optcnn.costs import BYTES_PER_ELEMENT, tile_forward_times
from dnnpart.solvers.optcnn.hardware import roofline
from dnnpart.solvers.optcnn.layers import LayerGraph
from dnnpart.solvers.optcnn.models import MODELS, build_model

__all__ = ["LAYER_GRAPHS", "graph_from_layers", "layer_graph", "layers_of"]

#: Names ``builtin:NAME`` resolves to a layer graph.
LAYER_GRAPHS = tuple(MODELS)

_LOCK = threading.Lock()
#: id(graph) -> (graph, layer graph); the graph is held so its id is never reused.
_LAYERS: dict[int, tuple[Graph, LayerGraph]] = {}


def graph_from_layers(layers: LayerGraph, *, preset: str = "P100") -> Graph:
    """The shared graph of a layer graph (module docstring); :func:`layers_of` gives it back.

    Examples
    --------
    >>> from dnnpart.solvers.optcnn.models import lenet5
    >>> g = graph_from_layers(lenet5(32))
    >>> g.n_nodes, g.op_types[1], layers_of(g).layers[1].kernel
    (8, 'conv', (5, 5))
    """
    n = len(layers.layers)
    times = np.zeros((n, 2))
    for col, name in enumerate((preset, "cpu")):
        spec = roofline(name)
        for i, layer in enumerate(layers.layers):
            times[i, col] = 1e3 * float(tile_forward_times(layer, config_space(layer, 1), spec)[0, 0])
    out_bytes = np.array([BYTES_PER_ELEMENT * float(np.prod(x.out_shape)) for x in layers.layers])
    src = [p for _, p in ((j, p) for j, x in enumerate(layers.layers) for p in x.inputs)]
    dst = [j for j, x in enumerate(layers.layers) for _ in x.inputs]
    model = CostModel.from_presets(preset)
    graph = build_graph(
        np.arange(n), src, dst, compute_time=times,
        edge_cost=model.edge_costs_ms(out_bytes[src]) if src else np.zeros(0),
        edge_bytes=out_bytes[src], memory_bytes=np.zeros(n), names=[x.name for x in layers.layers],
        op_types=[x.op for x in layers.layers], duplicate_edges="sum",
        param_bytes=np.array([BYTES_PER_ELEMENT * float(x.params) for x in layers.layers]),
        output_bytes=out_bytes,
    )
    # the graph numbers nodes in its own topological order: keep the layers in that order, so
    # layer i is node i (inputs keep their order per consumer, concat needs it)
    order = [int(v) for v in graph.original_ids]
    if order != list(range(n)):
        where = {old: new for new, old in enumerate(order)}
        layers = LayerGraph(layers.name, tuple(
            replace(layers.layers[old], inputs=tuple(where[p] for p in layers.layers[old].inputs))
            for old in order))
    with _LOCK:
        _LAYERS[id(graph)] = (graph, layers)
    return graph


def layers_of(graph: Graph) -> LayerGraph:
    """The layer graph behind ``graph``; ``ValueError`` where it has no layer attributes.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> layers_of(chain_graph(3))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the graph has no layer attributes ...
    """
    with _LOCK:
        hit = _LAYERS.get(id(graph))
    if hit is None or hit[0] is not graph:
        raise ValueError(
            "the graph has no layer attributes (op kind, shapes, kernels); the iteration objective "
            f"needs a layer graph: builtin:{'|'.join(LAYER_GRAPHS)}"
        )
    return hit[1]


def layer_graph(name: str, batch: int = 32) -> Graph:
    """``builtin:NAME``'s graph on ``batch`` samples (the ``iteration`` objective rescales it).

    Examples
    --------
    >>> layer_graph("vgg16").n_nodes   # input, 13 convolutions, 5 pools, 3 FC, softmax
    23
    """
    return graph_from_layers(build_model(name, batch))
