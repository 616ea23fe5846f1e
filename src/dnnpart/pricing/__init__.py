"""Prices of work on a cluster: node and load times (paper 1), transfers, stages (Eq. 5).

:mod:`.loads` prices a placement's per-device loads under paper 1's cost model; :mod:`.pairs`
holds the one time of a transfer between two devices and of a ring all-reduce; :mod:`.stages`
the one stage time of a mapped pipeline (paper 4's Eqs. 5-7). Solvers, evaluators and
simulators all price through these.
"""

from dnnpart.pricing.loads import LoadBreakdown, combine, load_breakdown, node_times
from dnnpart.pricing.pairs import Topology, inverse_bandwidth, pair_time, ring_allreduce_time
from dnnpart.pricing.stages import (
    StageTimeKind,
    check_mapping,
    mapping_stage_times,
    max_stage_time,
    stage_times,
)

__all__ = [
    "LoadBreakdown",
    "StageTimeKind",
    "Topology",
    "check_mapping",
    "combine",
    "inverse_bandwidth",
    "load_breakdown",
    "mapping_stage_times",
    "max_stage_time",
    "node_times",
    "pair_time",
    "ring_allreduce_time",
    "stage_times",
]
