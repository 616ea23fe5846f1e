"""``dnnpart run`` for training plans: one pipelined step (forward and backward), checked.

See :mod:`dnnpart.export.training_run` for the schedule, the loss and the tolerance.
"""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.render import Renderer
from dnnpart.errors import FormatError

EXIT_OK, EXIT_NO_PLAN = 0, 1


def run_training(args: argparse.Namespace, out: Renderer, block: dict[str, Any]) -> int:
    """Run one training step of the plan in ``args.plan`` under a pipelining schedule."""
    from dnnpart.cli.main import dumps
    from dnnpart.cli.model_cmds import load_planned_model
    from dnnpart.evaluate import evaluate
    from dnnpart.export.stages import split_module
    from dnnpart.export.training_run import (
        RTOL,
        check_linear,
        device_order,
        linearize,
        run_training_step,
    )
    from dnnpart.frontends.sources import example_inputs

    source, _, problem, plan, gm, device_of = load_planned_model(
        args.plan, model=args.model, trust=args.trust_plan)
    if gm is None:
        raise FormatError(f"{args.plan}: `dnnpart run` needs a torch model, not {source.spec}")
    if plan.replica_of is not None and len(set(plan.replica_of.tolist())) < len(plan.replica_of):
        check_linear(split_module(gm, device_of), replicated=True)
    schedule = args.schedule or str(block.get("schedule") or "1f1b")
    n_micro = args.microbatches or int(block.get("microbatches") or 4)
    if n_micro < 1:
        raise FormatError(f"--microbatches {n_micro}: expected >= 1")
    order = device_order(problem.graph, plan.assignment)
    device_of, moved = linearize(gm, device_of, order)
    program = split_module(gm, device_of)
    batches = [
        example_inputs(source.input_shapes, source.input_dtype, seed=i + 1, module=source.module)
        for i in range(n_micro)
    ]
    result = run_training_step(program, gm, batches, schedule=schedule)
    ev = evaluate(problem, plan)
    names = [problem.cluster.devices[s.device].name for s in program.stages]
    rows = []
    for s, m in zip(program.stages, result.measured_ms, strict=True):
        rows.append(
            {
                "stage": s.index,
                "device": problem.cluster.devices[s.device].name,
                "operators": len(s.nodes),
                "predicted_forward_ms": float(ev.forward_load[s.device]),
                "predicted_backward_ms": float(ev.backward_load[s.device]),
                "measured_forward_ms": m["forward"],
                "measured_backward_ms": m["backward"],
            }
        )
    info = {
        "model": source.spec,
        "schedule": schedule,
        "microbatches": n_micro,
        "stages": len(program.stages),
        "devices": names,
        "operators_moved": moved,
        "losses": result.losses,
        "loss_max_abs_diff": result.loss_max_abs_diff,
        "parameters_checked": result.n_parameters_checked,
        "grad_max_abs_diff": result.grad_max_abs_diff,
        "grad_relative_diff": result.grad_relative_diff,
        "tolerance": RTOL,
        "passed": result.passed,
        "step_ms": result.step_ms,
        "per_stage": rows,
    }
    if out.json_mode:
        out.json(dumps(info))
    else:
        verdict = "passed" if result.passed else "FAILED"
        out.print(
            f"trained 1 step: {len(program.stages)} stages ({', '.join(names)}) in gloo processes, "
            f"schedule {schedule}, {n_micro} micro-batches, step {result.step_ms:.1f} ms"
        )
        out.print(
            f"gradient check {verdict}: {result.n_parameters_checked} parameters, max |pipelined - "
            f"unpartitioned| = {result.grad_max_abs_diff:.3g} ({result.grad_relative_diff:.3g} x max |grad|, "
            f"tolerance {RTOL:g}); losses differ by at most {result.loss_max_abs_diff:.3g}"
        )
        if moved:
            out.note(f"{moved} operator(s) named differently by the two captures moved to their "
                     "producers' stage")
        out.print("per stage, ms (predicted: the plan's device loads; measured: this CPU, "
                  "first micro-batch):")
        for r in rows:
            out.print(
                f"  stage {r['stage']} {r['device']:>6} {r['operators']:5d} ops  predicted fw "
                f"{r['predicted_forward_ms']:.4g} bw {r['predicted_backward_ms']:.4g}  measured fw "
                f"{r['measured_forward_ms']:.4g} bw {r['measured_backward_ms']:.4g}"
            )
    return EXIT_OK if result.passed else EXIT_NO_PLAN
