"""Read a plan file back into a :class:`~dnnpart.workflow.PlannedModel`.

A plan of a model (``dnnpart plan -o``) names the model it was made for (its ``model``
block); loading it captures that model again, exactly as it was planned, and parses the plan
against it. :func:`load_plan` also reads plans of graph problems (``dnnpart solve -o``),
whose graph the file names.

A plan file is data: a model spec that would import and run code (``module:...``) is refused
unless the caller names the model (``model=``) or trusts the file (``trust=True``); every spec
a plan names (``model.spec``, ``graph.spec``) passes the one gate,
:func:`~dnnpart.workflow.file_specs.gated_spec`. Files the plan names are found by absolute
path (or beside the plan) and refused when their hash changed (:mod:`dnnpart.io.file_refs`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dnnpart.errors import FormatError
from dnnpart.problem import STAGES, Objective, Problem
from dnnpart.workflow.file_specs import gated_spec
from dnnpart.workflow.importing import DEFAULT_CLUSTER, priced_cluster
from dnnpart.workflow.planned import FILE_FIELDS, PlannedModel, RunnableModel


def plan_model_spec(block: Mapping[str, Any], path: str | Path, *, model: str | None,
                    trust: bool) -> str:
    """The model spec to resolve for a plan: ``model`` if given, else the plan's own, through
    the one gate for specs from files (:func:`~dnnpart.workflow.file_specs.gated_spec`).

    A plan file is data: its spec is refused when it would import and run code, unless
    ``trust`` (``--trust-plan``).

    Examples
    --------
    >>> plan_model_spec({"spec": "module:os:getcwd"}, "p.json", model=None, trust=False)
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.errors.FormatError: p.json: model.spec: 'module:os:getcwd' would import and run code; ...
    >>> plan_model_spec({"spec": "builtin:bert"}, "p.json", model=None, trust=False)
    'builtin:bert'
    """
    return gated_spec(block.get("spec"), path, "model.spec", model=model, trust=trust)


def checked_block(block: Mapping[str, Any], path: str | Path, *,
                  model: str | None = None) -> dict[str, Any]:
    """A plan's model block with its files found and verified (see :mod:`dnnpart.io.file_refs`).

    ``model`` (``--model``) replaces the plan's model spec, whose file is then not checked.

    Examples
    --------
    >>> checked_block({"spec": "builtin:bert"}, "p.json")
    {'spec': 'builtin:bert'}
    """
    check_model_fields(block, path)
    files = block.get("files")
    if files is None:
        return dict(block)
    if not isinstance(files, dict):
        raise FormatError(f"{path}: model.files: expected an object")
    from dnnpart.io.file_refs import resolve_ref

    out = dict(block)
    for key in FILE_FIELDS:
        if key in files and not (key == "spec" and model is not None):
            out[key] = str(resolve_ref(files[key], f"model.{key}", path))
    return out


#: Text fields of a plan's model block, each a string or null where given.
_TEXT_FIELDS = ("input_dtype", "config", "optimizer", "specs", "cluster", "precision", "frontend",
                "schedule", "objective", "training_form", "granularity")
#: The granularities a plan can have been made at (``--granularity``).
GRANULARITIES = ("op", "module", "block")


def check_model_fields(block: Mapping[str, Any], path: str | Path) -> None:
    """Types of a plan's model block, checked before any of them is used (a plan file is
    untrusted input: one ``error:`` naming the field, never an internal error)."""
    from dnnpart.io import fields as f

    for key in _TEXT_FIELDS:
        if block.get(key) is not None:
            f.text(block[key], f"{path}: model.{key}")
    if block.get("granularity") is not None and block["granularity"] not in GRANULARITIES:
        raise FormatError(f"{path}: model.granularity: expected one of {', '.join(GRANULARITIES)}, "
                          f"got {f.describe(block['granularity'])}")
    if block.get("training") is not None:
        f.flag(block["training"], f"{path}: model.training")
    if block.get("microbatches") is not None:
        f.integer(block["microbatches"], f"{path}: model.microbatches", minimum=1)
    shapes = block.get("input_shapes")
    if shapes is not None:
        for i, shape in enumerate(f.require_list(shapes, f"{path}: model.input_shapes")):
            where = f"{path}: model.input_shapes[{i}]"
            if not f.require_list(shape, where):
                raise FormatError(f"{where}: expected positive integers like [1, 3, 224, 224], got []")
            for k, d in enumerate(shape):
                f.integer(d, f"{where}[{k}]", minimum=1)


def plan_objective(block: Mapping[str, Any], path: str | Path) -> Objective:
    """The objective a plan was made for (plans written before it was stored: throughput).

    Examples
    --------
    >>> plan_objective({"objective": "pipeline", "schedule": "1f1b"}, "p.json").schedule
    '1f1b'
    """
    try:
        return Objective(kind=str(block.get("objective") or "throughput"),
                         training=str(block.get("training_form") or "pipedream"),
                         schedule=str(block.get("schedule") or "gpipe"),
                         microbatches=block.get("microbatches") or 4)
    except ValueError as exc:
        raise FormatError(f"{path}: model: {exc}") from None


def model_block_of(data: Any, path: str | Path) -> dict[str, Any] | None:
    """The ``model`` block of a plan file's JSON, ``None`` for plans without one."""
    from dnnpart.io import fields as f

    block = f.require_mapping(data, str(path)).get("model")
    return block if isinstance(block, dict) and "spec" in block else None


