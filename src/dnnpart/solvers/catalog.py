"""Imports every built-in method module so that each registers itself."""

from dnnpart.baselines import (  # noqa: F401
    expert,
    graph_partitioner,
    greedy,
    local_search,
    makespan_baselines,
    pipedream,
    pipeline_split,
    single_device,
)
from dnnpart.solvers import (
    brute_force,  # noqa: F401
    dp,  # noqa: F401
    ip,  # noqa: F401
)
from dnnpart.solvers.optcnn import methods  # noqa: F401
from dnnpart.solvers.pardnn import method as pardnn_method  # noqa: F401  (registers with makespan only)
from dnnpart.solvers.parmesan import solver as parmesan_solver  # noqa: F401
