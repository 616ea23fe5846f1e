"""The DeepSpeed, Megatron and torchtitan exports of a planned model (``dnnpart export``).

Each finds the stage of every layer unit (:func:`dnnpart.export.layers.unit_stages`), the
device of every stage and the launch map (:func:`dnnpart.export.launch.launch_map`), then
writes its runtime's files (:mod:`dnnpart.export.deepspeed`, :mod:`~dnnpart.export.megatron`,
:mod:`~dnnpart.export.torchtitan`). Micro-batches default to the plan's, else 4 (as ``dnnpart
run``); the micro-batch size is the planned input's batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dnnpart.errors import FormatError
from dnnpart.workflow.planned import PlannedModel

if TYPE_CHECKING:
    from dnnpart.export.layers import UnitStages

DEFAULT_MICROBATCHES = 4


def write_layer_export(planned: PlannedModel, format: str, target: Path, where: str) -> dict[str, Any]:
    """Write ``format`` (``deepspeed``, ``megatron`` or ``torchtitan``) to ``target``; the
    export's details (``launch`` lines and the format's own key)."""
    from dnnpart.export.launch import launch_lines, launch_map

    imported = planned.imported
    assert imported is not None  # a model plan
    block = dict(planned.model_block or {})
    spec = str(planned.spec or block.get("spec") or where)
    cluster = planned.problem.cluster
    if format == "deepspeed":
        return _deepspeed(planned, target, where, spec, block)
    if format == "megatron":  # the family first: a model Megatron cannot run is not a bad plan
        from dnnpart.export.megatron import check_family

        check_family(imported.ir)
    else:
        from dnnpart.export.torchtitan import family_of

        family_of(spec)
    stages = plan_unit_stages(planned)
    launch = launch_map(cluster, stages.devices)
    details: dict[str, Any] = {"launch": launch_lines(launch)}
    if format == "megatron":
        from dnnpart.export.megatron import megatron_dict
        from dnnpart.io.dnn_partitioning import write_json_atomic

        data = megatron_dict(imported.ir, stages, launch)
        write_json_atomic(data, target)
        details["layout"] = data["pipeline_model_parallel_layout"]
        details["validated_with"] = data["validated_with"]
        return details
    return _torchtitan(stages, launch, target, spec, block, details)


def plan_unit_stages(planned: PlannedModel) -> UnitStages:
    """The stage of every layer unit, read on the planned graph itself (its forward nodes'
    module paths and the plan's devices), so no re-capture of the model can blur a cut."""
    from dnnpart.export.layers import graph_devices, graph_units, unit_stages

    graph = planned.problem.graph
    return unit_stages(graph_units(graph, planned.problem.name),
                       graph_devices(graph, planned.require_plan().assignment))


def _micro(block: dict[str, Any]) -> tuple[int, int]:
    """(micro-batch size, micro-batches) of a plan's model block."""
    shapes = block.get("input_shapes") or [[1]]
    size = int(shapes[0][0]) if shapes and shapes[0] else 1
    return size, int(block.get("microbatches") or DEFAULT_MICROBATCHES)


def _deepspeed(planned: PlannedModel, target: Path, where: str, spec: str,
               block: dict[str, Any]) -> dict[str, Any]:
    from dnnpart.export.deepspeed import ds_config, write_deepspeed
    from dnnpart.export.launch import launch_lines, launch_map
    from dnnpart.export.training_run import canonical_names, carries
    from dnnpart.workflow.running import pipeline_program

    run = planned.runnable
    assert run is not None
    if run.module is None:
        raise FormatError(f"{where}: --format deepspeed needs a torch model, not {run.source.spec}")
    gm = run.module
    try:  # which blocks each stage holds, where the plan cuts between whole blocks
        stages: UnitStages | None = plan_unit_stages(planned)
    except FormatError as exc:
        stages, why = None, str(exc)
    # exactly the stages `dnnpart run` runs (one rule for matching the module to the plan)
    program, _ = pipeline_program(planned, where)
    stage_devices = [s.device for s in program.stages]
    launch = launch_map(planned.problem.cluster, stage_devices)
    size, micro = _micro(block)
    config = ds_config(micro_batch_size=size, microbatches=micro, optimizer=block.get("optimizer"),
                       n_stages=len(stage_devices))
    info = write_deepspeed(target, program, carries(program), canonical_names(gm), config=config,
                           launch=launch, model=spec)
    details: dict[str, Any] = {"parts": info["parts"], "launch": launch_lines(launch)}
    if stages is None:
        details["blocks"] = f"not block-aligned ({why})"
    elif list(stages.devices) == stage_devices:
        details["blocks"] = [stages.stage_units(s) for s in range(stages.n_stages)]
    if block.get("schedule") == "gpipe":
        details["schedule"] = "DeepSpeed runs its own 1F1B-style TrainSchedule (the plan assumed gpipe)"
    return details


def _torchtitan(stages: UnitStages, launch: dict[str, Any], target: Path, spec: str, block: dict[str, Any],
                details: dict[str, Any]) -> dict[str, Any]:
    from dnnpart.export.torchtitan import (
        SCHEDULES,
        TORCHTITAN_VERSION,
        family_of,
        module_fqns,
        overrides,
        script_text,
        validate_with_torchtitan,
    )
    from dnnpart.io.dnn_partitioning import write_json_atomic
    from dnnpart.io.output_files import write_output

    family = family_of(spec)
    fqns = module_fqns(stages)
    size, micro = _micro(block)
    schedule = str(block.get("schedule") or "1f1b")
    args = overrides(fqns, schedule=schedule, micro_batch_size=size, microbatches=micro)
    expected = {
        "parallelism.pipeline_parallel_degree": len(fqns),
        "parallelism.module_fqns_per_model_part": fqns,
        "parallelism.pipeline_parallel_schedule": SCHEDULES[schedule],
        "parallelism.pipeline_parallel_microbatch_size": size,
        "training.local_batch_size": size * micro,
    }
    validated = validate_with_torchtitan(args, expected)
    n_layers = stages.units.kinds.count("block")
    target.mkdir(parents=True, exist_ok=True)
    script = target / "run_torchtitan.sh"
    write_output(script_text(model=spec, family=family, args=args, n_layers=n_layers, launch=launch),
                 script)
    if script.is_file():  # not a device or FIFO left at that name
        script.chmod(0o755)
    write_json_atomic({**launch, "model": spec, "torchtitan": TORCHTITAN_VERSION,
                       "module": family[0], "config": family[1], "n_layers": n_layers,
                       "settings": expected, "args": args, "validated_with": validated},
                      target / "launch.json")
    details["module_fqns_per_model_part"] = fqns
    details["validated_with"] = validated
    return details
