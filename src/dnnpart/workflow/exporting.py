"""Turn a plan into files other tools run or read (``dnnpart export``).

Formats (:data:`EXPORT_FORMATS`):

* ``placement``: operator -> device, one entry per forward operator in model order
  (:func:`dnnpart.export.placement_dict`);
* ``placement-text``: ``name device`` lines for every node of the graph (PARDNN's output form;
  any plan file: of a model, of a graph problem, or an expert split with ``graph=``);
* ``torch``: a folder with one saved ``torch.fx`` module per stage and ``stages.json``
  (:mod:`dnnpart.export.stage_files`);
* ``pipelining``: a folder that ``torchrun --nproc-per-node S run_pipeline.py`` runs: the
  script (:mod:`dnnpart.workflow.run_pipeline`), the plan, ``launch.json`` (rank -> stage ->
  device, ``CUDA_VISIBLE_DEVICES``, ``pipeline()`` split points) and a ``README.md``;
* ``deepspeed`` (a folder: ``PipelineModule``, ``ds_config.json``), ``megatron``
  (``--pipeline-model-parallel-layout``), ``torchtitan`` (a folder: its pipeline overrides):
  :mod:`dnnpart.workflow.runtime_exports`; each says which device runs which rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.errors import FormatError
from dnnpart.plan import Plan
from dnnpart.problem import Problem
from dnnpart.workflow.loading import load_plan, load_planned_model, model_block_of, with_runnable
from dnnpart.workflow.phases import ProgressFactory, loading_phase, phase
from dnnpart.workflow.planned import PlannedModel

if TYPE_CHECKING:
    from dnnpart.frontends.ir import ModelIR

EXPORT_FORMATS = ("torch", "placement", "pipelining", "deepspeed", "megatron", "torchtitan",
                  "placement-text")
#: Formats for layer-list runtimes (:mod:`dnnpart.workflow.runtime_exports`).
LAYER_FORMATS = ("deepspeed", "megatron", "torchtitan")
#: Formats written as a folder (the others write one file, or ``-``: standard output).
FOLDER_FORMATS = ("torch", "pipelining", "deepspeed", "torchtitan")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportResult:
    """What was written.

    Attributes
    ----------
    format : the format; ``out``: the file or folder written.
    details : what the format adds: ``stages`` (torch, pipelining), ``split_spec``,
        ``devices``, ``cuda_visible_devices`` and ``command`` (pipelining), ``parts``
        (deepspeed), ``layout`` (megatron), ``module_fqns_per_model_part`` (torchtitan),
        ``launch`` (the layer formats: stage -> rank -> device lines), ``nodes``
        (placement-text).
    """

    format: str
    out: Path
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``dnnpart export --json``)."""
        return {"format": self.format, "out": str(self.out), **self.details}


def export_plan(
    plan: PlannedModel | str | Path,
    format: str,
    out: str | Path,
    *,
    model: str | None = None,
    trust: bool = False,
    graph: str | None = None,
    cluster: str | None = None,
    progress: ProgressFactory | None = None,
) -> ExportResult:
    """Write ``plan`` in ``format`` (see the module docstring) to ``out``.

    Parameters
    ----------
    plan : a :class:`PlannedModel` or a plan file (``dnnpart plan -o``; for ``placement-text``
        any plan file).
    format : one of :data:`EXPORT_FORMATS`.
    out : the output file (a folder for ``torch``, ``pipelining``, ``deepspeed`` and
        ``torchtitan``).
    model, trust : for a plan file, as for :func:`~dnnpart.workflow.load_planned_model`.
    graph, cluster : ``placement-text`` only: the plan's graph (a file or ``zoo:NAME``) for a
        plan file that does not name it, and its cluster (default: the plan file's).
    progress : told each phase as it starts (``"loading PLAN (capturing its model)"``,
        ``"writing FORMAT"``; see :mod:`dnnpart.workflow.phases`).

    Examples
    --------
    >>> import json, os, tempfile
    >>> from dnnpart.workflow import plan_model
    >>> planned = plan_model("builtin:resnet50", cluster="2xA100", input_shapes=[(1, 3, 32, 32)])
    >>> out = os.path.join(tempfile.mkdtemp(), "placement.json")
    >>> export_plan(planned, "placement", out).format
    'placement'
    >>> len(json.load(open(out))["nodes"])
    175
    """
    if format not in EXPORT_FORMATS:
        raise FormatError(f"--format {format!r}: expected one of {', '.join(EXPORT_FORMATS)}")
    from dnnpart.io.output_files import check_output

    check_output(out, option="--out", directory=format in FOLDER_FORMATS)  # before any work
    if format == "placement-text":
        return _placement_text(plan, Path(out), model=model, trust=trust, graph=graph,
                               cluster=cluster, progress=progress)
    if graph or cluster:
        raise FormatError("--graph/--cluster: only for --format placement-text")
    with phase(progress, loading_phase(plan, model=model)):
        planned = with_runnable(plan) if isinstance(plan, PlannedModel) else \
            load_planned_model(plan, model=model, trust=trust)
    with phase(progress, f"writing {format}"):
        if isinstance(plan, PlannedModel):
            return _write(planned, format, Path(out), planned.spec or planned.problem.name)
        return _write(planned, format, Path(out), str(plan), source=Path(plan), model=model,
                      trust=trust)


