"""``dnnpart export PLAN --format F -o OUT``: a plan as files other tools run or read."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import add_trust_args
from dnnpart.cli.output import EXIT_OK, check_outputs, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``export``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "export", help="turn a plan (from `dnnpart plan`) into runnable artifacts")
    p.add_argument("plan", help="plan file written by `dnnpart plan -o` (any plan file with --graph)")
    p.add_argument(
        "--format",
        choices=("torch", "placement", "pipelining", "deepspeed", "megatron", "torchtitan",
                 "placement-text"),
        default="placement",
        help="torch: per-device stage modules; placement: operator -> device; "
        "pipelining: a folder with run_pipeline.py for torchrun (torch.distributed.pipelining); "
        "deepspeed: a folder with a PipelineModule (one LayerSpec per stage) and ds_config.json; "
        "megatron: --pipeline-model-parallel-layout; torchtitan: a folder with its pipeline "
        "settings (block-aligned plans); placement-text: "
        "`name device` lines for every node (PARDNN's output)",
    )
    p.add_argument("--graph", metavar="GRAPH",
                   help="placement-text: the plan's graph (file or zoo:NAME), for plans not "
                        "written by `dnnpart plan`")
    p.add_argument("--cluster", metavar="SPEC",
                   help="placement-text with --graph: cluster (default: the plan file's)")
    p.add_argument(
        "--out",
        "-o",
        metavar="PATH",
        required=True,
        help="output file (placement, megatron) or directory (torch, pipelining, deepspeed, torchtitan)",
    )
    add_trust_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_export)
    return p


def cmd_export(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.workflow import export_plan
    from dnnpart.workflow.exporting import FOLDER_FORMATS

    given = {"--out": args.out}
    if args.format in FOLDER_FORMATS:
        check_outputs(out, folders=given)
    else:
        check_outputs(out, given)
    with command_progress(out, "export") as progress:
        written = export_plan(args.plan, args.format, args.out, model=args.model,
                              trust=args.trust_plan, graph=args.graph, cluster=args.cluster,
                              progress=progress)
    if out.json_mode:
        out.json(dumps(written.to_dict()))
    elif written.format == "placement-text":
        out.print(f"exported placement-text to {written.out} ({written.details['nodes']} nodes)")
    else:
        stages = written.details.get("stages")
        out.print(f"exported {written.format} to {written.out}"
                  + (f" ({stages} stages)" if stages is not None else ""))
        for line in written.details.get("launch", ()):
            out.print(f"  {line}")
        if "command" in written.details:
            out.print(f"launch: cd {written.out} && {written.details['command']} [--steps N] [--check]")
    return EXIT_OK
