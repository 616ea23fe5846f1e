"""Apply a plan in your own training loop: this rank's ``torch.distributed.pipelining`` stage
and the plan's schedule.

For a :class:`~dnnpart.workflow.PlannedModel` (from :func:`~dnnpart.workflow.plan_model`, a
live module included, or a loaded plan file), :func:`pipeline_stage` builds the
``PipelineStage`` of one rank from dnnpart's own stage modules (what ``dnnpart run`` and the
``pipelining`` export run: exactly the plan's stages, each carrying the values later stages
need), and :func:`pipeline_schedule` the plan's ``Schedule1F1B`` or ``ScheduleGPipe`` over its
micro-batches. Rank ``r`` runs stage ``r``; the process group is the caller's
(``torch.distributed.init_process_group``), with one rank per stage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dnnpart.errors import UsageError
from dnnpart.workflow.loading import with_runnable
from dnnpart.workflow.planned import PlannedModel


def pipeline_stage(planned: PlannedModel, rank: int, *, device: Any = "cpu",
                   example_inputs: Sequence[Any] | None = None) -> Any:
    """The ``PipelineStage`` of ``rank`` (stage ``rank`` of the plan) on ``device``.

    Parameters
    ----------
    planned : a plan of a torch model (:func:`~dnnpart.workflow.plan_model`).
    rank : the stage this process runs, ``0 .. stages - 1``.
    device : where the stage runs (``"cpu"``, ``"cuda:0"``).
    example_inputs : one micro-batch of the model's inputs (default: the model's own example).

    Examples
    --------
    In each of ``S`` processes of an initialised process group (``tests/workflow/
    test_applying.py`` runs this over gloo)::

        planned = plan_model(net, example_inputs=[x], training=True, schedule="1f1b")
        stage = pipeline_stage(planned, dist.get_rank())
        schedule = pipeline_schedule(planned, stage, loss_fn)
        schedule.step(batch) if rank == 0 else schedule.step(target=y, losses=losses)
    """
    from dnnpart.workflow.running import pipeline_program

    ready = with_runnable(planned)
    program, _ = pipeline_program(ready, ready.spec or ready.problem.name)
    n = len(program.stages)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < n:
        raise UsageError(f"rank {rank!r}: the plan has {n} stages (ranks 0..{n - 1})")
    run = ready.runnable
    assert run is not None  # with_runnable
    example = tuple(example_inputs) if example_inputs is not None else tuple(run.source.example_inputs)
    return program_stage(program, rank, device, example)


def program_stage(program: Any, rank: int, device: Any, example: Sequence[Any]) -> Any:
    """The ``PipelineStage`` of stage ``rank`` of a staged program (dnnpart's stage modules,
    each carrying what later stages need) on ``device``, its shapes from ``example``."""
    import torch
    from torch.distributed.pipelining import PipelineStage

    from dnnpart.export.on_device import move_module
    from dnnpart.export.training_run import carries, carry_module, stage_examples

    carry = carries(program)
    ins, outs = stage_examples(program, carry, tuple(example), stages=rank + 1)[rank]
    dev = torch.device(device)
    module = move_module(carry_module(program, rank, carry), dev)

    def move(x: Any) -> Any:
        if isinstance(x, tuple):
            return tuple(move(v) for v in x)
        return x.to(dev) if hasattr(x, "to") else x

    return PipelineStage(module, rank, len(program.stages), dev, input_args=move(ins),
                         output_args=move(outs))


def pipeline_schedule(planned: PlannedModel, stage: Any, loss_fn: Callable[..., Any] | None = None,
                      *, microbatches: int | None = None) -> Any:
    """The plan's schedule (``Schedule1F1B`` or ``ScheduleGPipe``) over ``stage`` with the
    plan's micro-batches (or ``microbatches``); ``loss_fn(output, target)`` for training.

    See :func:`pipeline_stage` for a loop that uses it.
    """
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

    from dnnpart.workflow.running import planned_microbatches, planned_schedule

    chosen = planned_schedule(planned, None)
    n_micro = planned_microbatches(planned, microbatches)
    cls = Schedule1F1B if chosen == "1f1b" else ScheduleGPipe
    return cls(stage, n_microbatches=n_micro, loss_fn=loss_fn)
