"""Problem presets of the papers' experiments, built from a graph.

Paper 1, section 7 evaluates single-sample latency in a *memory-bound* setting: accelerator
DRAM of 600 MB for models of at most 3.6 GB and 2 GB for models of at least 9 GB, as many
accelerators as make their total memory 1.4-1.8 times the model size (so one accelerator never
holds the model), and 8 CPU cores.
"""

from __future__ import annotations

import math

from dnnpart.devices.presets import reference_cluster
from dnnpart.errors import UsageError
from dnnpart.graph.core import Graph
from dnnpart.problem import LATENCY, Objective, Problem

#: Accelerator DRAM of the section-7 scenarios (bytes) and the model-size thresholds.
SMALL_MODEL_DRAM = 600e6
LARGE_MODEL_DRAM = 2e9
SMALL_MODEL_MAX_BYTES = 3.6e9
#: Total accelerator memory as a multiple of the model size (the paper gives 1.4-1.8).
MEMORY_HEADROOM = 1.4
#: CPU cores of the scenario.
SCENARIO_CPUS = 8


def latency_scenario(graph: Graph, *, name: str = "") -> Problem:
    """Paper 1's section-7 latency scenario for an inference graph.

    The model size is the sum of node memory. Accelerators get 600 MB when the model is at
    most 3.6 GB and 2 GB otherwise (the paper has no model between 3.6 and 9 GB); their number
    is the smallest that gives ``1.4x`` the model size in total.

    Examples
    --------
    >>> from dnnpart.testing import chain_graph
    >>> g = chain_graph(4, memory_bytes=5e8)  # a 2 GB model: 600 MB accelerators
    >>> p = latency_scenario(g)
    >>> len(p.cluster.accelerators), len(p.cluster.cpus), p.objective.kind
    (5, 8, 'latency')
    """
    model_bytes = float(graph.memory_bytes.sum())
    if not math.isfinite(model_bytes) or model_bytes <= 0:
        raise UsageError("the latency scenario needs a graph with positive, finite total memory")
    dram = SMALL_MODEL_DRAM if model_bytes <= SMALL_MODEL_MAX_BYTES else LARGE_MODEL_DRAM
    n_acc = max(2, math.ceil(MEMORY_HEADROOM * model_bytes / dram - 1e-9))
    cluster = reference_cluster(n_accelerators=n_acc, n_cpus=SCENARIO_CPUS, memory_bytes=dram)
    return Problem(graph=graph, cluster=cluster, objective=Objective(kind=LATENCY),
                   name=name or "latency scenario")
