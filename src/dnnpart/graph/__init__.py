"""Immutable DAG with costs, its builder and structural queries."""

from dnnpart.graph.algorithms import (
    ancestors,
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

__all__ = [
    "DEVICE_KINDS",
    "NO_CLASS",
    "Graph",
    "GraphBuilder",
    "ancestors",
    "build_graph",
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
