"""One entry point for "a graph the user named": a file, a built-in example or a model spec.

Resolution order: ``builtin:NAME`` layer graphs (paper 3) where they apply, model specs
(``hf:``, ``builtin:``, ``module:``, ``torchvision:``, ``.onnx``; captured by
:mod:`dnnpart.frontends`), ``zoo:`` examples (:mod:`dnnpart.zoo`), then graph files
(:func:`dnnpart.io.loader.load_file`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dnnpart.devices.cluster import Cluster
from dnnpart.errors import FormatError
from dnnpart.io.loader import load_file
from dnnpart.problem import Objective, Problem
from dnnpart.workflow.plan_clusters import stored_cluster

if TYPE_CHECKING:
    from dnnpart.frontends.sources import ModelOptions


#: ModelOptions fields a graph file or zoo: example cannot honour, and their CLI flags.
_MODEL_FLAGS = {"input_shapes": "--input-shape", "input_dtype": "--input-dtype", "training": "--training",
                "optimizer": "--optimizer", "precision": "--precision", "config_file": "--config",
                "granularity": "--granularity", "inputs": "--input"}


def _layer_graph_name(text: str, objective: Objective | None) -> str | None:
    """The layer graph ``builtin:NAME`` names here, or ``None`` (see :func:`load_problem`)."""
    if not text.startswith("builtin:"):
        return None
    from dnnpart.layerwise.graphs import LAYER_GRAPHS
    from dnnpart.problem import ITERATION

    name = text.partition(":")[2].strip().lower().replace("-", "_")
    iteration = objective is not None and objective.kind == ITERATION
    if iteration and name not in LAYER_GRAPHS:
        raise FormatError(f"{text}: the iteration objective needs a layer graph; builtin layer graphs "
                          f"are {', '.join(LAYER_GRAPHS)}")
    torch_names = ("resnet50", "inception_v3", "bert")  # dnnpart.frontends.models.BUILTIN_MODELS
    if name in LAYER_GRAPHS and (iteration or name not in torch_names):
        return name
    return None


def iteration_batch_note(problem: Problem) -> str | None:
    """What the iteration objective does with the model's own batch, where it differs.

    Paper 3's Eq. 1 is priced on ``--batch`` samples per device on every device
    (:mod:`dnnpart.evaluate.iteration`), so the batch of the captured inputs (or of a builtin
    layer graph) is replaced; the note says by how many samples.

    Examples
    --------
    >>> from dnnpart.problem import Objective
    >>> problem = load_problem("builtin:lenet5", cluster="4xP100", objective=Objective(kind="iteration"))
    >>> iteration_batch_note(problem)  # doctest: +ELLIPSIS
    'iteration objective: priced on 32 samples per device (--batch) x 4 devices = 128 samples...'
    """
    from dnnpart.layerwise.graphs import layers_of

    given = layers_of(problem.graph).batch
    per_device, devices = problem.objective.batch, problem.cluster.n_devices
    total = per_device * devices
    if given == total:
        return None
    return (f"iteration objective: priced on {per_device} samples per device (--batch) x {devices} "
            f"devices = {total} samples per iteration; the input batch ({given}) is not used")


def _refuse_model_flags(model: ModelOptions | None, text: str) -> None:
    if model is None:
        return
    from dnnpart.frontends.sources import ModelOptions

    defaults = ModelOptions()
    used = [flag for name, flag in _MODEL_FLAGS.items() if getattr(model, name) != getattr(defaults, name)]
    if used:
        flags = ", ".join(used)
        raise FormatError(f"{flags}: apply to model specs (hf:, builtin:, module:, torchvision:, "
                          f".onnx), not to {text}")


def load_problem(
    spec: str | Path,
    *,
    cluster: Cluster | str | None = None,
    objective: Objective | None = None,
    model: ModelOptions | None = None,
    plan: str | Path | None = None,
) -> Problem:
    """Load ``zoo:NAME`` (built-in example), a dnn-partitioning ``.json``, a native ``.npz``, or
    a model spec (``hf:``, ``builtin:``, ``module:``, ``torchvision:``, ``.onnx``) imported on
    the fly with ``model``'s options.

    ``builtin:NAME`` names one of paper 3's layer graphs (:mod:`dnnpart.layerwise.graphs`:
    lenet5, alexnet, vgg16, inception_v3, resnet50, resnet152) under ``--objective iteration``,
    and wherever NAME is not a torch builtin model; otherwise the torch model of that name.
    Other model specs under ``--objective iteration`` become layer graphs at module
    granularity (:mod:`dnnpart.frontends.module_layers`).

    ``cluster`` (a :class:`~dnnpart.devices.cluster.Cluster` or a ``--cluster SPEC``: a
    cluster file, ``NxPRESET``, ``GENERATOR:key=value,...``) replaces the cluster the source
    carries; a native graph file carries none, and a model spec is priced for, and by default
    placed on, 4 A100s. Without ``cluster``, a ``plan`` file that stores the cluster it was made
    for (version 2 on) gives it (:func:`~dnnpart.workflow.plan_clusters.stored_cluster`: a plan
    is scored on its own devices).

    Examples
    --------
    >>> load_problem("nowhere.json")
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: nowhere.json: no such file
    >>> load_problem("zoo:bert-3", cluster="2xV100").cluster.name
    '2xV100-32GB'
    """
    if isinstance(cluster, str):
        from dnnpart.cost import resolve_cluster

        cluster = resolve_cluster(cluster).cluster
    if cluster is None and plan is not None:
        cluster = stored_cluster(plan, objective or Objective())
    text = str(spec)
    layers = _layer_graph_name(text, objective)
    if layers is not None:
        _refuse_model_flags(model, text)
        from dnnpart.layerwise.graphs import layer_graph

        if cluster is None:
            raise FormatError(f"{text}: a builtin layer graph carries no cluster; pass one (--cluster)")
        return Problem(graph=layer_graph(layers), cluster=cluster, objective=objective or Objective(),
                       name=layers)
    from dnnpart.frontends.sources import is_model_spec
    from dnnpart.problem import ITERATION

    if is_model_spec(text) and objective is not None and objective.kind == ITERATION:
        # a real model as paper 3's layer graph (module granularity; frontends/module_layers.py)
        from dnnpart.frontends.module_layers import model_layer_graph
        from dnnpart.layerwise.graphs import graph_from_layers

        if cluster is None:
            raise FormatError(f"{text}: the iteration objective needs a cluster of accelerators (--cluster)")
        layers_of_model = model_layer_graph(text, model)
        return Problem(graph=graph_from_layers(layers_of_model), cluster=cluster, objective=objective,
                       name=layers_of_model.name)
    if is_model_spec(text):
        from dnnpart.frontends.sources import import_model_spec

        imported, priced = import_model_spec(text, model)
        return Problem(
            graph=imported.graph,
            cluster=cluster or priced.cluster,
            objective=objective or Objective(),
            name=imported.ir.name,
        )
    _refuse_model_flags(model, text)
    if text.startswith("zoo:"):
        from dnnpart.zoo import load_example

        try:
            problem = load_example(text)
        except ValueError as exc:
            raise FormatError(str(exc)) from None
        if cluster is not None:
            problem = Problem(graph=problem.graph, cluster=cluster, name=problem.name)
        return problem if objective is None else problem.with_objective(objective)
    return load_file(text, cluster=cluster, objective=objective)
