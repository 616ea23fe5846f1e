"""The library's verbs for a model: what the CLI and the reproductions call.

:func:`load_problem` turns what a user names (a graph file, a built-in example, a model spec)
into a :class:`~dnnpart.problem.Problem`.
"""

from dnnpart.workflow.inputs import load_problem

__all__ = ["load_problem"]