def load_planned_model(path: str | Path, *, model: str | None = None, trust: bool = False,
                       runnable: bool = True) -> PlannedModel:
    """Read a plan of a model (``dnnpart plan -o``) and capture the model it was made for.

    Parameters
    ----------
    path : the plan file.
    model : the model to use instead of the plan's own spec (which is then not followed).
    trust : follow the plan's spec even where it imports code (``module:...``).
    runnable : also build what running needs (``PlannedModel.runnable``): the graph module
        and the device of each of its operators. A model planned on the meta device
        (``hf:``) is then captured a second time, with seeded weights.

    Raises
    ------
    FormatError
        The file has no model block, names a changed file, or a spec that imports code
        without ``model``/``trust``; the plan does not fit the model.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.json")
    >>> from dnnpart.workflow import plan_model
    >>> _ = plan_model("builtin:resnet50", cluster="2xA100", input_shapes=[(1, 3, 32, 32)]).write(path)
    >>> loaded = load_planned_model(path)
    >>> loaded.runnable.source.spec, len(loaded.runnable.device_of) > 100
    ('builtin:resnet50', True)
    """
    from dnnpart.io import fields as f

    data = f.read_json(path)
    return planned_model_from_dict(data, path, model=model, trust=trust, runnable=runnable)


def planned_model_from_dict(data: Any, path: str | Path, *, model: str | None = None,
                            trust: bool = False, runnable: bool = True) -> PlannedModel:
    """:func:`load_planned_model` of a plan file's JSON (``path``: where it came from, for
    messages and for files copied beside it)."""
    from dnnpart.evaluate import evaluate
    from dnnpart.export import operator_devices
    from dnnpart.frontends.build import by_module, price_model
    from dnnpart.frontends.sources import capture, import_source, resolve_model
    from dnnpart.io.plan_files import parse_plan

    raw = model_block_of(data, path)
    if raw is None:
        raise FormatError(f"{path}: model: missing; export and run need a plan written by `dnnpart plan -o`")
    block = checked_block(raw, path, model=model)
    spec = plan_model_spec(block, path, model=model, trust=trust)
    priced = priced_cluster(str(block.get("cluster", DEFAULT_CLUSTER)), specs=block.get("specs"),
                            precision=str(block.get("precision", "fp32")))
    options = source_options(block, path)
    training = bool(block.get("training"))
    planned = resolve_model(spec, **options)
    gm = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # already reported at import time
        if planned.is_torch and training and planned.frontend == "export":
            if runnable:
                gm, _ = capture(planned)
            imported = import_source(
                planned, cost_model=priced.cost_model, training=True, optimizer=block.get("optimizer")
            )
        elif planned.is_torch:
            gm, ir = capture(planned)
            imported = price_model(ir, priced.cost_model, training=training)
        else:
            imported = import_source(planned, cost_model=priced.cost_model, training=training)
        if block.get("granularity") == "module":
            imported = by_module(imported)
    problem = Problem(graph=imported.graph, cluster=priced.cluster, name=imported.ir.name,
                      objective=plan_objective(block, path))
    if block.get("granularity") == "block" and problem.objective.kind != STAGES:
        from dnnpart.workflow.planning import block_problem

        problem = block_problem(problem)  # the colocation the plan was made under
    plan = parse_plan(data, problem, str(path))
    run = runnable_model(planned, spec, options, gm, imported, operator_devices(imported, plan),
                    training=training) if runnable else None
    return PlannedModel(
        problem=problem, plan=plan, evaluation=evaluate(problem, plan), imported=imported,
        spec=raw.get("spec"), model_block=block, schedule=block.get("schedule"),
        microbatches=block.get("microbatches"), comparison=tuple(comparison_from_file(data)),
        runnable=run, file_data=data)


