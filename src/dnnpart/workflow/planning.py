"""Plan a model in one call (``dnnpart plan``): capture, price, solve, evaluate.

:func:`plan_model` picks the method the objective calls for when none is named
(:mod:`dnnpart.workflow.methods`), runs it through :func:`dnnpart.solvers.solve` and scores
the plan with :func:`dnnpart.evaluate`; ``compare=`` runs other methods on the same problem
(:func:`compare_methods`). The iteration objective plans paper 3's layer graphs
(``builtin:lenet5`` ...; other model specs become layer graphs at module granularity) instead
of an imported operator graph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.errors import DnnpartError, ProblemTooLargeError
from dnnpart.plan import SolveResult
from dnnpart.problem import Objective, Problem
from dnnpart.workflow.importing import DEFAULT_CLUSTER, Notify, import_model, priced_cluster
from dnnpart.workflow.methods import FALLBACK_METHOD, choose_method, fallback_note
from dnnpart.workflow.planned import PlannedModel, model_block
from dnnpart.workflow.text import one_line

if TYPE_CHECKING:
    from dnnpart.frontends.sources import ModelInput

#: Makes the progress reporter of a method run, given the method's name: an object with
#: ``update(message, fraction)`` that is also a context manager, or ``None`` for none.
ProgressFactory = Callable[[str], Any]


def plan_model(
    spec: str,
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
    granularity: str = "op",
    profile: bool = False,
    repeats: int = 10,
    notify: Notify | None = None,
    progress: ProgressFactory | None = None,
    **options: Any,
) -> PlannedModel:
    """Import the model ``spec``, plan it on ``cluster`` for ``objective`` and score the plan.

    Parameters
    ----------
    spec : the model: ``builtin:NAME``, ``torchvision:NAME``, ``hf:ARCH[:KEY=VALUE,...]``,
        ``FILE.onnx`` or ``module:PKG.MOD:CALLABLE`` (see :func:`~dnnpart.workflow.import_model`
        for the model options ``training``, ``optimizer``, ``precision``, ``input_shapes``,
        ``input_dtype``, ``frontend``, ``config``, ``granularity``, ``specs``, ``profile``,
        ``repeats``, ``inputs``).
    cluster : ``NxPRESET`` (``4xA100``), a cluster file or ``GENERATOR:key=value,...``.
    objective : an :class:`~dnnpart.problem.Objective` or its kind (``throughput``,
        ``latency``, ``makespan``, ``pipeline``, ``iteration``); ``None``: throughput.
    method : the method (``dnnpart methods``); ``None``: the objective's own --
        throughput ``dp`` (``dpl`` where ``dp`` refuses the graph as too large, unless
        ``options`` were given, or ``pipeline`` with a ``schedule``), latency ``ip``, makespan
        ``pardnn``, pipeline ``parmesan``, iteration ``optcnn``.
    time_limit, deterministic, **options : as for :func:`dnnpart.solvers.solve`.
    compare : other methods to run on the same problem (``PlannedModel.comparison``).
    schedule, microbatches : the pipeline schedule (``gpipe``/``1f1b``) and micro-batches
        that ``run_plan`` and ``write_report`` use (stored in the plan file; ``None``: theirs);
        with ``objective`` given as a kind, also the pipeline objective's.
    notify : called with each message for the user (the method chosen, capture warnings).
    progress : the progress reporter of a method run, by method name (see
        :data:`ProgressFactory`).

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

    obj = _objective(objective, schedule, microbatches)
    choice = choose_method(obj.kind, method=method, schedule=schedule, options=options)
    notes: list[str] = []

    def say(message: str) -> None:
        notes.append(message)
        if notify is not None:
            notify(message)

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
            repeats=repeats, notify=say, inputs=inputs)
        source, imported = captured.source, captured.imported
        problem = captured.problem(obj)
    name = choice.name
    with _reporting(progress, name) as reporter:
        try:
            result = solvers.solve(problem, name, time_limit=time_limit, progress=reporter,
                                   deterministic=deterministic, **options)
        except ProblemTooLargeError as exc:
            if not choice.may_fall_back:
                raise
            say(fallback_note(str(exc)))
            result = solvers.solve(problem, FALLBACK_METHOD, time_limit=time_limit,
                                   progress=reporter, deterministic=deterministic)
    comparison = compare_methods(problem, result, compare, time_limit=time_limit,
                                 deterministic=deterministic, progress=progress) if compare else []
    block = None
    if source is not None:
        block = model_block(spec=spec, source=source, training=training, optimizer=optimizer,
                            precision=precision, granularity=granularity, config=config,
                            cluster=cluster, specs=specs, schedule=schedule,
                            microbatches=microbatches, objective=obj.kind,
                            training_form=obj.training)
    return PlannedModel(
        problem=problem, plan=result.plan, result=result,
        evaluation=evaluate(problem, result.plan) if result.plan is not None else None,
        imported=imported, spec=spec, model_block=block, schedule=schedule,
        microbatches=microbatches, comparison=tuple(comparison), notes=tuple(notes))


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
        with _reporting(progress, name) as reporter:
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
    return Objective(kind=objective or "throughput", schedule=schedule or "gpipe",
                     microbatches=microbatches if microbatches is not None else 4)


@contextlib.contextmanager
def _reporting(progress: ProgressFactory | None, method: str) -> Iterator[Any]:
    """The progress reporter of one method run, entered for its duration (``None``: none)."""
    reporter = progress(method) if progress is not None else None
    with reporter if reporter is not None else contextlib.nullcontext():
        yield reporter
