""":class:`PlannedModel`: a model's problem, its plan and what running or exporting it needs.

It is what :func:`~dnnpart.workflow.plan_model` returns and what
:func:`~dnnpart.workflow.load_planned_model` reads back from a plan file; :meth:`PlannedModel.to_dict`
is the plan file (``dnnpart plan -o``): our plan format (:mod:`dnnpart.io.plan_files`) plus

* ``model``: how to capture the model again -- its spec, example inputs (``inputs``: name,
  shape and dtype each, where the inputs have names; else ``input_shapes`` and ``input_dtype``,
  one dtype or one per input joined by commas), training, optimizer,
  precision, granularity, frontend, config, the cluster and presets it was priced for, the
  schedule and micro-batches ``run`` and ``report`` use, the objective. Fields naming local
  files (:data:`FILE_FIELDS`) hold absolute paths, and ``files`` their hashes (a plan is
  usable from any directory and refused when an input changed);
* ``comparison`` (with ``compare=``): a row per method run on the same problem.

Plans of paper 3's layer graphs (the iteration objective) have no ``model`` block: they are
scored again with ``dnnpart evaluate``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.evaluate import Evaluation
from dnnpart.plan import Plan, SolveResult
from dnnpart.problem import Problem
from dnnpart.workflow.text import jsonable

if TYPE_CHECKING:
    from dnnpart.frontends.build import ImportedModel
    from dnnpart.frontends.sources import ModelSource
    from dnnpart.viz.stages import PlanStage

#: Fields of a plan's model block that may name local files (kept as absolute path + hash).
FILE_FIELDS = ("spec", "config", "specs", "cluster")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class RunnableModel:
    """What running a plan needs.

    Attributes
    ----------
    source : the model with real weights and example-input shapes (``hf:`` models are built
        again with seeded weights: one initialisation, the same in every process).
    module : the ``torch.fx`` graph module that runs (``None`` for an ONNX model).
    device_of : device (index in the plan's cluster) of every operator of ``module`` (of the
        priced graph's forward operators, for an ONNX model).
    """

    source: ModelSource
    module: Any
    device_of: dict[str, int]


@dataclass(frozen=True, kw_only=True, eq=False)
class PlannedModel:
    """A plan of a model (or of a layer graph) and everything around it.

    Attributes
    ----------
    problem : the graph, cluster and objective that were planned.
    plan : the plan (``None`` when the method found none).
    result : the method's result (status, objective, bound, gap, statistics); ``None`` for a
        plan read from a file, whose summary is in ``file_data``.
    evaluation : the plan scored by :func:`dnnpart.evaluate` (``None`` without a plan).
    imported : the imported model (``None`` for layer graphs and graph problems).
    spec : the model spec as given (``None`` for a graph problem read from a file).
    model_block : the plan file's ``model`` block (``None`` for layer graphs and graph problems).
    schedule, microbatches : the pipeline schedule and micro-batches per step asked for when
        planning, which ``run`` and ``report`` use (``None``: theirs, 1F1B and 4).
    comparison : with ``compare=``, a row per method (:func:`dnnpart.viz.report.comparison_rows`).
    notes : what the library has to say: choices it made (the method), warnings of the capture.
    runnable : what running needs (:class:`RunnableModel`); set by
        :func:`~dnnpart.workflow.load_planned_model`, else built on demand by ``run_plan`` and
        ``export_plan``.
    file_data : the plan file's content, for a plan read from a file.
    """

    problem: Problem
    plan: Plan | None
    result: SolveResult | None = None
    evaluation: Evaluation | None = None
    imported: ImportedModel | None = None
    spec: str | None = None
    model_block: Mapping[str, Any] | None = None
    schedule: str | None = None
    microbatches: int | None = None
    comparison: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    runnable: RunnableModel | None = field(default=None, repr=False)
    file_data: Mapping[str, Any] | None = field(default=None, repr=False)

    def require_plan(self) -> Plan:
        """The plan; :class:`~dnnpart.errors.InfeasibleError` when there is none."""
        if self.plan is not None:
            return self.plan
        if self.result is not None:
            return self.result.require_plan()
        from dnnpart.errors import InfeasibleError

        raise InfeasibleError("no plan")

    @property
    def stages(self) -> tuple[PlanStage, ...]:
        """The plan's stages in pipeline order: device, module-path range, nodes, predicted
        forward/backward/load times (:class:`~dnnpart.viz.stages.PlanStage`).

        Empty without a plan, and for layer-wise plans (the iteration objective), whose
        devices share every layer (see ``plan.layer_configs``).
        """
        from dnnpart.viz.stages import plan_stages

        if self.plan is None or self.evaluation is None or self.plan.layer_configs is not None:
            return ()
        return plan_stages(self.problem, self.plan, self.evaluation, self.imported)

    @property
    def record(self) -> dict[str, Any]:
        """The plan's summary as a report shows it: method, status, objective, bound, search
        space and provenance (the candidate that produced the plan)."""
        if self.result is not None:
            r = self.result
            return {"method": r.method, "status": r.status.value, "objective": r.objective,
                    "bound": r.bound, "search_space": r.search_space,
                    "provenance": r.provenance or r.method}
        data = self.file_data or {}
        return {k: data.get(k) for k in ("method", "status", "bound", "objective", "search_space",
                                         "provenance")}

    def node_labels(self) -> dict[str, str]:
        """Readable names of the imported model's nodes: ``module.path (node)`` where known."""
        if self.imported is None:
            return {}
        return {op.name: f"{op.module_path.replace('/', '.')} ({op.name})"
                for op in self.imported.ir.ops if op.module_path}

    def to_dict(self) -> dict[str, Any]:
        """The plan file (``dnnpart plan -o``; see the module docstring).

        A plan read from a file gives that file's content back.
        """
        if self.file_data is not None:
            return copy.deepcopy(dict(self.file_data))
        from dnnpart.io.plan_files import plan_to_dict

        data = plan_to_dict(self.problem, self.require_plan(), self.result)
        if self.model_block is not None:  # export, run and report re-import the model from it
            data["model"] = dict(self.model_block)
        if self.comparison:  # `dnnpart report` shows it again
            data["comparison"] = jsonable(list(self.comparison))
        return data

    def write(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` to ``path`` (atomically); returns the path."""
        from dnnpart.io.dnn_partitioning import write_json_atomic

        write_json_atomic(self.to_dict(), path)
        return Path(path)


def model_block(*, spec: str, source: ModelSource, training: bool, optimizer: str | None,
                precision: str, granularity: str, config: str | Path | None, cluster: str,
                specs: str | Path | None, schedule: str | None, microbatches: int | None,
                objective: str, training_form: str) -> dict[str, Any]:
    """A plan file's ``model`` block; local files are named by absolute path and hash."""
    from dnnpart.io.file_refs import file_ref, is_file_spec

    block: dict[str, Any] = {
        "spec": spec,
        "input_shapes": [list(s) for s in source.input_shapes],
        "input_dtype": source.input_dtype,
        "inputs": [i.to_dict() for i in source.inputs] or None,
        "training": bool(training),
        "optimizer": optimizer,
        "precision": precision,
        "granularity": granularity,
        "frontend": source.frontend,
        "config": None if config is None else str(config),
        "cluster": cluster,
        "specs": None if specs is None else str(specs),
        "schedule": schedule,
        "microbatches": microbatches,
        "objective": objective,
        "training_form": training_form,
    }
    files = {k: file_ref(block[k]) for k in FILE_FIELDS if is_file_spec(block.get(k))}
    for key, ref in files.items():  # the plan is usable from any directory
        block[key] = ref["path"]
    if files:
        block["files"] = files
    return block
