"""Contraction of an operator graph by its layer annotation (paper 1, section 6.2, Table 3).

Every node with a ``layerId`` joins the colocation class of the other nodes of its layer
(classes that share a layer merge); the DP on the result places whole layers. Nodes without
a layer keep their class. The plan stays a plan of the original graph.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

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
    # Link consecutive members of every colour class and every layer; the connected
    # components of those links are the merged classes.
    heads, tails = [], []
    for labels in (graph.color_class, graph.layer_id):
        members = np.flatnonzero(labels != NO_CLASS)
        order = members[np.argsort(labels[members], kind="stable")]
        same = labels[order[1:]] == labels[order[:-1]]
        heads.append(order[:-1][same])
        tails.append(order[1:][same])
    head, tail = np.concatenate(heads), np.concatenate(tails)
    links = coo_matrix((np.ones(head.size), (head, tail)), shape=(n, n))
    _, roots = connected_components(links, directed=False)
    recoloured = dataclasses.replace(graph, color_class=roots.astype(graph.color_class.dtype))
    return Problem(graph=recoloured, cluster=problem.cluster, objective=problem.objective,
                   name=problem.name)
