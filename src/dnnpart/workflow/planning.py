"""Plan a model in one call (``dnnpart plan``): capture, price, solve, evaluate.

:func:`plan_model` picks the method the objective calls for when none is named
(:mod:`dnnpart.workflow.methods`), runs it through :func:`dnnpart.solvers.solve` and scores
the plan with :func:`dnnpart.evaluate`; ``compare=`` runs other methods on the same problem
(:func:`compare_methods`). The iteration objective plans paper 3's layer graphs
(``builtin:lenet5`` ...; other model specs become layer graphs at module granularity) instead
of an imported operator graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.errors import DnnpartError, ProblemTooLargeError, UsageError
from dnnpart.plan import SolveResult
from dnnpart.problem import STAGES, Objective, Problem
from dnnpart.workflow.importing import DEFAULT_CLUSTER, Notify, import_model, priced_cluster
from dnnpart.workflow.methods import (
    BLOCK_OBJECTIVES,
    FALLBACK_METHOD,
    block_note,
    choose_granularity,
    choose_method,
    fallback_note,
    stages_note,
)
from dnnpart.workflow.phases import ProgressFactory, phase
from dnnpart.workflow.planned import PlannedModel, model_block
from dnnpart.workflow.text import one_line

if TYPE_CHECKING:
    from dnnpart.frontends.sources import ModelInput


def plan_model(
    spec: str | Any,
    *,
    cluster: str = DEFAULT_CLUSTER,
    objective: Objective | str | None = None,
    training: bool = False,
    method: str | None = None,
    time_limit: float | None = None,
    deterministic: bool = False,
    compare: Sequence[str] = (),
    schedule: str | None = None,
    microbatches: int | None = None,
    specs: str | Path | None = None,
    optimizer: str | None = None,
    precision: str = "fp32",
    input_shapes: Sequence[Sequence[int]] = (),
    input_dtype: str | None = None,
    inputs: Sequence[ModelInput] = (),
    frontend: str = "export",
    config: str | Path | None = None,
    granularity: str | None = None,
    profile: bool = False,
    repeats: int = 10,
    notify: Notify | None = None,
    progress: ProgressFactory | None = None,
    example_inputs: Sequence[Any] = (),
    **options: Any,
) -> PlannedModel:
    """Import the model ``spec``, plan it on ``cluster`` for ``objective`` and score the plan.

    Parameters
    ----------
    spec : the model: ``builtin:NAME``, ``torchvision:NAME``, ``hf:ARCH[:KEY=VALUE,...]``,
        ``FILE.onnx`` or ``module:PKG.MOD:CALLABLE``, or a live ``torch.nn.Module`` with
        ``example_inputs`` (its plan runs and applies in this process only; see
        :meth:`PlannedModel.pipeline_stage`) (see :func:`~dnnpart.workflow.import_model`
        for the model options ``training``, ``optimizer``, ``precision``, ``input_shapes``,
        ``input_dtype``, ``frontend``, ``config``, ``granularity``, ``specs``, ``profile``,
        ``repeats``, ``inputs``); ``granularity``: ``"block"`` cuts only between whole
        blocks (:func:`block_problem`; with no objective: the ``stages`` objective with
        ``block-pipeline``), the default for the throughput, pipeline and stages objectives
        when no ``method`` is named; else ``"op"``.
    cluster : ``NxPRESET`` (``4xA100``), a cluster file or ``GENERATOR:key=value,...``.
    objective : an :class:`~dnnpart.problem.Objective` or its kind (``throughput``,
        ``latency``, ``makespan``, ``pipeline``, ``iteration``, ``stages``); ``None``: stages
        when a ``schedule`` is given (a trainer's pipeline of whole blocks), else throughput.
    method : the method (``dnnpart methods``); ``None``: the objective's own --
        throughput ``dp`` (``dpl`` where ``dp`` refuses the graph as too large, unless
        ``options`` were given, or ``pipeline`` with a ``schedule``), latency ``ip``, makespan
        ``pardnn``, pipeline ``parmesan``, iteration ``optcnn``, stages ``block-pipeline``.
    time_limit, deterministic, **options : as for :func:`dnnpart.solvers.solve`.
    compare : other methods to run on the same problem (``PlannedModel.comparison``).
    schedule, microbatches : the pipeline schedule (``gpipe``/``1f1b``) and micro-batches
        that ``run_plan`` and ``write_report`` use (stored in the plan file; ``None``: theirs);
        with ``objective`` given as a kind, also the pipeline objective's.
    notify : called with each message for the user (the method chosen, capture warnings).
    progress : told each phase as it starts (``"importing SPEC (torch.export)"``,
        ``"solving with dp"``, ``"solving with dpl"`` after a fallback; see
        :mod:`dnnpart.workflow.phases`); the reporter it returns for a solving phase gets the
        method's progress.

    Returns
    -------
    PlannedModel
        With ``result`` and, when the method found a plan, ``plan``, ``evaluation`` and
        ``stages``.

    Examples
    --------
    >>> planned = plan_model("builtin:resnet50", cluster="2xA100", input_shapes=[(1, 3, 32, 32)])
    >>> planned.result.method, planned.result.status.value
    ('dp', 'optimal')
    >>> planned.evaluation.objective == planned.result.objective
    True
    >>> planned.stages[0].first_module
    'conv1'
    """
    from dnnpart import solvers
    from dnnpart.evaluate import evaluate

    granularity_given = granularity
    obj = _objective(objective or ("stages" if granularity == "block" else None), schedule,
                     microbatches)
    chosen = choose_granularity(obj.kind, granularity=granularity, method=method)
    blocks = chosen == "block"
    if blocks and (obj.kind not in BLOCK_OBJECTIVES
                   or (obj.kind == STAGES and method not in (None, "block-pipeline"))):
        raise UsageError(f"--granularity block: the {obj.kind} objective"
                         f"{'' if method is None else f' with method {method}'} is not planned "
                         f"between whole blocks (block granularity serves {', '.join(BLOCK_OBJECTIVES)}; "
                         "the stages objective by block-pipeline); use --granularity op or module")
    granularity = "op" if blocks else chosen  # the op graph is kept; cuts fall between blocks
    choice = choose_method(obj.kind, method=method, schedule=schedule, options=options)
    notes: list[str] = []

    def say(message: str) -> None:
        notes.append(message)
        if notify is not None:
            notify(message)

    if objective is None and obj.kind == STAGES and method is None:
        say(stages_note(obj.schedule, obj.microbatches))
    if choice.note:
        say(choice.note)
    solvers.get_method(choice.name).check_options(options)  # fail before any work
    for name in compare:
        solvers.get_method(name)
    source = imported = None
    if obj.kind == "iteration":  # paper 3's layer graphs, not an imported operator graph
        from dnnpart.frontends.sources import ModelOptions
        from dnnpart.workflow.inputs import iteration_batch_note, load_problem

        layers_model = ModelOptions(
            input_shapes=tuple(tuple(int(d) for d in s) for s in input_shapes),
            input_dtype=input_dtype, training=training, optimizer=optimizer, precision=precision,
            frontend=frontend, config_file=None if config is None else str(config),
            granularity=granularity, inputs=tuple(inputs))
        with phase(progress, f"importing {spec} (layer graph)"):
            problem = load_problem(spec, cluster=priced_cluster(cluster, specs=specs).cluster,
                                   objective=obj, model=layers_model)
        batch_note = iteration_batch_note(problem)
        if batch_note:
            say(batch_note)
    else:
        captured = import_model(
            spec, cluster=cluster, specs=specs, training=training, optimizer=optimizer,
            precision=precision, input_shapes=input_shapes, input_dtype=input_dtype,
            frontend=frontend, config=config, granularity=granularity, profile=profile,
            repeats=repeats, notify=say, progress=progress, example_inputs=example_inputs,
            inputs=inputs)
        source, imported = captured.source, captured.imported
        problem = captured.problem(obj)
        if blocks and obj.kind != STAGES:  # block-pipeline finds the blocks itself
            problem = block_problem(problem)
            if granularity_given is None:
                say(block_note(obj.kind, int(problem.graph.color_class.max()) + 1))
    name = choice.name
    try:
        with phase(progress, f"solving with {name}") as reporter:
            result = solvers.solve(problem, name, time_limit=time_limit, progress=reporter,
                                   deterministic=deterministic, **options)
    except ProblemTooLargeError as exc:
        if not choice.may_fall_back:
            raise
        say(fallback_note(str(exc)))
        with phase(progress, f"solving with {FALLBACK_METHOD}") as reporter:  # its own name
            result = solvers.solve(problem, FALLBACK_METHOD, time_limit=time_limit,
                                   progress=reporter, deterministic=deterministic)
    comparison = compare_methods(problem, result, compare, time_limit=time_limit,
                                 deterministic=deterministic, progress=progress) if compare else []
    block = None
    if not isinstance(spec, str):
        spec = source.spec if source is not None else "live"
    if source is not None:
        block = model_block(spec=spec, source=source, training=training, optimizer=optimizer,
                            precision=precision, granularity="block" if blocks else granularity,
                            config=config,
                            cluster=cluster, specs=specs, schedule=schedule,
                            microbatches=microbatches, objective=obj.kind,
                            training_form=obj.training)
    runnable = None
    if source is not None and spec.startswith("live:") and result.plan is not None:
        runnable = _live_runnable(source, imported, result.plan)
    return PlannedModel(
        problem=problem, plan=result.plan, result=result,
        evaluation=evaluate(problem, result.plan) if result.plan is not None else None,
        imported=imported, spec=spec, model_block=block, schedule=schedule,
        microbatches=microbatches, comparison=tuple(comparison), notes=tuple(notes),
        runnable=runnable)


def block_problem(problem: Problem) -> Problem:
    """``problem`` at block granularity: each unit of its graph one colocation class
    (:func:`~dnnpart.graph.blocks.block_colocated`), so every method cuts between blocks."""
    import dataclasses

    from dnnpart.graph.blocks import block_colocated

    return dataclasses.replace(problem, graph=block_colocated(problem.graph))


def _live_runnable(source: Any, imported: Any, plan: Any) -> Any:
    """What running a live module's plan needs: its graph module (captured again: the import
    keeps only the priced graph) and every operator's device."""
    from dnnpart.export import operator_devices
    from dnnpart.frontends.sources import capture
    from dnnpart.workflow.loading import runnable_model

    gm, _ = capture(source)
    return runnable_model(source, source.spec, {}, gm, imported, operator_devices(imported, plan),
                          training=imported.graph.is_training)


