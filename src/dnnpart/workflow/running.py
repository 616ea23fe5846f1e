"""Run a plan of a torch model across local processes and check it (``dnnpart run``).

Inference plans run their stages in one gloo process per device, micro-batch by
micro-batch, and are compared with the unpartitioned model (:class:`RunResult`). Training plans
run one pipelined step, forward and backward, under a ``torch.distributed.pipelining``
schedule, and their losses and gradients are compared with the unpartitioned step
(:class:`TrainingRunResult`; see :mod:`dnnpart.export.training_run`). Then both run ``steps``
more steps, measured, beside what the cost model predicts for them
(:mod:`dnnpart.workflow.measured`).

A plan runs as planned or not at all: every device that holds operators runs a stage, in the
plan's order (:func:`pipeline_program` for training plans and the pipelining export), and the
plan's schedule and micro-batches are used unless the caller names others. A plan that cannot
run so is refused in one line naming the device and why (a device holding only backward
operators, a backward placed away from its forward, a device whose operators the module run
lacks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.errors import FormatError, UsageError
from dnnpart.workflow.loading import load_planned_model, with_runnable
from dnnpart.workflow.phases import ProgressFactory, loading_phase, phase
from dnnpart.workflow.planned import PlannedModel

if TYPE_CHECKING:
    from dnnpart.evaluate.run_prediction import RunPrediction
    from dnnpart.export.stages import StagedProgram
    from dnnpart.export.training_run import TrainingRun
    from dnnpart.workflow.measured import RunComparison

#: Micro-batches of an inference run when none is asked for.
DEFAULT_MICROBATCHES = 4


#: Where ``run`` puts its ranks (``--device``).
RUN_DEVICES = ("cpu", "cuda")

@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """An inference run: the distributed outputs against the unpartitioned model's.

    Attributes
    ----------
    model : the model spec; ``processes``: gloo processes; ``devices_used``: devices with
        stages; ``stages``: stages run; ``microbatches``: micro-batches run.
    max_abs_diff : max |distributed - unpartitioned| over every output.
    max_abs_reference : max |unpartitioned| (the scale of the difference).
    measurement : the timed passes and peak memory beside their prediction (``None``: not
        measured).
    """

    model: str
    processes: int
    devices_used: tuple[str, ...]
    stages: int
    microbatches: int
    max_abs_diff: float
    max_abs_reference: float
    measurement: RunComparison | None = None

    @property
    def relative_diff(self) -> float:
        """``max_abs_diff / max_abs_reference`` (the difference itself for an all-zero output)."""
        scale = self.max_abs_reference
        return self.max_abs_diff / scale if scale > 0 else self.max_abs_diff

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``dnnpart run --json``)."""
        return {"model": self.model, "processes": self.processes,
                "devices_used": list(self.devices_used), "stages": self.stages,
                "microbatches": self.microbatches, "max_abs_diff": self.max_abs_diff,
                "max_abs_reference": self.max_abs_reference, "relative_diff": self.relative_diff,
                **({"measurement": self.measurement.to_dict()} if self.measurement else {})}


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingRunResult:
    """One pipelined training step, checked against the unpartitioned step.

    Attributes
    ----------
    model : the model spec.
    devices : the device of each stage, in stage order.
    operators_moved : operators the two captures name differently, run with their producers.
    operators : operators of the module run per stage.
    run : the step and its check (:class:`~dnnpart.export.training_run.TrainingRun`).
    measurement : the timed steps and peak memory beside their prediction.
    """

    model: str
    devices: tuple[str, ...]
    operators_moved: int
    operators: tuple[int, ...]
    run: TrainingRun
    measurement: RunComparison | None = None

    @property
    def passed(self) -> bool:
        """Whether losses and gradients agree within the tolerance."""
        return self.run.passed

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``dnnpart run --json``)."""
        from dnnpart.export.training_run import RTOL

        r = self.run
        return {
            "model": self.model,
            "schedule": r.schedule,
            "microbatches": r.microbatches,
            "stages": r.stages,
            "devices": list(self.devices),
            "operators_moved": self.operators_moved,
            "losses": r.losses,
            "loss_max_abs_diff": r.loss_max_abs_diff,
            "parameters_checked": r.n_parameters_checked,
            "grad_max_abs_diff": r.grad_max_abs_diff,
            "grad_relative_diff": r.grad_relative_diff,
            "tolerance": RTOL,
            "passed": r.passed,
            "operators": list(self.operators),
            **({"measurement": self.measurement.to_dict()} if self.measurement else {}),
        }


def op_level_method(data: Any) -> str | None:
    """The plan's method if it places single operators for the makespan objective (paper 2).

    Examples
    --------
    >>> op_level_method({"method": "pardnn"}), op_level_method({"method": "dp"})
    ('pardnn', None)
    """
    method = data.get("method") if isinstance(data, Mapping) else None
    if not isinstance(method, str):
        return None
    from dnnpart.solvers.registry import available_methods

    for info in available_methods():
        if info.name == method and "makespan" in info.objectives:
            return method
    return None


def run_plan(
    plan: PlannedModel | str | Path,
    *,
    model: str | None = None,
    trust: bool = False,
    nproc: int | None = None,
    microbatches: int | None = None,
    schedule: str | None = None,
    steps: int = 5,
    device: str = "cpu",
    progress: ProgressFactory | None = None,
) -> RunResult | TrainingRunResult:
    """Run a plan of a torch model in local gloo processes and check it against the model.

    Parameters
    ----------
    plan : a :class:`PlannedModel` or a plan file written by ``dnnpart plan -o``.
    model, trust : for a plan file, as for :func:`~dnnpart.workflow.load_planned_model`.
    nproc : processes (default: one per device the plan uses; inference plans).
    microbatches : micro-batches (default: the plan's, else 4).
    schedule : training plans: ``gpipe`` or ``1f1b`` (default: the plan's, else ``1f1b``).
    steps : timed steps after the checked one (``1..1000``), measured beside the prediction.
    device : ``cpu`` (every rank a CPU process), or ``cuda``: rank ``r`` on ``cuda:r`` (as
        many GPUs as the plan has stage devices), checked against the float32 CPU result.
    progress : told each phase as it starts (``"loading PLAN (capturing its model)"``,
        ``"running N stage processes"``, ...; see :mod:`dnnpart.workflow.phases`).

    Returns
    -------
    RunResult or TrainingRunResult
        For an inference plan, or for a training plan (``training=True`` when planned).

    Raises
    ------
    FormatError
        An op-level plan (paper 2's makespan methods), or a model that is not a torch model.
    UsageError
        Bad ``nproc``, ``microbatches``, ``steps`` or ``device`` (``cuda`` on a machine with
        too few GPUs).

    Examples
    --------
    >>> from dnnpart.workflow import plan_model
    >>> planned = plan_model("module:dnnpart.frontends.models:shared_relu_resnet",
    ...                      cluster="2xA100", input_shapes=[(1, 3, 16, 16)])
    >>> ran = run_plan(planned, steps=1)
    >>> ran.stages >= 1 and ran.relative_diff < 1e-5
    True
    """
    from dnnpart.workflow.measured import check_steps

    for flag, value in (("--microbatches", microbatches), ("--nproc", nproc)):
        if value is not None and (isinstance(value, bool) or value < 1):  # before any capture
            raise UsageError(f"{flag} {value}: expected an integer >= 1")
    check_steps(steps)
    if device not in RUN_DEVICES:
        raise UsageError(f"--device {device!r}: expected one of {', '.join(RUN_DEVICES)}")
    from dnnpart.export.runtime import check_run_device

    check_run_device(device, 1)  # no GPU at all: refused before the model is captured
    where, method, block = _what_it_is(plan)
    if method is not None:  # refused before the model is captured
        raise FormatError(
            f"{where}: method {method} made an op-level placement for the makespan objective "
            "(paper 2); `dnnpart run` executes pipeline-stage plans of a torch model only -- "
            "score it with `dnnpart evaluate --objective makespan` or `dnnpart simulate`"
        )
    with phase(progress, loading_phase(plan, model=model)):
        loaded = with_runnable(plan) if isinstance(plan, PlannedModel) else \
            load_planned_model(plan, model=model, trust=trust)
    if block.get("training"):
        return _run_training(loaded, where, microbatches=microbatches, schedule=schedule,
                             steps=steps, device=device, progress=progress)
    return _run_inference(loaded, where, nproc=nproc, microbatches=microbatches, steps=steps,
                          device=device, progress=progress)


def _what_it_is(plan: PlannedModel | str | Path) -> tuple[str, str | None, Mapping[str, Any]]:
    """``(name for messages, op-level method or None, model block)`` of a plan, read cheaply."""
    if isinstance(plan, PlannedModel):
        data: Any = plan.file_data if plan.file_data is not None else plan.record
        return plan.spec or plan.problem.name, op_level_method(data), plan.model_block or {}
    from dnnpart.io import fields as f

    data = f.read_json(plan)
    method = op_level_method(data)
    raw = f.require_mapping(data, str(plan)).get("model") if method is None else None
    return str(plan), method, raw if isinstance(raw, dict) else {}


def _torch_model(planned: PlannedModel, where: str) -> tuple[Any, Any, dict[str, int]]:
    run = planned.runnable
    assert run is not None  # loaded with runnable=True
    if run.module is None:
        raise FormatError(f"{where}: `dnnpart run` needs a torch model, not {run.source.spec}")
    return run.source, run.module, run.device_of


def _run_inference(planned: PlannedModel, where: str, *, nproc: int | None,
                   microbatches: int | None, steps: int, device: str = "cpu",
                   progress: ProgressFactory | None = None) -> RunResult:
    micro = planned_microbatches(planned, microbatches)
    source, gm, device_of = _torch_model(planned, where)
    import torch

    from dnnpart.export.runtime import check_run_device, measure_distributed
    from dnnpart.export.stages import split_module
    from dnnpart.frontends.sources import example_inputs

    program = split_module(gm, device_of)
    _check_devices_ran(planned, program.devices, where)
    if nproc is not None and nproc < len(program.devices):
        raise FormatError(f"--nproc {nproc}: the plan uses {len(program.devices)} devices")
    check_run_device(device, nproc or len(program.devices))
    batches = [
        example_inputs(source.input_shapes, source.input_dtype, seed=i + 1, module=source.module)
        for i in range(micro)
    ]
    with phase(progress, _processes(nproc or len(program.devices))):
        ran = measure_distributed(program, batches, nproc=nproc, steps=steps, device=device)
    outputs = ran.outputs
    torch.set_num_threads(1)
    with phase(progress, "running the unpartitioned model"), torch.no_grad():
        references = [source.module(*mb) for mb in batches]
    diffs = [_max_abs_diff(o, r) for o, r in zip(outputs, references, strict=True)]
    comparison = _comparison(planned, list(program.devices), ran.measured, ran.step_s,
                             training=False, schedule="gpipe", microbatches=micro,
                             output_bytes=_nbytes(references[0]))
    return RunResult(
        model=source.spec, processes=nproc or len(program.devices),
        devices_used=tuple(planned.problem.cluster.devices[d].name for d in program.devices),
        stages=len(program.stages), microbatches=len(batches), max_abs_diff=max(diffs),
        max_abs_reference=max(_max_abs(r) for r in references), measurement=comparison)


def _run_training(planned: PlannedModel, where: str, *,
                  microbatches: int | None, schedule: str | None, steps: int, device: str = "cpu",
                  progress: ProgressFactory | None = None) -> TrainingRunResult:
    from dnnpart.export.runtime import check_run_device
    from dnnpart.export.training_run import run_training_step
    from dnnpart.frontends.sources import example_inputs

    source, gm, _ = _torch_model(planned, where)
    problem = planned.problem
    chosen = planned_schedule(planned, schedule)
    n_micro = planned_microbatches(planned, microbatches)
    recompute = bool(problem.objective.recompute)  # as planned: each stage recomputes its forward
    program, moved = pipeline_program(planned, where)
    check_run_device(device, len(program.stages))
    batches = [
        example_inputs(source.input_shapes, source.input_dtype, seed=i + 1, module=source.module)
        for i in range(n_micro)
    ]
    with phase(progress, _processes(len(program.stages)) + " and the unpartitioned step"):
        result = run_training_step(program, gm, batches, schedule=chosen, steps=steps,
                                   recompute=recompute, device=device)
    order = [s.device for s in program.stages]
    comparison = _comparison(planned, order, result.measured, result.step_s, training=True,
                             schedule=chosen, microbatches=n_micro, output_bytes=result.output_bytes,
                             recompute=recompute)
    return TrainingRunResult(model=source.spec,
                             devices=tuple(problem.cluster.devices[d].name for d in order),
                             operators_moved=moved, operators=tuple(len(s.nodes) for s in program.stages),
                             run=result, measurement=comparison)


def _comparison(planned: PlannedModel, order: list[int], measured: Any, step_s: Any, *,
                training: bool, schedule: str, microbatches: int,
                output_bytes: float, recompute: bool = False) -> RunComparison:
    """The run's measurements beside the cost model's prediction for the run's conditions."""
    from dnnpart.evaluate.run_prediction import predict_run
    from dnnpart.workflow.measured import RunComparison

    problem = planned.problem
    prediction = predict_run(problem, planned.require_plan(), order, training=training,
                             schedule=schedule, microbatches=microbatches,
                             output_bytes=output_bytes, recompute=recompute)
    return RunComparison(prediction=prediction, measured=measured, step_s=step_s,
                         training=training, priced_by=priced_by(planned, order))


def priced_by(planned: PlannedModel, order: Sequence[int]) -> list[str]:
    """What priced each rank's device: its spec's name, else its kind."""
    devices = planned.problem.cluster.devices
    return [(spec.name if (spec := devices[d].spec) is not None else devices[d].kind) for d in order]


def predict_plan_run(plan: PlannedModel, *, microbatches: int | None = None,
                     schedule: str | None = None) -> tuple[RunPrediction, list[int]]:
    """What ``run`` would predict for ``plan`` (a :class:`PlannedModel` loaded with its
    runnable module), without running it: the prediction and the devices in rank order.

    For a measurement taken elsewhere -- on a machine this one is not, such as a GPU the
    plan was calibrated for -- priced by this checkout's capture and cost model.

    Examples
    --------
    >>> from dnnpart.workflow import plan_model
    >>> planned = plan_model("module:dnnpart.frontends.models:shared_relu_resnet",
    ...                      cluster="2xA100", input_shapes=[(1, 3, 16, 16)])
    >>> prediction, order = predict_plan_run(planned, microbatches=2)
    >>> len(prediction.stages) == len(order) >= 1
    True
    """
    import torch

    from dnnpart.evaluate.run_prediction import predict_run
    from dnnpart.export.stages import split_module
    from dnnpart.export.training_run import main_output
    from dnnpart.frontends.sources import example_inputs

    planned = plan if plan.runnable is not None else with_runnable(plan)
    where = planned.spec or planned.problem.name
    source, gm, device_of = _torch_model(planned, where)
    micro = planned_microbatches(planned, microbatches)
    example = example_inputs(source.input_shapes, source.input_dtype, seed=1, module=source.module)
    training = bool((planned.model_block or {}).get("training"))  # as run_plan decides
    with torch.no_grad():
        if training:
            program, _ = pipeline_program(planned, where)
            order = [s.device for s in program.stages]
            out = main_output(gm(*example))
            nbytes = float(out.numel() * out.element_size()) if out is not None else 0.0
            prediction = predict_run(planned.problem, planned.require_plan(), order, training=True,
                                     schedule=planned_schedule(planned, schedule), microbatches=micro,
                                     output_bytes=nbytes,
                                     recompute=bool(planned.problem.objective.recompute))
        else:
            order = list(split_module(gm, device_of).devices)
            prediction = predict_run(planned.problem, planned.require_plan(), order, training=False,
                                     schedule="gpipe", microbatches=micro,
                                     output_bytes=_nbytes(source.module(*example)))
    return prediction, order


def _nbytes(value: Any) -> float:
    """Bytes of every tensor in a (nested) model output."""
    import torch

    if isinstance(value, torch.Tensor):
        return float(value.numel() * value.element_size())
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return float(sum(_nbytes(x) for x in items))


def _processes(n: int) -> str:
    """The phase of running the stages in ``n`` processes."""
    return f"running {n} stage process{'' if n == 1 else 'es'}"


def planned_microbatches(planned: PlannedModel, asked: int | None) -> int:
    """Micro-batches of a run: ``asked``, else the plan's, else :data:`DEFAULT_MICROBATCHES`.

    Raises
    ------
    FormatError
        ``asked`` or the plan's value outside ``1..MAX_MICROBATCHES`` (:mod:`dnnpart.limits`).
    """
    from dnnpart.limits import check_microbatches

    if asked is not None:
        return check_microbatches(asked)
    stored = planned.microbatches if planned.microbatches is not None else \
        (planned.model_block or {}).get("microbatches")
    if stored is None:
        return DEFAULT_MICROBATCHES
    return check_microbatches(stored, "the plan's model.microbatches")


def planned_schedule(planned: PlannedModel, asked: str | None) -> str:
    """Schedule of a training run: ``asked``, else the plan's, else ``1f1b``."""
    from dnnpart.export.training_run import SCHEDULES

    chosen = asked or planned.schedule or str((planned.model_block or {}).get("schedule") or "1f1b")
    if chosen not in SCHEDULES:
        raise UsageError(f"--schedule {chosen}: expected one of {', '.join(SCHEDULES)}")
    return chosen


def pipeline_program(planned: PlannedModel, where: str) -> tuple[StagedProgram, int]:
    """The linear pipeline a schedule runs for ``planned``: exactly the plan's stages, on
    exactly its devices, in the plan's order; and how many operators moved to their
    producers' stage (the two captures name a few differently, see
    :func:`~dnnpart.export.training_run.linearize`).

    Raises
    ------
    FormatError
        One line naming the device and why the plan cannot run as planned: replicated stages,
        devices passing activations both ways, a device holding no forward operator, a
        backward operator placed away from its forward, a device the module run lacks.
    """
    from dnnpart.export.stages import split_module
    from dnnpart.export.training_run import check_linear, device_order, linearize

    _, gm, device_of = _torch_model(planned, where)
    plan, problem = planned.require_plan(), planned.problem
    if plan.is_replicated:
        check_linear(split_module(gm, device_of), replicated=True)
    order = device_order(problem.graph, plan.assignment)
    _check_backward_placement(planned, order, where)
    by_block = block_placement(planned, gm)
    if by_block is not None:  # a plan of whole blocks: each operator with its block
        device_of = {k: by_block.get(k, d) for k, d in device_of.items()}
    device_of, moved = linearize(gm, device_of, order)
    program = split_module(gm, device_of, order)
    check_linear(program)
    _check_devices_ran(planned, tuple(s.device for s in program.stages), where, order=order)
    return program, moved


def block_placement(planned: PlannedModel, gm: Any) -> dict[str, int] | None:
    """Where each operator of the module run goes when the plan holds whole block units
    (:func:`dnnpart.graph.blocks.node_units`, every unit on one device): by its own module
    path, so no matching of the two captures operator by operator can shift one to a
    neighbouring stage. A block's operators go to its device; an operator outside every block
    to the prologue's device when no block precedes it, to the epilogue's when no block
    follows it, else to the device of the last block it depends on (the units' own rules).
    ``None`` when the plan splits a unit or a unit merges several blocks.
    """
    import numpy as np

    from dnnpart.graph.blocks import block_keys, node_units

    g, a = planned.problem.graph, planned.require_plan().assignment
    units = node_units(g)
    device: dict[str, int] = {}
    for u, name in enumerate(units.names):
        held = np.unique(a[units.unit == u])
        if held.size != 1 or ".." in name:
            return None
        device[name] = int(held[0])
    run = planned.runnable
    strip = f"{run.source.strip_prefix}." if run is not None and run.source.strip_prefix else ""
    ops = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function", "call_method")]

    def path_of(n: Any) -> str:
        stack = n.meta.get("nn_module_stack") or {}
        path = str(list(stack.values())[-1][0]) if stack else ""
        return path[len(strip):] if strip and path.startswith(strip) else path

    keys = dict(zip((n.name for n in ops), block_keys([path_of(n) for n in ops]), strict=True))
    if not any(k in device for k in keys.values() if k):
        return None
    rank = {d: i for i, d in enumerate(dict.fromkeys(device.values()))}
    before: dict[str, int] = {}  # the latest block device an operator depends on (-1: none)
    for n in ops:
        lv = max((before[x.name] for x in n.all_input_nodes if x.name in before), default=-1)
        key = keys[n.name]
        before[n.name] = max(lv, rank[device[key]]) if key in device else lv
    feeds_block: set[str] = set()
    for n in reversed(ops):
        if keys[n.name] in device or any(u.name in feeds_block for u in n.users):
            feeds_block.add(n.name)
    by_rank = list(dict.fromkeys(device.values()))
    out: dict[str, int] = {}
    for n in ops:
        key = keys[n.name]
        if key in device:
            out[n.name] = device[key]
        elif before[n.name] < 0:
            out[n.name] = device.get("prologue", by_rank[0])
        elif n.name not in feeds_block:
            out[n.name] = device.get("epilogue", by_rank[-1])
        else:
            out[n.name] = by_rank[before[n.name]]
    return out


def _check_backward_placement(planned: PlannedModel, order: list[int], where: str) -> None:
    """Every device holding operators runs forward operators, and every backward operator
    runs where its forward does (what a pipeline schedule executes)."""
    import numpy as np

    problem, a = planned.problem, planned.require_plan().assignment
    g, names = problem.graph, [d.name for d in problem.cluster.devices]
    held = np.bincount(a, minlength=len(names))
    for d in np.flatnonzero(held).tolist():
        if d not in order:
            raise FormatError(
                f"{where}: device {names[d]} holds {held[d]} operators but no forward operator; a "
                "pipeline schedule runs each stage's backward where its forward runs, so the "
                "plan cannot run as planned (plan with --schedule)")
    of = g.forward_of
    if of is None:
        return
    # forward partners joined to the forward computation by an edge: an isolated forward node
    # (a dead allocation of the autograd replay) runs nowhere, and its placement says nothing
    fwd = ~g.is_backward
    src = np.repeat(np.arange(g.n_nodes), np.diff(g.succ_ptr))
    dst = g.succ_idx.astype(np.int64)
    both = fwd[src] & fwd[dst]
    joined = np.zeros(g.n_nodes, dtype=bool)
    joined[src[both]] = joined[dst[both]] = True
    has = np.flatnonzero(g.is_backward & (of >= 0))
    has = has[joined[of[has]]]
    away = has[a[has] != a[of[has]]]
    if away.size:
        v = int(away[0])
        raise FormatError(
            f"{where}: device {names[a[v]]} runs the backward of operator {g.names[of[v]]!r}, "
            f"planned on {names[a[of[v]]]} ({away.size} backward operators away from their forward); "
            "a pipeline schedule runs each stage's backward where its forward runs (plan with "
            "--schedule)")


def _check_devices_ran(planned: PlannedModel, ran: tuple[int, ...], where: str, *,
                       order: list[int] | None = None) -> None:
    """The module run has a stage on every device the plan gives forward operators (and, for
    a pipeline, in the plan's ``order``)."""
    import numpy as np

    problem, a = planned.problem, planned.require_plan().assignment
    names = [d.name for d in problem.cluster.devices]
    fwd = ~problem.graph.is_backward
    planned_devices = order if order is not None else sorted(set(a[fwd].tolist()))
    missing = [d for d in planned_devices if d not in ran]
    if missing:
        d = missing[0]
        g = problem.graph
        v = int(np.flatnonzero(fwd & (a == d))[0])
        path = g.module_paths[v] if g.module_paths is not None else ""
        raise FormatError(
            f"{where}: device {names[d]} holds {int(np.sum(a[fwd] == d))} forward operators of the "
            f"plan (e.g. {g.names[v]!r}{f' in {path}' if path else ''}) and the module run has none "
            "of them (the planned graph decomposes operators, such as attention, that the module "
            "runs whole); the plan cannot run as planned -- cut it between modules")
    if order is not None and list(dict.fromkeys(ran)) != list(order):
        raise FormatError(
            f"{where}: the module run orders the stages {', '.join(names[d] for d in dict.fromkeys(ran))}"
            f", the plan {', '.join(names[d] for d in order)}; the plan cannot run as planned")


def _max_abs(a: Any) -> float:
    import torch

    if isinstance(a, torch.Tensor):
        return float(a.double().abs().max()) if a.numel() and a.is_floating_point() else 0.0
    if isinstance(a, (list, tuple)):
        return max((_max_abs(x) for x in a), default=0.0)
    if isinstance(a, dict):
        return max((_max_abs(x) for x in a.values()), default=0.0)
    return 0.0


def _max_abs_diff(a: Any, b: Any) -> float:
    import torch

    if isinstance(a, (list, tuple)) and len(a) == 1 and isinstance(b, torch.Tensor):
        a = a[0]  # the exported graph returns a 1-tuple where the module returns a tensor
    if isinstance(a, torch.Tensor):
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (list, tuple)):
        return max((_max_abs_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, dict):
        return max((_max_abs_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0 if a == b else float("inf")
