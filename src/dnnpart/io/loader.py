"""Graph files: a dnn-partitioning ``.json`` or a native ``.npz``, as a :class:`Problem`.

Model specs (``zoo:``, ``hf:``, ``builtin:``, ...) are resolved above the file formats, by
:func:`dnnpart.workflow.load_problem`, which reads files through :func:`load_file`.
"""

from __future__ import annotations

from pathlib import Path

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import FormatError
from dnnpart.graph.core import Graph
from dnnpart.io import fields as f
from dnnpart.io.dnn_partitioning import looks_like_reference, parse_problem
from dnnpart.limits import check_finite_sum
from dnnpart.problem import Objective, Problem

__all__ = ["check_graph_sums", "load_file"]


def check_graph_sums(graph: Graph, source: str) -> None:
    """Refuse graphs whose times, sizes or transfer costs sum past float64 (at the edge).

    Every solver adds these up; ``1e308 + 1e308`` would be ``inf`` there, and a plan scored
    ``inf`` is nonsense rather than an error.
    """
    check_finite_sum(graph.compute_time, f"{source}: node times")
    check_finite_sum(graph.edge_cost, f"{source}: edge costs")
    check_finite_sum(graph.memory_bytes, f"{source}: node memory")
    check_finite_sum(graph.edge_bytes, f"{source}: edge bytes")


def load_file(path: str | Path, *, cluster: Cluster | None = None,
              objective: Objective | None = None) -> Problem:
    """A dnn-partitioning ``.json`` (its cluster, unless ``cluster`` replaces it) or a native
    ``.npz`` graph (which carries no cluster: ``cluster`` is required).

    Examples
    --------
    >>> load_file("nowhere.json")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: nowhere.json: no such file
    """
    path = Path(path)
    if path.suffix == ".npz":
        from dnnpart.io.native import load_graph

        graph = load_graph(path)
        check_graph_sums(graph, str(path))
        if cluster is None:
            raise FormatError(f"{path}: a native graph file carries no cluster; pass one (--cluster)")
        return Problem(graph=graph, cluster=cluster, objective=objective or Objective(), name=path.stem)
    data = f.read_json(path)
    if looks_like_reference(data):
        problem = parse_problem(data, str(path), cluster=cluster, objective=objective)
        check_graph_sums(problem.graph, str(path))
        return problem
    raise FormatError(
        f"{path}: unrecognised graph format (expected a dnn-partitioning JSON object with "
        "'nodes' and 'edges', a native .npz graph, or zoo:NAME)"
    )
