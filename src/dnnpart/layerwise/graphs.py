"""``builtin:NAME`` layer graphs (paper 3's networks) as shared :class:`~dnnpart.graph.core.Graph` s.

The six networks of :mod:`dnnpart.layerwise.models` -- ``lenet5``, ``alexnet``,
``vgg16``, ``inception_v3`` (no auxiliary head), ``resnet50``, ``resnet152`` -- become graphs
with one node per layer: names, op kinds (``op_types``), ``param_bytes`` (FP32),
``output_bytes``, forward compute times priced by the roofline of the ``P100`` preset
(accelerator column) and of the ``cpu`` preset (CPU column), in ms, and edge costs of the
output bytes at the preset's host link. ``memory_bytes`` is 0: paper 3's cost model has no
memory term, so no memory constraint applies to these graphs.

**Layer attributes** (op kind, shapes, kernel/stride/padding, parameters) are what the
``iteration`` objective reads. They are written into the graph's layer-attribute table
(:class:`~dnnpart.graph.core.LayerAttrs`: ``kind`` = our op kind, ``output_shape``,
``kernel``/``stride``/``padding`` for windowed layers, ``()`` otherwise) and its
``param_bytes``; :func:`layers_of` reads them back (input shapes are the producers' output
shapes). A layer's inputs are read in the order its ``inputs`` attribute lists them (the
producers' original ids, written by :func:`graph_from_layers`: a concatenation stacks its
inputs in that order); where a graph does not give it, the predecessors in node order. So a
graph written to a file and read back prices exactly as the one built here. Graphs whose
kinds are not ours (an imported torch model's aten ops) are refused with the kinds named.

Choice: in GRAPH arguments these six names resolve to layer graphs (they need no torch);
``dnnpart import builtin:resnet50`` still builds the torch module of the same name.
"""

from __future__ import annotations

import numpy as np

from dnnpart.cost.model import CostModel
from dnnpart.cost.specs import load_catalog
from dnnpart.errors import UsageError
from dnnpart.graph.core import Graph, LayerAttrs, build_graph
from dnnpart.layerwise.configs import config_space
from dnnpart.layerwise.costs import BYTES_PER_ELEMENT, tile_forward_times
from dnnpart.layerwise.layers import OP_KINDS, LayerGraph, LayerSpec
from dnnpart.layerwise.models import MODELS, build_model

__all__ = ["LAYER_GRAPHS", "graph_from_layers", "layer_graph", "layers_from_attrs", "layers_of"]

#: Names ``builtin:NAME`` resolves to a layer graph.
LAYER_GRAPHS = tuple(MODELS)


def graph_from_layers(layers: LayerGraph, *, preset: str = "P100") -> Graph:
    """The shared graph of a layer graph (module docstring); :func:`layers_of` gives it back.

    Examples
    --------
    >>> from dnnpart.layerwise.models import lenet5
    >>> g = graph_from_layers(lenet5(32))
    >>> g.n_nodes, g.op_types[1], layers_of(g).layers[1].kernel
    (8, 'conv', (5, 5))
    """
    n = len(layers.layers)
    times = np.zeros((n, 2))
    for col, name in enumerate((preset, "cpu")):
        spec = load_catalog().device(name)
        for i, layer in enumerate(layers.layers):
            times[i, col] = 1e3 * float(tile_forward_times(layer, config_space(layer, 1), spec)[0, 0])
    out_bytes = np.array([BYTES_PER_ELEMENT * float(np.prod(x.out_shape)) for x in layers.layers])
    src = [p for _, p in ((j, p) for j, x in enumerate(layers.layers) for p in x.inputs)]
    dst = [j for j, x in enumerate(layers.layers) for _ in x.inputs]
    model = CostModel.from_presets(preset)
    windows = [x.has_window for x in layers.layers]
    attrs = LayerAttrs(
        kind=tuple(x.op for x in layers.layers),
        output_shape=tuple(tuple(x.out_shape) for x in layers.layers),
        kernel=tuple(tuple(x.kernel) if w else () for x, w in zip(layers.layers, windows, strict=True)),
        stride=tuple(tuple(x.stride) if w else () for x, w in zip(layers.layers, windows, strict=True)),
        padding=tuple(tuple(x.padding) if w else () for x, w in zip(layers.layers, windows, strict=True)),
        inputs=tuple(tuple(x.inputs) for x in layers.layers),
    )
    graph = build_graph(
        np.arange(n), src, dst, compute_time=times,
        edge_cost=model.edge_costs_ms(out_bytes[src]) if src else np.zeros(0),
        edge_bytes=out_bytes[src], memory_bytes=np.zeros(n), names=[x.name for x in layers.layers],
        op_types=[x.op for x in layers.layers], duplicate_edges="sum",
        param_bytes=np.array([BYTES_PER_ELEMENT * float(x.params) for x in layers.layers]),
        output_bytes=out_bytes, layer_attrs=attrs,
    )
    return graph


