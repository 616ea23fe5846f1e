"""Import a model into a priced graph (``dnnpart import``, and the first step of planning).

A model spec (``hf:``, ``builtin:``, ``torchvision:``, ``module:``, ``.onnx``; see
:mod:`dnnpart.frontends.sources`) is captured and priced by the cost model of the cluster it
is planned for, at the requested precision. Warnings of the capture (operators without a cost
formula, orphan backward nodes) are kept as text: the library does not print.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.errors import FormatError
from dnnpart.problem import Objective, Problem
from dnnpart.workflow.phases import ProgressFactory, frontend_name, phase

if TYPE_CHECKING:
    from dnnpart.cost.clusters import PricedCluster
    from dnnpart.frontends.build import ImportedModel
    from dnnpart.frontends.sources import ModelInput, ModelSource

#: Cluster a model is planned for when none is named.
DEFAULT_CLUSTER = "4xA100"
#: Called with each message the library has for the user (warnings, choices it made).
Notify = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ModelImport:
    """A model captured and priced for a cluster.

    Attributes
    ----------
    source : the resolved model (a torch module with example inputs, or an ONNX file).
    imported : the priced graph and the operators it came from.
    priced : the cluster and the cost model that priced the graph.
    warnings : what the capture warned about, one message each.
    notes : what the model is: the class built (``hf:mixtral -> MixtralForCausalLM (causal LM
        head)``), a mixture of experts' routed fraction.
    """

    source: ModelSource
    imported: ImportedModel
    priced: PricedCluster
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def problem(self, objective: Objective | None = None) -> Problem:
        """The placement problem of this model on its cluster."""
        return Problem(graph=self.imported.graph, cluster=self.priced.cluster,
                       name=self.imported.ir.name, objective=objective or Objective())

    def summary(self) -> dict[str, Any]:
        """What the model is (:func:`~dnnpart.workflow.summary.model_summary`), with the class
        built (``model_class``) and the notes on it."""
        from dnnpart.workflow.summary import model_summary

        return model_summary(self.imported, self.priced.cluster) | {
            "model_class": self.source.model_class or None, "notes": list(self.notes)}

    def write_graph(self, path: str | Path) -> Path:
        """Write the priced graph: ``.npz`` (native) or ``.json`` (the dnn-partitioning format
        plus each operator's type, module path and FLOPs, and edge bytes)."""
        target = Path(path)
        if target.suffix == ".npz":
            from dnnpart.io.native import save_graph

            save_graph(self.imported.graph, target)
        else:
            from dnnpart.io.dnn_partitioning import write_json_atomic

            write_json_atomic(model_graph_dict(self.problem(), self.imported), target)
        return target


def priced_cluster(spec: str, *, specs: str | Path | None = None,
                   precision: str = "fp32") -> PricedCluster:
    """Resolve ``--cluster SPEC`` with the device presets of ``specs`` (a YAML/JSON file merged
    over ours), priced at ``precision``.

    Examples
    --------
    >>> priced_cluster("2xV100", precision="fp16").cluster.name
    '2xV100-32GB'
    """
    from dnnpart.cost import load_catalog, resolve_cluster

    priced = resolve_cluster(spec, catalog=load_catalog(specs) if specs else None)
    return replace(priced, cost_model=priced.cost_model.with_precision(precision))


def import_model(
    spec: str | Any,
    *,
    cluster: str = DEFAULT_CLUSTER,
    specs: str | Path | None = None,
    training: bool = False,
    optimizer: str | None = None,
    precision: str = "fp32",
    input_shapes: Sequence[Sequence[int]] = (),
    input_dtype: str | None = None,
    inputs: Sequence[ModelInput] = (),
    frontend: str = "export",
    config: str | Path | None = None,
    granularity: str = "op",
    profile: bool = False,
    repeats: int = 10,
    notify: Notify | None = None,
    progress: ProgressFactory | None = None,
    example_inputs: Sequence[Any] = (),
) -> ModelImport:
    """Capture the model ``spec`` and price it for ``cluster``.

    Parameters
    ----------
    spec : ``FILE.onnx``, ``builtin:NAME``, ``torchvision:NAME``, ``hf:ARCH[:KEY=VALUE,...]``
        or ``module:PKG.MOD:CALLABLE`` (imports and calls your code); or a live
        ``torch.nn.Module`` with ``example_inputs`` (:mod:`dnnpart.frontends.live`).
    cluster : ``NxPRESET`` (``4xA100``), a cluster file or ``GENERATOR:key=value,...``;
        ``specs``: your own device/link presets (YAML/JSON), merged over ours.
    training : the training graph (torch: real autograd forward and backward; ONNX: a
        synthesised backward); ``optimizer`` (``sgd``/``adam``) adds one update op per parameter.
    precision : ``fp32``, ``tf32``, ``bf16`` or ``fp16`` (tensor-core peaks, 2-byte tensors).
    input_shapes, input_dtype : the example inputs in order, one dtype for all (default: the
        model's own).
    inputs : the example inputs by name, each with its shape and dtype
        (:class:`~dnnpart.frontends.sources.ModelInput`, ``--input name=shape:dtype``); not
        with ``input_shapes``/``input_dtype``.
    frontend : ``export`` (``torch.export``, one node per aten op) or ``fx``.
    config : ``hf:`` models: a JSON file of config overrides.
    granularity : ``op`` (one node per operator) or ``module`` (one per run of operators
        called from one module).
    profile, repeats : measure CPU times (medians of ``repeats`` runs) instead of estimating.
    notify : called with each note on the model (the class built) and each warning of the
        capture (``"warning: ..."``).
    progress : told the phase as it starts: ``"importing SPEC (torch.export)"`` (capture and
        pricing; see :mod:`dnnpart.workflow.phases`).

    Examples
    --------
    >>> m = import_model("builtin:resnet50", cluster="2xA100", input_shapes=[(1, 3, 32, 32)])
    >>> m.summary()["operators"], m.problem().cluster.name, m.warnings
    (175, '2xA100-40GB', ())
    """
    from dnnpart.frontends.sources import import_source, resolve_model

    priced = priced_cluster(cluster, specs=specs, precision=precision)
    label = spec if isinstance(spec, str) else f"a live {type(spec).__name__}"
    with phase(progress, f"importing {label} ({frontend_name(label, frontend)})"):
        if isinstance(spec, str):
            source = resolve_model(spec, input_shapes=[tuple(s) for s in input_shapes] or None,
                                   input_dtype=input_dtype, inputs=tuple(inputs), frontend=frontend,
                                   config_file=config)
        else:
            from dnnpart.frontends.live import live_source

            source = live_source(spec, example_inputs, frontend=frontend)
        if repeats < 1:
            raise FormatError(f"--repeats {repeats}: expected >= 1")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            imported = import_source(source, cost_model=priced.cost_model, training=training,
                                     profile=profile, profile_repeats=repeats,
                                     optimizer=optimizer, granularity=granularity)
    messages = tuple(f"warning: {w.message}" for w in caught)
    if notify is not None:
        for message in (*source.notes, *messages):
            notify(message)
    return ModelImport(source=source, imported=imported, priced=priced, warnings=messages,
                       notes=source.notes)


def model_graph_dict(problem: Problem, imported: ImportedModel) -> dict[str, Any]:
    """``problem`` in the dnn-partitioning JSON format, with what the model adds: each
    operator's type, module path and FLOPs, each edge's bytes, and the time unit (ms)."""
    from dnnpart.io.dnn_partitioning import problem_to_dict

    data = problem_to_dict(problem)
    g = imported.graph
    ops = imported.ir.ops
    for v, node in enumerate(data["nodes"]):
        if imported.autograd:
            node["flops"] = float(imported.flops[v])
            continue
        oid = int(g.original_ids[v]) % len(ops) if g.is_backward[v] else int(g.original_ids[v])
        if not g.is_backward[v] and oid < len(ops):
            node["opType"] = ops[oid].op_type
            node["modulePath"] = ops[oid].module_path
            node["flops"] = float(imported.flops[oid])
    for e, edge in enumerate(data["edges"]):
        b = float(g.edge_bytes[e])
        if b == b:  # not nan
            edge["bytes"] = b
    data["timeUnit"] = "ms"
    return data
