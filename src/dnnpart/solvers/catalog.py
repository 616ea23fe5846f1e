"""Imports every built-in method module so that each registers itself."""

from dnnpart.baselines import expert, graph_partitioner, greedy, local_search, pipedream, single_device  # noqa: F401
from dnnpart.solvers import (
    brute_force,  # noqa: F401
    dp,  # noqa: F401
    ip,  # noqa: F401
)
from dnnpart.solvers.parmesan import solver as parmesan_solver  # noqa: F401
