"""``dnnpart evaluate GRAPH PLAN``: score a plan file on a graph."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import add_problem_args, model_options, objective_from_args
from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK, dumps
from dnnpart.cli.render import Renderer, fmt, fmt_bytes, layer_config_table, safe


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``evaluate``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "evaluate", help="score a plan file (dnnpart plan or expert split)")
    add_problem_args(p)
    p.add_argument("plan", help="plan file")
    p.add_argument("--fill-by-colocation", action="store_true",
                   help="place nodes the plan leaves out with their colocation class "
                        "(e.g. an inference split on a training graph)")
    p.set_defaults(handler=cmd_evaluate)
    return p


def cmd_evaluate(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.evaluate import evaluate
    from dnnpart.io import read_plan
    from dnnpart.workflow import load_problem
    from dnnpart.workflow.solved import graph_mismatch

    problem = load_problem(args.graph, cluster=args.cluster or None, objective=objective_from_args(args),
                           model=model_options(args), plan=args.plan)
    plan = read_plan(args.plan, problem, fill_by_colocation=args.fill_by_colocation)
    mismatch = graph_mismatch(args.plan, args.graph)  # a warning: inference split on training graph...
    if mismatch:
        out.note(mismatch)
    ev = evaluate(problem, plan)
    if out.json_mode:
        out.json(dumps(ev.to_dict(problem)))
    else:
        out.print(f"{problem.objective.describe()}: [bold]{fmt(ev.objective)}[/]"
                  + ("" if ev.feasible else "  [red](plan violates constraints)[/]"))
        if plan.layer_configs is not None:
            out.print(layer_config_table(problem, plan, title="Layer configurations"))
        else:
            out.print(out.device_table(problem, plan, ev))
        if ev.simulation is not None and "bytes_per_step" in ev.simulation:
            sim = ev.simulation
            out.print(f"{fmt_bytes(sim['bytes_per_step'])} moved per step, "
                      f"{sim['throughput_samples_per_s']:.1f} samples/s at global batch "
                      f"{sim['global_batch']}")
        if ev.simulation is not None and "max_stage_time_eq5" in ev.simulation:
            sim = ev.simulation
            out.print(f"step time {fmt(sim['step_time'])}, bubble {sim['bubble_fraction']:.1%}, "
                      f"max stage time (paper 4 Eq. 5) {fmt(sim['max_stage_time_eq5'])}")
        for v in ev.violations:
            out.print(f"[red]violation:[/] {safe(v)}")
    return EXIT_OK if ev.feasible else EXIT_NO_PLAN