def compare_methods(problem: Problem, result: SolveResult, methods: Sequence[str], *,
                    time_limit: float | None = None, deterministic: bool = False,
                    progress: ProgressFactory | None = None) -> list[dict[str, Any]]:
    """Run ``methods`` on ``problem`` beside ``result``: one row each
    (:func:`dnnpart.viz.report.comparison_rows`), ``result``'s first.

    A method that refuses the problem (too large, another objective) gets a row with its
    reason instead of failing the comparison.

    Examples
    --------
    >>> from dnnpart.solvers import solve
    >>> from dnnpart.workflow import load_problem
    >>> problem = load_problem("zoo:bert-3")
    >>> rows = compare_methods(problem, solve(problem, "dp"), ["one-accelerator", "optcnn"])
    >>> [(r["method"], r["status"], r["vs_best"]) for r in rows]  # doctest: +ELLIPSIS
    [('dp', 'optimal', 'best'), ('one-accelerator', ..., '+...%'), ('optcnn', 'no plan', '-')]
    >>> rows[2]["note"]
    "method 'optcnn' optimises ['iteration'], not 'throughput'"
    """
    from dnnpart import solvers
    from dnnpart.viz.report import comparison_rows

    entries: list[tuple[str, SolveResult | str]] = [(result.method, result)]
    for name in methods:
        if name == result.method:
            continue
        with phase(progress, f"solving with {name} (comparison)") as reporter:
            try:
                other = solvers.solve(problem, name, time_limit=time_limit, progress=reporter,
                                      deterministic=deterministic)
            except (DnnpartError, ValueError) as exc:  # refused: say why in its row
                entries.append((name, one_line(str(exc))))
                continue
        entries.append((name, other))
    return comparison_rows(entries)


def _objective(objective: Objective | str | None, schedule: str | None,
               microbatches: int | None) -> Objective:
    if isinstance(objective, Objective):
        return objective
    kind = objective or ("stages" if schedule else "throughput")
    return Objective(kind=kind, schedule=schedule or ("1f1b" if kind == "stages" else "gpipe"),
                     microbatches=microbatches if microbatches is not None else 4)
