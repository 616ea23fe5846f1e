"""``dnnpart report PLAN [-o report.html]``: one self-contained HTML page about a plan
(see :mod:`dnnpart.viz.report`)."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.output import EXIT_OK, check_outputs, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``report``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "report", help="one self-contained HTML page about a plan (tables and figures)")
    p.add_argument("plan", help="plan file written by `dnnpart plan -o`")
    p.add_argument("-o", "--out", default="report.html", metavar="FILE", help="default report.html")
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), help="default: the plan's, else 1f1b")
    p.add_argument("--microbatches", type=int, help="default: the plan's, else 4")
    p.add_argument("--model", help="the model, when the plan names a module: spec (see `run`)")
    p.add_argument("--trust-plan", action="store_true", help="follow the plan's module: spec")
    p.add_argument("--run", metavar="RUN.json",
                   help="a `dnnpart run PLAN --json` output: show its measurements beside the prediction")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_report)
    return p


def cmd_report(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.limits import check_microbatches
    from dnnpart.workflow import write_report

    if args.microbatches is not None:  # 0 is refused, not read as "the plan's"
        check_microbatches(args.microbatches)
    check_outputs(out, {"--out": args.out})
    with command_progress(out, "report") as progress:
        written = write_report(args.plan, args.out, schedule=args.schedule,
                               microbatches=args.microbatches, model=args.model,
                               trust=args.trust_plan, run=args.run, progress=progress)
    if out.json_mode:
        out.json(dumps(written.to_dict()))
    else:
        out.print(f"report written to {written.path} ({written.chars / 1e3:.0f} KB, self-contained)")
    return EXIT_OK