def _write(planned: PlannedModel, format: str, target: Path, where: str, *,
           source: Path | None = None, model: str | None = None, trust: bool = True) -> ExportResult:
    from dnnpart.export import placement_dict
    from dnnpart.io.dnn_partitioning import write_json_atomic

    run = planned.runnable
    assert run is not None and planned.imported is not None  # a model plan, loaded to run
    imported, plan = planned.imported, planned.require_plan()
    names = [d.name for d in planned.problem.cluster.devices]
    details: dict[str, Any] = {}
    if format == "placement":
        write_json_atomic(placement_dict(planned.problem, imported, plan), target)
    elif format in LAYER_FORMATS:
        from dnnpart.workflow.runtime_exports import write_layer_export

        details.update(write_layer_export(planned, format, target, where))
    elif format == "pipelining":
        details.update(_write_pipelining(planned, target, where, source=source, model=model,
                                         trust=trust))
    else:
        if run.module is None:
            raise FormatError(f"{where}: --format torch needs a torch model, not {run.source.spec}")
        from dnnpart.export.stage_files import write_stage_files
        from dnnpart.export.stages import split_module

        program = split_module(run.module, run.device_of)
        details["stages"] = len(write_stage_files(program, names, target, model=run.source.spec))
    return ExportResult(format=format, out=target, details=details)


def _write_pipelining(planned: PlannedModel, target: Path, where: str, *, source: Path | None,
                      model: str | None, trust: bool) -> dict[str, Any]:
    """A folder ``torchrun`` runs: ``run_pipeline.py``, ``plan.json``, ``launch.json``, ``README.md``.

    The stages are those ``dnnpart run`` runs (:func:`~dnnpart.workflow.running.pipeline_program`:
    the plan's, on its devices, or a refusal naming the device); ``pipeline()`` split points
    where every stage starts at a module, else the script runs dnnpart's stage modules.
    """
    import importlib.resources

    from dnnpart.export.pipelining import launch_command, launch_dict, readme_text, split_points
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.io.output_files import check_output, write_output
    from dnnpart.workflow.running import pipeline_program, planned_microbatches, planned_schedule

    run, imported = planned.runnable, planned.imported
    assert run is not None and imported is not None
    check_output(target, option="--out", directory=True)  # a folder: never a file's place
    program, _ = pipeline_program(planned, where)
    stages: list[dict[str, Any]] = [{"device": s.device, "first_operator": s.nodes[0] if s.nodes else None,
                                     "n_operators": len(s.nodes)} for s in program.stages]
    note = ""
    try:
        placed = {n: s.device for s in program.stages for n in s.nodes}
        points = split_points(imported.ir, planned_operator_devices(imported.ir, placed))
        if [p["device"] for p in points] != [s["device"] for s in stages]:
            raise FormatError("the planned operators and the module run give different stages")
        for s, p in zip(stages, points, strict=True):
            s["split_before"] = p["split_before"]
    except FormatError as exc:
        note = str(exc)
    launch = launch_dict(stages, planned.problem.cluster, split_prefix=run.source.strip_prefix)
    block = planned.model_block or {}
    launch.update({
        "format": "dnnpart.pipelining-launch", "version": 1, "plan": "plan.json",
        "spec": planned.spec, "model": model, "trust_plan": bool(trust),
        "training": bool(block.get("training")), "optimizer": block.get("optimizer"),
        "schedule": planned_schedule(planned, None), "microbatches": planned_microbatches(planned, None),
    })
    if note:
        launch["split_spec"], launch["split_note"] = {}, note
        for row in launch["stages"]:
            row["split_before"] = None
    launch["command"] = launch_command(launch)
    target.mkdir(parents=True, exist_ok=True)
    if source is not None:
        from dnnpart.limits import read_bounded

        write_output(read_bounded(source, what="plan file"), target / "plan.json")
    else:
        planned.write(target / "plan.json")
    write_json_atomic(launch, target / "launch.json")
    script = importlib.resources.files("dnnpart.workflow").joinpath("run_pipeline.py").read_text()
    write_output(script, target / "run_pipeline.py")
    write_output(readme_text(launch), target / "README.md")
    return {"stages": len(stages), "split_spec": list(launch["split_spec"]),
            "devices": [r["device"] for r in launch["stages"]],
            "cuda_visible_devices": launch["cuda_visible_devices"], "command": launch["command"]}


