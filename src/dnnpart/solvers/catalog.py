"""The built-in methods: which module registers each, imported on first use.

Importing every method module costs about 40 ms, a tenth of a small solve's whole process
(issue 20, start-up), so :func:`~dnnpart.solvers.registry.get_method` imports only the
module of the method asked for; listing the methods imports them all. A test checks that
this table names exactly the methods the modules register.
"""

from __future__ import annotations

import importlib

#: method name -> the module whose import registers it
METHOD_MODULES: dict[str, str] = {
    "brute-force": "dnnpart.solvers.brute_force",
    "brute-force-contiguous": "dnnpart.solvers.brute_force",
    "cp-heuristic": "dnnpart.baselines.makespan_baselines",
    "data-parallel": "dnnpart.solvers.optcnn.methods",
    "dp": "dnnpart.solvers.dp",
    "dpl": "dnnpart.solvers.dp",
    "expert": "dnnpart.baselines.expert",
    "graph-partitioner": "dnnpart.baselines.graph_partitioner",
    "greedy": "dnnpart.baselines.greedy",
    "ip": "dnnpart.solvers.ip.driver",
    "ip-noncontig": "dnnpart.solvers.ip.driver",
    "linear-clustering": "dnnpart.baselines.makespan_baselines",
    "local-search": "dnnpart.baselines.local_search",
    "model-parallel": "dnnpart.solvers.optcnn.methods",
    "one-accelerator": "dnnpart.baselines.single_device",
    "optcnn": "dnnpart.solvers.optcnn.methods",
    "optcnn-dfs": "dnnpart.solvers.optcnn.methods",
    "owt": "dnnpart.solvers.optcnn.methods",
    "pardnn": "dnnpart.solvers.pardnn.method",  # registers only with the makespan objective
    "parmesan": "dnnpart.solvers.parmesan.solver",
    "parmesan-noclust": "dnnpart.solvers.parmesan.solver",
    "parmesan-norefine": "dnnpart.solvers.parmesan.solver",
    "pipedream": "dnnpart.baselines.pipedream",
    "pipeline": "dnnpart.baselines.pipeline_split",
    "round-robin": "dnnpart.baselines.makespan_baselines",
}


def load(name: str) -> None:
    """Import the module that registers the built-in method ``name`` (none if unknown).

    Examples
    --------
    >>> load("dpl")
    >>> from dnnpart.solvers.registry import _METHODS
    >>> "dpl" in _METHODS
    True
    """
    module = METHOD_MODULES.get(name)
    if module is not None:
        importlib.import_module(module)


def load_all() -> None:
    """Import every built-in method module (each registers its methods)."""
    for module in sorted(set(METHOD_MODULES.values())):
        importlib.import_module(module)
