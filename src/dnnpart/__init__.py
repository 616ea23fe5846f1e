"""dnnpart: where should each operator of a DNN run, and how good is that answer?"""

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
