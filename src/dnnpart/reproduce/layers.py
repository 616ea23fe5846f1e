"""Contraction of an operator graph by its layer annotation (paper 1, section 6.2, Table 3).

Every node with a ``layerId`` joins the colocation class of the other nodes of its layer
(classes that share a layer merge); the DP on the result places whole layers. Nodes without
a layer keep their class. The plan stays a plan of the original graph.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dnnpart.graph.core import NO_CLASS, Graph
from dnnpart.problem import Problem


def has_layer_ids(graph: Graph) -> bool:
    """Whether any node carries a layer id.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> has_layer_ids(chain_graph(3))
    False
    """
    return bool(np.any(graph.layer_id >= 0))


def contract_layers(problem: Problem) -> Problem:
    """``problem`` with every layer made one colocation class (merged with existing classes).

    Examples
    --------
    >>> from dnnpart.testing import chain_problem
    >>> contract_layers(chain_problem([1, 2], n_accelerators=1)).graph.color_class.tolist()
    [0, 1]
    """
    graph = problem.graph
    n = graph.n_nodes
    parent = np.arange(n, dtype=np.int64)

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = int(parent[root])
        while parent[x] != root:
            parent[x], x = root, int(parent[x])
        return root

    for labels in (graph.color_class, graph.layer_id):
        first: dict[int, int] = {}
        for v in np.flatnonzero(labels != NO_CLASS).tolist():
            head = first.setdefault(int(labels[v]), v)
            a, b = find(head), find(v)
            if a != b:
                parent[b] = a
    roots = np.array([find(v) for v in range(n)], dtype=np.int64)
    recoloured = dataclasses.replace(graph, color_class=roots.astype(graph.color_class.dtype))
    return Problem(graph=recoloured, cluster=problem.cluster, objective=problem.objective,
                   name=problem.name)
