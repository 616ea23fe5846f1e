"""``dnnpart simulate [GRAPH] PLAN``: a plan through the simulators (pipeline step, op-level
schedule or layer-wise replay), with memory; ``--trace`` writes a Chrome trace.

A plan file alone (``dnnpart plan -o``, or ``solve -o`` naming its graph) is simulated on the
problem it names, as ``run`` and ``report`` take it: its schedule and micro-batches unless
``--schedule``/``--microbatches``/``--recompute`` say otherwise; options that would define
another problem (``--cluster``, ``--objective``, model options) need ``GRAPH PLAN``."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import add_problem_args, add_trust_args, model_options, objective_from_args
from dnnpart.cli.output import EXIT_OK, check_outputs, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer, fmt, fmt_bytes


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``simulate``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "simulate", help="simulate a plan: pipeline step (GPipe/1F1B) or op-level "
                         "schedule, with memory; --trace writes a Chrome trace")
    add_problem_args(p)
    p.add_argument("plan", nargs="?",
                   help="plan file; a plan file alone (GRAPH left out) is simulated on the "
                        "problem it names, with its schedule and micro-batches")
    add_trust_args(p)
    # unset, so that a plan file alone keeps its own (GRAPH PLAN: gpipe and 4, as before)
    p.set_defaults(schedule=None, microbatches=None)
    p.set_defaults(problem_defaults={d: p.get_default(d) for d in _PROBLEM_FLAGS})
    p.add_argument("--level", choices=("auto", "pipeline", "ops", "layerwise"), default="auto",
                   help="pipeline: stages (contiguous plans); ops: op-level emulation (paper 2); "
                        "layerwise: replay of a layer-wise strategy beside Eq. 1 (paper 3, "
                        "--objective iteration); auto: layerwise for plans with layer "
                        "configurations, pipeline when the plan is contiguous, else ops")
    p.add_argument("--contention", action="store_true",
                   help="ops: every physical link of a transfer's routed path carries one "
                        "transfer at a time (a device pair, where the matrices are given)")
    p.add_argument("--sync", choices=("after-backward", "eager"), default="after-backward",
                   help="layerwise: parameter sync leaves after the whole backward pass (Eq. 1's "
                        "step, default) or as soon as each layer's backward ends")
    p.add_argument("--trace", metavar="OUT.json",
                   help="write a Chrome trace (open in ui.perfetto.dev or chrome://tracing)")
    p.set_defaults(handler=cmd_simulate)
    return p


#: Options that define the problem (refused beside a plan file alone), by dest.
_PROBLEM_FLAGS = {
    "cluster": "--cluster", "objective": "--objective", "batch": "--batch",
    "training_form": "--training-form", "overlap": "--overlap", "input_shape": "--input-shape",
    "input_dtype": "--input-dtype", "training": "--training", "optimizer": "--optimizer",
    "precision": "--precision", "frontend": "--frontend", "config": "--config",
    "granularity": "--granularity",
}


def cmd_simulate(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.errors import UsageError
    from dnnpart.io import read_plan
    from dnnpart.limits import check_microbatches
    from dnnpart.workflow import load_problem, simulate_plan
    from dnnpart.workflow.phases import phase

    if args.microbatches is not None:
        check_microbatches(args.microbatches)
    check_outputs(out, {"--trace": args.trace})
    settings: dict[str, Any] = {
        "level": args.level, "schedule": args.schedule, "microbatches": args.microbatches,
        "contention": args.contention, "sync": args.sync, "trace": args.trace}
    with command_progress(out, "simulate") as progress:
        if args.plan is None:  # a plan file alone: the problem it names
            given = [flag for dest, flag in _PROBLEM_FLAGS.items()
                     if getattr(args, dest) != args.problem_defaults[dest]]
            if given:
                raise UsageError(f"{given[0]}: a plan file alone is simulated on the problem it "
                                 "names; give GRAPH PLAN to simulate it on another")
            with phase(progress, f"loading {args.graph} and simulating"):
                sim = simulate_plan(args.graph, model=args.model, trust=args.trust_plan,
                                    recompute=args.recompute or None, **settings)
            assert sim.problem is not None
            problem = sim.problem
        else:
            if args.model is not None or args.trust_plan:
                raise UsageError("--model/--trust-plan: for a plan file alone (dnnpart simulate PLAN)")
            with phase(progress, f"loading {args.graph}"):
                problem = load_problem(args.graph, cluster=args.cluster or None,
                                       objective=objective_from_args(args),
                                       model=model_options(args), plan=args.plan)
                plan = read_plan(args.plan, problem)
            with phase(progress, "simulating"):
                sim = simulate_plan(problem, plan, recompute=args.recompute, **settings)
    if out.json_mode:
        out.json(dumps(sim.to_dict()))
        return EXIT_OK
    names = [d.name for d in problem.cluster.devices]
    r = sim.result
    if sim.level == "layerwise":
        lines = [f"layer-wise replay: step [bold]{1e3 * r.makespan:.3f} ms[/] beside t_O (Eq. 1) "
                 f"{1e3 * r.additive:.3f} ms (ratio {r.ratio:.3f}), {len(r.timeline)} tasks, "
                 f"sync {sim.sync}"]
    elif sim.level == "pipeline":
        lines = [
            f"pipeline {sim.schedule}, {sim.microbatches} micro-batches: step time "
            f"[bold]{fmt(r.step_time)}[/], time per sample {fmt(r.time_per_sample)}, "
            f"bubble {r.bubble_fraction:.1%}, max stage time (paper 4 Eq. 5) {fmt(r.max_stage_time)}",
        ]
        lines += [f"  {names[d]}: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in parts.items())
                  + f" ({r.peak_inflight[d]} micro-batches in flight at peak)"
                  for d, parts in sorted(r.memory.items())]
    else:
        lines = [f"op-level emulation: makespan [bold]{fmt(r.makespan)}[/], "
                 f"{sim.summary['transfers']} transfers"]
        lines += [f"  {n}: peak memory {fmt_bytes(p)}" for n, p in zip(names, r.peak_memory, strict=True)]
    for line in lines:
        out.print(line)
    if args.trace:
        out.note(f"trace written to {args.trace} (open it in ui.perfetto.dev)")
    return EXIT_OK