def layers_of(graph: Graph) -> LayerGraph:
    """The layer graph behind ``graph``; ``ValueError`` where it has no layer attributes.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> layers_of(chain_graph(3))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.UsageError: the graph has no layer attributes ...
    """
    attrs = graph.layer_attrs
    if attrs is None or graph.param_bytes is None:
        raise UsageError(
            "the graph has no layer attributes (op kind, shapes, kernels); the iteration objective "
            f"needs a layer graph: builtin:{'|'.join(LAYER_GRAPHS)}"
        )
    return layers_from_attrs(graph)


def layers_from_attrs(graph: Graph) -> LayerGraph:
    """The layer graph of a graph's layer-attribute table (see the module docstring).

    Examples
    --------
    >>> from dnnpart.layerwise.models import alexnet
    >>> layers_from_attrs(graph_from_layers(alexnet(8))).layers == alexnet(8).layers
    True
    """
    attrs, params = graph.layer_attrs, graph.param_bytes
    if attrs is None or params is None:
        raise UsageError("the graph has no layer attributes or parameter bytes")
    foreign = sorted({k for k in attrs.kind if k not in OP_KINDS})
    if foreign:
        raise UsageError(f"layer kinds {foreign[:5]} are not layer-graph kinds ({', '.join(OP_KINDS)}); "
                         "the iteration objective takes builtin layer graphs")
    node_of = {int(o): v for v, o in enumerate(graph.original_ids.tolist())}
    specs: list[LayerSpec] = []
    for v in range(graph.n_nodes):
        shape = attrs.output_shape[v]
        if len(shape) != 4:
            raise UsageError(f"node {graph.label(v)}: output shape {shape} is not (N, C, H, W)")
        preds = sorted(int(u) for u in graph.pred_idx[graph.pred_ptr[v]:graph.pred_ptr[v + 1]])
        if attrs.inputs[v]:
            ordered = [node_of.get(int(o), -1) for o in attrs.inputs[v]]
            if sorted(set(ordered)) != preds:
                raise UsageError(f"node {graph.label(v)}: its layer inputs {list(attrs.inputs[v])} "
                                 "are not its predecessors' ids")
            preds = ordered
        window = {}
        if attrs.kernel[v]:
            window = {"kernel": _pair(attrs.kernel[v]), "stride": _pair(attrs.stride[v]),
                      "padding": _pair(attrs.padding[v])}
        specs.append(LayerSpec(
            graph.names[v], attrs.kind[v], tuple(preds), tuple(specs[u].out_shape for u in preds),
            (int(shape[0]), int(shape[1]), int(shape[2]), int(shape[3])),
            params=round(float(params[v]) / BYTES_PER_ELEMENT), **window,
        ))
    return LayerGraph("graph", tuple(specs))


def _pair(values: tuple[int, ...]) -> tuple[int, int]:
    return (int(values[0]), int(values[-1]))


def layer_graph(name: str, batch: int = 32) -> Graph:
    """``builtin:NAME``'s graph on ``batch`` samples (the ``iteration`` objective rescales it).

    Examples
    --------
    >>> layer_graph("vgg16").n_nodes   # input, 13 convolutions, 5 pools, 3 FC, softmax
    23
    """
    return graph_from_layers(build_model(name, batch))
