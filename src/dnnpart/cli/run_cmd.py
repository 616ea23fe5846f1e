"""``dnnpart run PLAN``: run a plan across local processes and check it against the model.

Inference plans print the distributed outputs' difference from the unpartitioned model's;
training plans run one pipelined step and print the gradient check (:mod:`dnnpart.workflow.running`).
Both then run ``--steps`` timed steps and print what they measured beside the prediction
(:mod:`dnnpart.workflow.measured`).
"""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import add_trust_args
from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer, safe


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
    p.add_argument(
        "--steps", type=int, default=5,
        help="timed steps after the checked one, measured beside the prediction (default 5, at most 1000)",
    )
    p.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu",
        help="cpu (default): every rank a CPU process; cuda: rank r on GPU r (NCCL between "
             "training ranks), checked against the float32 CPU result",
    )
    add_trust_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_run)
    return p


def cmd_run(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.limits import check_microbatches
    from dnnpart.workflow import RunResult, TrainingRunResult, run_plan

    if args.microbatches is not None:  # at the edge, before the plan is read
        check_microbatches(args.microbatches)
    with command_progress(out, "run") as progress:
        ran = run_plan(args.plan, model=args.model, trust=args.trust_plan, nproc=args.nproc,
                       microbatches=args.microbatches, schedule=args.schedule, steps=args.steps,
                       device=args.device, progress=progress)
    if out.json_mode:
        out.json(dumps(ran.to_dict()))
        return EXIT_NO_PLAN if isinstance(ran, TrainingRunResult) and not ran.passed else EXIT_OK
    info = ran.to_dict()
    if isinstance(ran, RunResult):
        out.print(
            f"ran {ran.stages} stages on devices {', '.join(ran.devices_used)} as planned, in "
            f"{ran.processes} gloo processes, {ran.microbatches} micro-batches; "
            f"max |distributed - unpartitioned| = "
            f"{ran.max_abs_diff:.3g} ({ran.relative_diff:.3g} x max |unpartitioned|)"
        )
    else:
        _print_training(info, out)
    if "measurement" in info:
        print_measurement(info["measurement"], out)
    failed = isinstance(ran, TrainingRunResult) and not ran.passed
    return EXIT_NO_PLAN if failed else EXIT_OK


def _print_training(info: dict[str, Any], out: Renderer) -> None:
    verdict = "passed" if info["passed"] else "FAILED"
    out.print(f"ran {info['stages']} stages on devices {', '.join(info['devices'])} as planned")
    out.print(
        f"trained in one process per stage, schedule {info['schedule']}, {info['microbatches']} micro-batches"
    )
    out.print(
        f"gradient check {verdict} (first step): {info['parameters_checked']} parameters, max |pipelined - "
        f"unpartitioned| = {info['grad_max_abs_diff']:.3g} ({info['grad_relative_diff']:.3g} x max "
        f"|grad|, tolerance {info['tolerance']:g}); losses differ by at most "
        f"{info['loss_max_abs_diff']:.3g}"
    )
    if info["operators_moved"]:
        out.note(f"{info['operators_moved']} operator(s) named differently by the two captures "
                 "moved to their producers' stage")


def print_measurement(m: dict[str, Any], out: Renderer) -> None:
    """The predicted-against-measured table of a run (:mod:`dnnpart.workflow.measured`)."""
    from rich.table import Table

    from dnnpart.workflow.measured import comparison_rows

    what = "steps" if m["training"] else "passes"
    table = Table(title=f"predicted against measured, {m['steps']} timed {what} after the checked "
                        "one (per step, over all micro-batches)", title_justify="left")
    for col in ("", "predicted", "measured (median)", "min-max", "error"):
        table.add_column(col, justify="left" if not col else "right")
    for row in comparison_rows(m):
        table.add_row(*(safe(c) for c in row))
    out.print(table)
    out.print(m["note"])
    out.print(f"memory measured: {m['memory_measured']}, over the checked step; predicted: "
              f"{m['memory_predicted']}")
