"""Small random layer graphs and ``iteration`` problems (paper 3) for property tests."""

from __future__ import annotations

import numpy as np

from dnnpart.layerwise.layers import LayerGraph, NetBuilder
from dnnpart.problem import Objective, Problem

__all__ = ["random_layer_graph", "random_layer_problem"]


def random_layer_graph(rng: np.random.Generator, *, max_layers: int = 5) -> LayerGraph:
    """An input, 1 to ``max_layers - 2`` convolution / pooling / residual-add layers, an FC layer.

    Examples
    --------
    >>> g = random_layer_graph(np.random.default_rng(0))
    >>> g.layers[0].op, g.layers[-1].op
    ('input', 'fc')
    """
    b = NetBuilder("random", batch=int(rng.choice([2, 4, 8])))
    outs = [b.input(int(rng.choice([1, 2, 4])), 8, 8)]
    for i in range(int(rng.integers(1, max(2, max_layers - 1)))):
        src = outs[int(rng.integers(0, len(outs)))]
        kind = int(rng.integers(0, 3))
        if kind == 1 and b.shape(src)[2] >= 2:
            outs.append(b.pool(f"p{i}", src, 2, 2))
            continue
        same = [o for o in outs if o != src and b.shape(o) == b.shape(src)]
        if kind == 2 and same:
            outs.append(b.add(f"a{i}", src, same[0]))
            continue
        k = int(rng.choice([1, 3]))
        outs.append(b.conv(f"c{i}", src, int(rng.choice([2, 4])), k, 1, k // 2))
    b.fc("fc", outs[-1], 4)
    return b.build()


def random_layer_problem(rng: np.random.Generator, *, max_layers: int = 5, devices: int = 2) -> Problem:
    """A random layer graph on ``devices`` P100s under the ``iteration`` objective (batch 2).

    Examples
    --------
    >>> random_layer_problem(np.random.default_rng(1)).objective.kind
    'iteration'
    """
    from dnnpart.cost import resolve_cluster
    from dnnpart.layerwise.graphs import graph_from_layers

    layers = random_layer_graph(rng, max_layers=max_layers)
    return Problem(graph=graph_from_layers(layers), cluster=resolve_cluster(f"{devices}xP100").cluster,
                   objective=Objective(kind="iteration", batch=2), name="random-layers")
