"""Parmesan (paper 4): operator-level pipeline partitioning and optimal stage-to-device
mapping on general topologies.

Phase 2 (mapping) lives in :mod:`~dnnpart.solvers.parmesan.search` over the inputs of
:mod:`~dnnpart.solvers.parmesan.stages`; see ``docs/parmesan.md`` for every choice made
where the paper is silent.
"""

from __future__ import annotations

from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
from dnnpart.solvers.parmesan.cost import (
    choose_instantiation,
    lower_bound,
    lower_bound_allreduce,
    lower_bound_p2p,
    max_stage_time,
    stage_times,
    total_p2p_time,
)
from dnnpart.solvers.parmesan.search import MappingResult, map_stages, ring_orders
from dnnpart.solvers.parmesan.stages import PipelineStages, Topology

__all__ = [
    "MappingResult",
    "PipelineStages",
    "Topology",
    "choose_instantiation",
    "cs_mapping",
    "lower_bound",
    "lower_bound_allreduce",
    "lower_bound_p2p",
    "map_stages",
    "max_stage_time",
    "p2p_first_mapping",
    "random_mapping",
    "ring_orders",
    "stage_times",
    "total_p2p_time",
]
