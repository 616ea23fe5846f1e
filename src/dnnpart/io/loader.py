"""One entry point for "a graph the user named": a file or a built-in example."""

from __future__ import annotations

from pathlib import Path

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import FormatError
from dnnpart.io import fields as f
from dnnpart.io.dnn_partitioning import looks_like_reference, parse_problem
from dnnpart.problem import Objective, Problem


def load_problem(
    spec: str | Path, *, cluster: Cluster | None = None, objective: Objective | None = None
) -> Problem:
    """Load ``zoo:NAME`` (built-in example), ``builtin:NAME`` (paper 3's layer graphs:
    :mod:`dnnpart.frontends.layer_graphs`), a dnn-partitioning ``.json`` or a native ``.npz``.

    ``cluster`` replaces the cluster the source carries; a native graph file carries none.

    Examples
    --------
    >>> load_problem("nowhere.json")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: nowhere.json: no such file
    """
    text = str(spec)
    if text.startswith("zoo:"):
        from dnnpart.zoo import load_example

        try:
            problem = load_example(text)
        except ValueError as exc:
            raise FormatError(str(exc)) from None
        if cluster is not None:
            problem = Problem(graph=problem.graph, cluster=cluster, name=problem.name)
        return problem if objective is None else problem.with_objective(objective)
    if text.startswith("builtin:"):
        from dnnpart.frontends.layer_graphs import LAYER_GRAPHS, layer_graph

        name = text.partition(":")[2].strip().lower().replace("-", "_")
        if name not in LAYER_GRAPHS:
            raise FormatError(f"{text}: unknown layer graph; builtin layer graphs are "
                              f"{', '.join(LAYER_GRAPHS)}")
        if cluster is None:
            raise FormatError(f"{text}: a builtin layer graph carries no cluster; pass one (--cluster)")
        return Problem(graph=layer_graph(name), cluster=cluster, objective=objective or Objective(),
                       name=name)
    path = Path(text)
    if path.suffix == ".npz":
        from dnnpart.io.native import load_graph

        graph = load_graph(path)
        if cluster is None:
            raise FormatError(f"{path}: a native graph file carries no cluster; pass one (--cluster)")
        return Problem(graph=graph, cluster=cluster, objective=objective or Objective(), name=path.stem)
    data = f.read_json(path)
    if looks_like_reference(data):
        return parse_problem(data, str(path), cluster=cluster, objective=objective)
    raise FormatError(
        f"{path}: unrecognised graph format (expected a dnn-partitioning JSON object with "
        "'nodes' and 'edges', a native .npz graph, or zoo:NAME)"
    )