def source_options(block: Mapping[str, Any], path: str | Path = "<plan>") -> dict[str, Any]:
    """The :func:`~dnnpart.frontends.sources.resolve_model` options of a plan's model block
    (named inputs, each with its dtype, where the plan has them: the same inputs again)."""
    options: dict[str, Any] = {
        "input_shapes": block.get("input_shapes") or None,
        "input_dtype": block.get("input_dtype"),
        "frontend": str(block.get("frontend", "fx")),  # plans written before export was default
        "config_file": block.get("config"),
    }
    if block.get("inputs"):
        from dnnpart.frontends.sources import inputs_from_json

        options |= {"input_shapes": None, "input_dtype": None,
                    "inputs": inputs_from_json(block["inputs"], f"{path}: model.inputs")}
    return options


def rebuild_model(path: str | Path, *, model: str | None = None, trust: bool = False) -> Any:
    """The model a plan file was made for, built again with its seeded weights (no pricing):
    a :class:`~dnnpart.frontends.sources.ModelSource` as ``run`` uses, the same in every
    process (``model``, ``trust``: as for :func:`load_planned_model`)."""
    from dnnpart.frontends.sources import resolve_model
    from dnnpart.io import fields as f

    raw = model_block_of(f.read_json(path), path)
    if raw is None:
        raise FormatError(f"{path}: model: missing; a plan written by `dnnpart plan -o` names its model")
    block = checked_block(raw, path, model=model)
    spec = plan_model_spec(block, path, model=model, trust=trust)
    return resolve_model(spec, materialize=True, **source_options(block, path))


def runnable_model(planned: Any, spec: str, options: dict[str, Any], gm: Any, imported: Any,
              device_of: dict[str, int], *, training: bool) -> RunnableModel:
    """What running needs: real weights, the graph module and each of its operators' device.

    A model planned on the meta device (``hf:``) is captured again with its seeded weights.
    The two captures can differ in a few layout-only nodes; such a node runs where its
    producer runs (:func:`~dnnpart.export.placement.complete_placement`).
    """
    from dnnpart.export.placement import align_forward, complete_placement
    from dnnpart.frontends.sources import capture, resolve_model

    source = planned
    if planned.is_torch and spec.startswith("hf:"):
        # running needs weights: one seeded init, the same in every process
        source = resolve_model(spec, materialize=True, **options)
        gm, _ = capture(source)
    if gm is not None and training and planned.frontend == "export":
        # the training graph's own forward operators (its names, aten ops), in capture order
        import numpy as np

        graph = imported.graph
        kinds = graph.layer_attrs.kind if graph.layer_attrs is not None else ("",) * graph.n_nodes
        order = np.argsort(graph.original_ids, kind="stable")
        fwd = [(graph.names[v], kinds[v]) for v in order.tolist()
               if not graph.is_backward[v] and kinds[v] != "parameter" and graph.names[v] in device_of]
        renamed = align_forward(gm, fwd)
        device_of = {renamed[k]: d for k, d in device_of.items() if k in renamed}
    if gm is not None:
        device_of = complete_placement(gm, device_of)
    return RunnableModel(source=source, module=gm, device_of=device_of)


