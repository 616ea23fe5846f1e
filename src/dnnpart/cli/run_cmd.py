"""``dnnpart run PLAN``: run a plan across local processes and check it against the model.

Inference plans print the distributed outputs' difference from the unpartitioned model's;
training plans run one pipelined step and print the gradient check and per-stage times
(:mod:`dnnpart.workflow.running`).
"""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import add_trust_args
from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``run``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "run", help="run a plan across local processes (torch.distributed, gloo)")
    p.add_argument("plan", help="plan file written by `dnnpart plan -o` for a torch model")
    p.add_argument("--nproc", type=int, help="processes (default: one per device the plan uses)")
    p.add_argument(
        "--microbatches", type=int, help="micro-batches (default: the plan's, else 4)"
    )
    p.add_argument(
        "--schedule", choices=("gpipe", "1f1b"),
        help="training plans: torch.distributed.pipelining schedule (default: the plan's, else 1f1b)",
    )
    add_trust_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_run)
    return p


def cmd_run(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.workflow import RunResult, TrainingRunResult, run_plan

    with command_progress(out, "run") as progress:
        ran = run_plan(args.plan, model=args.model, trust=args.trust_plan, nproc=args.nproc,
                       microbatches=args.microbatches, schedule=args.schedule, progress=progress)
    if out.json_mode:
        out.json(dumps(ran.to_dict()))
    elif isinstance(ran, RunResult):
        out.print(
            f"ran {ran.stages} stages on devices {', '.join(ran.devices_used)} as planned, in "
            f"{ran.processes} gloo processes, {ran.microbatches} micro-batches; "
            f"max |distributed - unpartitioned| = "
            f"{ran.max_abs_diff:.3g} ({ran.relative_diff:.3g} x max |unpartitioned|)"
        )
    else:
        _print_training(ran.to_dict(), out)
    failed = isinstance(ran, TrainingRunResult) and not ran.passed
    return EXIT_NO_PLAN if failed else EXIT_OK


def _print_training(info: dict[str, Any], out: Renderer) -> None:
    verdict = "passed" if info["passed"] else "FAILED"
    out.print(f"ran {info['stages']} stages on devices {', '.join(info['devices'])} as planned")
    out.print(
        f"trained 1 step in gloo processes, schedule {info['schedule']}, "
        f"{info['microbatches']} micro-batches, step {info['step_ms']:.1f} ms"
    )
    out.print(
        f"gradient check {verdict}: {info['parameters_checked']} parameters, max |pipelined - "
        f"unpartitioned| = {info['grad_max_abs_diff']:.3g} ({info['grad_relative_diff']:.3g} x max "
        f"|grad|, tolerance {info['tolerance']:g}); losses differ by at most "
        f"{info['loss_max_abs_diff']:.3g}"
    )
    if info["operators_moved"]:
        out.note(f"{info['operators_moved']} operator(s) named differently by the two captures "
                 "moved to their producers' stage")
    out.print("per stage, ms (predicted: the plan's device loads; measured: this CPU, "
              "first micro-batch):")
    for r in info["per_stage"]:
        out.print(
            f"  stage {r['stage']} {r['device']:>6} {r['operators']:5d} ops  predicted fw "
            f"{r['predicted_forward_ms']:.4g} bw {r['predicted_backward_ms']:.4g}  measured fw "
            f"{r['measured_forward_ms']:.4g} bw {r['measured_backward_ms']:.4g}"
        )
