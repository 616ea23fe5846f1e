"""Parmesan (paper 4): operator-level pipeline partitioning and optimal stage-to-device
mapping on general topologies.

Phase 2 (mapping) lives in :mod:`~dnnpart.solvers.parmesan.search` over the inputs of
:mod:`~dnnpart.stages`; see ``docs/methods/parmesan.md`` for every choice made
where the paper is silent.
"""

from __future__ import annotations

from dnnpart.pricing.pairs import Topology
from dnnpart.pricing.stages import mapping_stage_times, max_stage_time
from dnnpart.solvers.parmesan.baselines import cs_mapping, p2p_first_mapping, random_mapping
from dnnpart.solvers.parmesan.cost import (
    choose_instantiation,
    lower_bound,
    lower_bound_allreduce,
    lower_bound_p2p,
    total_p2p_time,
)
from dnnpart.solvers.parmesan.search import MappingResult, map_stages, ring_orders
from dnnpart.stages import PipelineStages

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
    "mapping_stage_times",
    "max_stage_time",
    "p2p_first_mapping",
    "random_mapping",
    "ring_orders",
    "total_p2p_time",
]
