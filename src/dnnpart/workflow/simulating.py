"""Run a plan through the simulators (``dnnpart simulate``).

Three levels (:data:`LEVELS`): ``pipeline`` simulates the plan's stages as a synchronous
pipeline (GPipe or 1F1B, replicas, recomputation, memory per device;
:func:`dnnpart.simulate.simulate_pipeline`); ``ops`` emulates a framework scheduler operator
by operator with memory (paper 2; :func:`dnnpart.simulate.emulate_ops`); ``layerwise`` replays
a layer-wise strategy task by task beside Eq. 1 (paper 3; :func:`dnnpart.simulate.replay_strategy`).
``auto`` picks ``layerwise`` for plans with layer configurations, ``pipeline`` where the
plan's stages form a pipeline (for the ``stages`` objective: its linear pipeline with the
values carried between neighbouring stages, :func:`dnnpart.evaluate.chain.chain_stages`, as
``evaluate`` simulates it), else ``ops``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnnpart.errors import UsageError
from dnnpart.plan import Plan
from dnnpart.problem import STAGES, Problem
from dnnpart.workflow.planned import PlannedModel

LEVELS = ("auto", "pipeline", "ops", "layerwise")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Simulation:
    """A simulated plan.

    Attributes
    ----------
    level : the level simulated (``pipeline``, ``ops`` or ``layerwise``).
    summary : JSON-ready figures (``dnnpart simulate --json``): step time, bubble and memory
        (pipeline); makespan, peak memory and transfers (ops); replay and Eq. 1 times
        (layerwise); ``trace`` when one was written.
    result : the simulator's own result (:class:`~dnnpart.simulate.PipelineResult`,
        :class:`~dnnpart.simulate.OpSchedule` or :class:`~dnnpart.simulate.LayerwiseReplay`).
    schedule, microbatches, sync : the settings simulated.
    problem : the problem simulated (its cluster names the devices).
    """

    level: str
    summary: dict[str, Any]
    result: Any
    schedule: str
    microbatches: int
    sync: str
    problem: Problem | None = None

    def to_dict(self) -> dict[str, Any]:
        """The summary (JSON-ready)."""
        return dict(self.summary)


def simulate_plan(
    target: PlannedModel | Problem | str | Path,
    plan: Plan | None = None,
    *,
    model: str | None = None,
    trust: bool = False,
    level: str = "auto",
    schedule: str | None = None,
    microbatches: int | None = None,
    recompute: bool | None = None,
    contention: bool = False,
    sync: str = "after-backward",
    trace: str | Path | None = None,
) -> Simulation:
    """Simulate a plan at ``level`` (see the module docstring).

    Parameters
    ----------
    target, plan : a :class:`PlannedModel`, a problem and its plan, or a plan file alone (of
        a model, ``dnnpart plan -o``, or of a graph it names, ``dnnpart solve -o``).
    model, trust : for a plan file of a model, as for :func:`~dnnpart.workflow.load_plan`.
    level : ``auto``, ``pipeline``, ``ops`` or ``layerwise``.
    schedule, microbatches, recompute : the pipeline's (default: the objective's).
    contention : ops: a physical link carries one transfer at a time.
    sync : layerwise: parameter sync ``after-backward`` (Eq. 1's step) or ``eager``.
    trace : write a Chrome trace here (open it in ui.perfetto.dev).

    Raises
    ------
    ValueError
        ``pipeline`` for a plan whose stages form no pipeline, ``ops`` for a replicated plan,
        ``layerwise`` without the iteration objective.

    Examples
    --------
    >>> from dnnpart.solvers import solve
    >>> from dnnpart.workflow import load_problem
    >>> problem = load_problem("zoo:bert-3")
    >>> sim = simulate_plan(problem, solve(problem, "dp").plan, schedule="1f1b", microbatches=8)
    >>> sim.level, sim.summary["step_time"] > 0
    ('pipeline', True)
    >>> simulate_plan(problem, solve(problem, "dp").plan, level="ops").summary["makespan"] > 0
    True
    >>> import os, tempfile
    >>> from dnnpart.workflow import write_solved_plan
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.json")
    >>> write_solved_plan(problem, solve(problem, "dp"), path, "zoo:bert-3")
    >>> simulate_plan(path, microbatches=8).microbatches
    8
    """
    from dnnpart import simulate

    if isinstance(target, (str, Path)):
        if plan is not None:
            raise UsageError("simulate_plan: a plan file holds its plan; pass no plan beside it")
        target = _load_alone(target, model=model, trust=trust)
    problem = target.problem if isinstance(target, PlannedModel) else target
    if plan is None:
        if not isinstance(target, PlannedModel):
            raise UsageError("simulate_plan: pass the plan of the problem")
        plan = target.require_plan()
    objective = problem.objective
    schedule = schedule or objective.schedule
    microbatches = objective.microbatches if microbatches is None else microbatches
    recompute = objective.recompute if recompute is None else recompute
    if level == "layerwise" or (level == "auto" and plan.layer_configs is not None):
        replay, figures = _replay(problem, plan, sync, trace)
        return Simulation(level="layerwise", summary=figures, result=replay, schedule=schedule,
                          microbatches=microbatches, sync=sync, problem=problem)
    stages = None
    factor = 2.0
    if level in ("auto", "pipeline") and objective.kind == STAGES:
        # a trainer's pipeline: its stages with the messages carried between neighbours
        from dnnpart.evaluate.chain import chain_stages

        chained = chain_stages(problem, plan)
        if chained is not None:
            stages, factor = (chained[0], chained[1]), chained[2]
            level = "pipeline"
    if stages is None and level in ("auto", "pipeline"):
        try:
            stages = simulate.stages_from_plan(problem, plan)
            level = "pipeline"
        except ValueError:
            if level == "pipeline":
                raise
            level = "ops"
    c = problem.cluster
    result: Any
    if level == "pipeline":
        assert stages is not None
        result = simulate.simulate_pipeline(
            stages[0], c, edges=stages[1], microbatches=microbatches, schedule=schedule,
            recompute=recompute, training=problem.graph.is_training, optimizer_factor=factor)
        summary: dict[str, Any] = {"level": "pipeline", **result.to_dict(c)}
        timeline = result.timeline
    else:
        if plan.is_replicated:
            raise UsageError("--level ops emulates one execution; the plan replicates stages")
        result = simulate.emulate_ops(problem.graph, c, plan.assignment, contention=contention)
        names = [d.name for d in c.devices]
        summary = {"level": "ops", "makespan": result.makespan,
                   "peak_memory_bytes": dict(zip(names, result.peak_memory.tolist(), strict=True)),
                   "transfers": int(result.transfers[0].shape[0])}
        timeline = result.timeline()
    if trace is not None:  # an empty path is refused by the writer, not ignored
        simulate.write_chrome_trace(timeline, trace)
        summary["trace"] = trace
    return Simulation(level=level, summary=summary, result=result, schedule=schedule,
                      microbatches=microbatches, sync=sync, problem=problem)


def _load_alone(path: str | Path, *, model: str | None, trust: bool) -> PlannedModel:
    """A plan file read with the problem it names (its model block, or its graph)."""
    from dnnpart.io import fields as f
    from dnnpart.workflow.loading import load_plan, model_block_of

    text = str(path)
    if not Path(text).is_file():
        raise UsageError(f"{text}: no such plan file; simulate takes a plan file alone, or a "
                         "graph and its plan (dnnpart simulate GRAPH PLAN)")
    data = f.require_mapping(f.read_json(text), text)
    if model_block_of(data, text) is None and "graph" not in data:
        raise UsageError(f"{text}: the plan names no model or graph; give its graph: "
                         "dnnpart simulate GRAPH PLAN")
    return load_plan(text, model=model, trust=trust)


def _replay(problem: Problem, plan: Plan, sync: str,
            trace: str | Path | None) -> tuple[Any, dict[str, Any]]:
    """Paper 3: replay a layer-wise strategy task by task, beside its additive t_O."""
    from dnnpart.evaluate.iteration import iteration_configs, iteration_setting
    from dnnpart.simulate import replay_strategy, write_chrome_trace

    if problem.objective.kind != "iteration":
        raise UsageError("--level layerwise replays layer-wise strategies: pass --objective iteration")
    layers, device, bandwidth = iteration_setting(problem)
    r = replay_strategy(layers, iteration_configs(problem, plan), device, bandwidth, sync=sync)
    summary: dict[str, Any] = {"level": "layerwise", "sync": sync, "replay_s": r.makespan,
                               "t_o_s": r.additive, "ratio": r.ratio,
                               "bytes_per_step": r.moved_bytes, "tasks": len(r.timeline)}
    if trace is not None:  # an empty path is refused by the writer, not ignored
        write_chrome_trace(r.timeline, trace)
        summary["trace"] = trace
    return r, summary