def planned_operator_devices(ir: ModelIR, device_of: Mapping[str, int]) -> dict[str, int]:
    """The device of every operator of the planned model (``ir``, model order), from the
    device of every operator of the module that runs (``device_of``).

    The layer-list exports (pipelining, DeepSpeed, Megatron) describe the planned operators.
    The module run can lack a few of them: an ``hf:`` model is planned on the meta device and
    run from a second capture with weights, which may drop layout-only nodes
    (``contiguous``). Such an operator goes with the operator before it in model order (the
    first ones with the first placed operator), as its producer does in the run.

    Examples
    --------
    >>> from dnnpart.cost.ops import OpSpec
    >>> from dnnpart.frontends.ir import ModelIR, OpRecord
    >>> ops = [OpRecord(name=n, source_type="x", spec=OpSpec(op_type="x"), module_path=n)
    ...        for n in ("a", "contiguous", "b", "c")]
    >>> planned_operator_devices(ModelIR(name="m", source="fx", ops=ops), {"a": 0, "b": 1, "c": 1})
    {'a': 0, 'contiguous': 0, 'b': 1, 'c': 1}
    """
    first = next((device_of[op.name] for op in ir.ops if op.name in device_of), 0)
    out: dict[str, int] = {}
    for op in ir.ops:
        first = out[op.name] = device_of.get(op.name, first)
    return out


def _placement_text(plan: PlannedModel | str | Path, target: Path, *, model: str | None,
                    trust: bool, graph: str | None, cluster: str | None,
                    progress: ProgressFactory | None = None) -> ExportResult:
    """``name device`` lines: of the problem planned, of ``graph``, or of the plan file's own."""
    if isinstance(plan, PlannedModel):
        if graph or cluster:
            raise FormatError("--graph/--cluster: only for a plan file")
        problem, placed = plan.problem, plan.require_plan()
    elif graph:
        from dnnpart.io.plan_files import read_plan
        from dnnpart.workflow.inputs import load_problem

        with phase(progress, f"loading {graph}"):
            problem = load_problem(graph, cluster=cluster, plan=None if cluster else plan)
        placed = read_plan(plan, problem)
    else:
        if cluster:
            raise FormatError("--cluster: needs --graph")
        from dnnpart.io import fields as f

        data = f.require_mapping(f.read_json(plan), str(plan))
        if model_block_of(data, plan) is None and "graph" not in data:
            raise FormatError(f"{plan}: model: missing; give the plan's graph with --graph GRAPH")
        with phase(progress, loading_phase(plan, runnable=False)):
            loaded = load_plan(plan, model=model, trust=trust)
        problem, placed = loaded.problem, loaded.require_plan()
    with phase(progress, "writing placement-text"):
        return _write_lines(problem, placed, target)


def _write_lines(problem: Problem, plan: Plan, target: Path) -> ExportResult:
    from dnnpart.export.placement import placement_lines
    from dnnpart.io.output_files import write_output

    lines = placement_lines(problem, plan)
    write_output("".join(line + "\n" for line in lines), target)
    return ExportResult(format="placement-text", out=target, details={"nodes": len(lines)})
