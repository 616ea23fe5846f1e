"""``dnnpart plan MODEL``: import a model, solve for a cluster and report, in one step."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dnnpart.cli.args import (
    add_method_args,
    add_model_args,
    add_objective_args,
    input_shapes,
    model_inputs,
    objective_from_args,
    solve_options,
)
from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK, check_outputs, dumps
from dnnpart.cli.parallel_plans import add_parallel_args, check_parallel_args, cmd_parallel
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import (
    Renderer,
    comparison_table,
    print_model_summary,
    print_plan,
    report_stop,
)

if TYPE_CHECKING:
    from dnnpart.workflow import PlannedModel


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``plan``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "plan", help="import a model, solve for a cluster and report (one step)")
    add_model_args(p)
    add_objective_args(p, stored_in_plan=True)
    add_method_args(
        p, default=None,
        method_help="method name (default by objective: throughput dp, or dpl where dp refuses "
        "the graph as too large, or pipeline with --schedule; latency ip; makespan pardnn; "
        "pipeline parmesan; iteration optcnn; see `dnnpart methods`)",
    )
    p.add_argument("--out", "-o", metavar="PLAN.json", help="write the plan (with its model) here")
    p.add_argument("--report", metavar="FILE.html", help="also write `dnnpart report`'s HTML page here")
    p.add_argument("--compare", metavar="M1,M2,...",
                   help="also run these methods on the same problem and print a comparison "
                        "(in --report too); the plan written is --method's")
    add_parallel_args(p)
    p.set_defaults(handler=cmd_plan)
    return p


def cmd_plan(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.evaluate.diagnose import why_infeasible
    from dnnpart.plan import Status
    from dnnpart.solvers import get_method
    from dnnpart.workflow import plan_model, write_report
    from dnnpart.workflow.methods import choose_method

    if args.parallel is not None:
        return cmd_parallel(args, out)
    check_parallel_args(args)
    objective = objective_from_args(args)
    if args.objective is None and objective.kind == "stages" and args.method is None:
        from dnnpart.workflow.methods import stages_note

        out.note(stages_note(objective.schedule, objective.microbatches))
    method = choose_method(objective.kind, method=args.method, schedule=args.schedule,
                           options=args.options).name
    get_method(method)  # fail fast on an unknown method
    options, deterministic = solve_options(args, method)  # typed by its schema, before any work
    compare = [m.strip() for m in (args.compare or "").split(",") if m.strip()]
    check_outputs(out, {"--out": args.out, "--report": args.report})
    with command_progress(out, "plan") as progress:
        planned = plan_model(
            args.model, cluster=args.cluster, objective=objective, training=args.training,
            method=args.method, time_limit=args.time_limit, deterministic=deterministic,
            compare=compare, schedule=args.schedule, microbatches=args.microbatches,
            specs=args.specs, optimizer=args.optimizer, precision=args.precision,
            input_shapes=input_shapes(args), input_dtype=args.input_dtype,
            frontend=args.frontend, config=args.config, granularity=args.granularity,
            profile=args.profile, repeats=args.repeats, notify=out.note, progress=progress,
            inputs=model_inputs(args), **options)
        result = planned.result
        assert result is not None  # a fresh plan has its solver's result
        ev = planned.evaluation
        # a plan that breaks a constraint is not written (see solve): `run` could not use it
        feasible = planned.plan is not None and (ev is None or ev.feasible)
        why = None if feasible else why_infeasible(planned.problem, planned.plan)
        written = planned.plan is not None and bool(args.out) and (
            feasible or result.stats.get("stopped") == "interrupted")
        if written:
            planned.write(args.out)
        if planned.plan is not None and args.report:
            write_report(planned, args.report, progress=progress)
    if planned.plan is not None and args.report:
        out.note(f"report written to {args.report}")
    stopped = report_stop(out, result, args.out)
    if stopped is not None:
        return stopped
    summary = _import_summary(planned, args.model)
    comparison = list(planned.comparison)
    if out.json_mode:
        payload: dict[str, Any] = {"import": summary, **result.to_dict()}
        if comparison:
            payload["comparison"] = comparison
        if planned.evaluation is not None:
            payload["evaluation"] = planned.evaluation.to_dict(planned.problem)
        if why is not None:
            payload["why"] = why
        out.json(dumps(payload))
    else:
        if planned.imported is not None:
            print_model_summary(summary, out)
        out.print(out.result_line(result))
        print_plan(planned.problem, result, out, unit="ms", labels=planned.node_labels())
        if why is not None and planned.plan is not None:  # without a plan print_plan says why
            out.note(f"why: {why}")
        if comparison:
            out.print(comparison_table(comparison))
        if args.out and planned.plan is not None and not written:
            out.note(f"no plan written to {args.out}: the plan found breaks the cluster's constraints")
        elif written:
            nxt = (f"; next: dnnpart run {args.out} / dnnpart export {args.out}"
                   if planned.model_block is not None
                   else f"; score it with dnnpart evaluate {args.model} {args.out} --objective iteration")
            out.note(f"plan written to {args.out}{nxt}")
    ok = planned.plan is not None and result.status is not Status.UNKNOWN
    return EXIT_OK if ok else EXIT_NO_PLAN


def _import_summary(planned: PlannedModel, spec: str) -> dict[str, Any]:
    """What was imported (``{"model": SPEC}`` for a layer graph, which imports nothing)."""
    from dnnpart.workflow.summary import model_summary

    if planned.imported is None:
        return {"model": spec}
    return model_summary(planned.imported, planned.problem.cluster)
