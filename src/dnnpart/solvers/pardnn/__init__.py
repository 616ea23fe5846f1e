"""PARDNN (paper 2, Qararyah et al. 2021): memory-constrained partitioning of training graphs.

Steps as modules: :mod:`.levels`, :mod:`.slicing` (Alg. 1), :mod:`.fenwick`, :mod:`.mapping`
(LFLAM, Alg. 2, Eq. 1), :mod:`.constraints` (§4), :mod:`.memory_balance` (heuristic II);
numba kernels in :mod:`.kernels`; :func:`pardnn` / :func:`pardnn_graph` run them in order.
"""

from dnnpart.solvers.pardnn.inputs import Costs
from dnnpart.solvers.pardnn.solver import PardnnResult, pardnn, pardnn_graph

__all__ = ["Costs", "PardnnResult", "pardnn", "pardnn_graph"]
