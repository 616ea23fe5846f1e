"""One entry point for "a graph the user named": a file or a built-in example."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import FormatError
from dnnpart.graph.core import Graph
from dnnpart.io import fields as f
from dnnpart.io.dnn_partitioning import looks_like_reference, parse_problem
from dnnpart.limits import check_finite_sum
from dnnpart.problem import Objective, Problem

if TYPE_CHECKING:
    from dnnpart.frontends.sources import ModelOptions


#: ModelOptions fields a graph file or zoo: example cannot honour, and their CLI flags.
_MODEL_FLAGS = {"input_shapes": "--input-shape", "input_dtype": "--input-dtype", "training": "--training",
                "optimizer": "--optimizer", "precision": "--precision", "config_file": "--config",
                "granularity": "--granularity"}


def check_graph_sums(graph: Graph, source: str) -> None:
    """Refuse graphs whose times, sizes or transfer costs sum past float64 (at the edge).

    Every solver adds these up; ``1e308 + 1e308`` would be ``inf`` there, and a plan scored
    ``inf`` is nonsense rather than an error.
    """
    check_finite_sum(graph.compute_time, f"{source}: node times")
    check_finite_sum(graph.edge_cost, f"{source}: edge costs")
    check_finite_sum(graph.memory_bytes, f"{source}: node memory")
    check_finite_sum(graph.edge_bytes, f"{source}: edge bytes")


def load_problem(
    spec: str | Path,
    *,
    cluster: Cluster | None = None,
    objective: Objective | None = None,
    model: ModelOptions | None = None,
) -> Problem:
    """Load ``zoo:NAME`` (built-in example), a dnn-partitioning ``.json``, a native ``.npz``, or
    a model spec (``hf:``, ``builtin:``, ``module:``, ``torchvision:``, ``.onnx``) imported on
    the fly with ``model``'s options.

    ``cluster`` replaces the cluster the source carries; a native graph file carries none, and a
    model spec is priced for, and by default placed on, 4 A100s and a host CPU.

    Examples
    --------
    >>> load_problem("nowhere.json")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: nowhere.json: no such file
    """
    text = str(spec)
    from dnnpart.frontends.sources import is_model_spec

    if is_model_spec(text):
        from dnnpart.frontends.sources import import_model_spec

        imported, priced = import_model_spec(text, model)
        return Problem(
            graph=imported.graph,
            cluster=cluster or priced.cluster,
            objective=objective or Objective(),
            name=imported.ir.name,
        )
    if model is not None:
        from dnnpart.frontends.sources import ModelOptions

        defaults = ModelOptions()
        used = [flag for name, flag in _MODEL_FLAGS.items()
                if getattr(model, name) != getattr(defaults, name)]
        if used:
            flags = ", ".join(used)
            raise FormatError(f"{flags}: apply to model specs (hf:, builtin:, module:, torchvision:, "
                              f".onnx), not to {text}")
    if text.startswith("zoo:"):
        from dnnpart.zoo import load_example

        try:
            problem = load_example(text)
        except ValueError as exc:
            raise FormatError(str(exc)) from None
        if cluster is not None:
            problem = Problem(graph=problem.graph, cluster=cluster, name=problem.name)
        return problem if objective is None else problem.with_objective(objective)
    path = Path(text)
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