def load_plan(path: str | Path, *, model: str | None = None, trust: bool = False) -> PlannedModel:
    """Read a plan file of either kind, without building what running needs: a plan of a model
    (:func:`load_planned_model`) or of a graph problem (``dnnpart solve -o``: the graph it
    names, found by path and hash, and the cluster it stores).

    Examples
    --------
    >>> import os, tempfile
    >>> from dnnpart.solvers import solve
    >>> from dnnpart.workflow import load_problem, write_solved_plan
    >>> problem = load_problem("zoo:bert-3")
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.json")
    >>> write_solved_plan(problem, solve(problem, "dp"), path, "zoo:bert-3")
    >>> loaded = load_plan(path)
    >>> loaded.record["method"], loaded.imported is None, len(loaded.stages) > 1
    ('dp', True, True)
    """
    from dnnpart.evaluate import evaluate
    from dnnpart.io import fields as f
    from dnnpart.workflow.solved import solved_problem

    data = f.require_mapping(f.read_json(path), str(path))
    if model_block_of(data, path) is None and "graph" in data:
        problem, plan = solved_problem(str(path), data, model=model, trust=trust)
        return PlannedModel(problem=problem, plan=plan, evaluation=evaluate(problem, plan),
                            comparison=tuple(comparison_from_file(data)), file_data=data)
    return planned_model_from_dict(data, path, model=model, trust=trust, runnable=False)


def with_runnable(planned: PlannedModel) -> PlannedModel:
    """``planned`` with what running needs (``runnable``), capturing its model again if it
    has none yet (a plan fresh from :func:`~dnnpart.workflow.plan_model`).

    The model is the one ``planned`` names; it was the caller's own choice, so a ``module:``
    spec is followed.
    """
    import dataclasses

    if planned.runnable is not None:
        return planned
    if planned.model_block is None:
        raise FormatError(f"{planned.problem.name}: not a plan of a model; running and exporting "
                          "need one (plan_model, or a plan written by `dnnpart plan -o`)")
    loaded = planned_model_from_dict(planned.to_dict(), "<plan>", trust=True)
    return dataclasses.replace(planned, runnable=loaded.runnable)


def comparison_from_file(data: Any) -> list[dict[str, Any]]:
    """The ``comparison`` rows a plan file keeps (``plan --compare``), typed; bad rows dropped.

    A plan file is data: numbers that are not numbers become ``None`` and text stays text.

    Examples
    --------
    >>> comparison_from_file({"comparison": [{"method": "dp", "objective": 2.0, "gap": "x"}, 3]})
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'method': 'dp', 'status': '', 'objective': 2.0, 'bound': None, 'gap': None, 'vs_best': '',
      'seconds': None, 'note': ''}]
    """
    raw = data.get("comparison") if isinstance(data, dict) else None
    rows: list[dict[str, Any]] = []
    for row in raw if isinstance(raw, list) else []:
        if not isinstance(row, dict):
            continue
        typed: dict[str, Any] = {}
        for key in ("method", "status", "objective", "bound", "gap", "vs_best", "seconds", "note"):
            value = row.get(key)
            if key in ("objective", "bound", "gap", "seconds"):
                number = isinstance(value, (int, float)) and not isinstance(value, bool)
                typed[key] = float(value) if number and value is not None else None
            else:
                typed[key] = str(value) if value is not None else ""
        rows.append(typed)
    return rows
