"""dnnpart: where should each operator of a DNN run, and how good is that answer?"""

# first, before the imports below take their second: a Ctrl-C while the dnnpart command
# starts exits 130 with one line (only in the command's own process; see dnnpart._entry)
from dnnpart._entry import exit_on_sigint_if_cli as _exit_on_sigint_if_cli

_exit_on_sigint_if_cli()

# ruff: noqa: E402  (the imports follow the call above on purpose)
from dnnpart.errors import (
    DnnpartError,
    FormatError,
    InfeasibleError,
    InvalidGraphError,
    MissingDependencyError,
    ProblemTooLargeError,
)
from dnnpart.evaluate import Evaluation, evaluate
from dnnpart.graph import Graph, GraphBuilder, build_graph
from dnnpart.plan import Plan, SolveResult, Status
from dnnpart.problem import Objective, Problem

__version__ = "0.1.0"

__all__ = [
    "DnnpartError",
    "Evaluation",
    "FormatError",
    "Graph",
    "GraphBuilder",
    "InfeasibleError",
    "InvalidGraphError",
    "MissingDependencyError",
    "Objective",
    "Plan",
    "Problem",
    "ProblemTooLargeError",
    "SolveResult",
    "Status",
    "__version__",
    "build_graph",
    "evaluate",
]
