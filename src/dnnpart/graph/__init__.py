"""Immutable DAG with costs, its builder and structural queries."""

from dnnpart.graph.algorithms import (
    ancestors,
    colocation_units,
    communication_to_computation_ratio,
    contiguity_witness,
    count_ideals,
    critical_path,
    degree_of_parallelism,
    descendants,
    is_contiguous,
    is_ideal,
    is_reachable,
    topological_levels,
    width,
)
from dnnpart.graph.builder import GraphBuilder
from dnnpart.graph.core import DEVICE_KINDS, NO_CLASS, Graph, build_graph
from dnnpart.graph.training import add_backward_pass, backward_partner

__all__ = [
    "DEVICE_KINDS",
    "NO_CLASS",
    "Graph",
    "GraphBuilder",
    "add_backward_pass",
    "ancestors",
    "backward_partner",
    "build_graph",
    "colocation_units",
    "communication_to_computation_ratio",
    "contiguity_witness",
    "count_ideals",
    "critical_path",
    "degree_of_parallelism",
    "descendants",
    "is_contiguous",
    "is_ideal",
    "is_reachable",
    "topological_levels",
    "width",
]
