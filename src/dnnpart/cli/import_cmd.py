"""``dnnpart import MODEL -o GRAPH``: capture and price a model into a graph file."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import add_model_args, input_shapes, model_inputs
from dnnpart.cli.output import EXIT_OK, check_outputs, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer, print_model_summary


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``import``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "import", help="import an ONNX file or torch model into a priced graph")
    add_model_args(p)
    p.add_argument(
        "--out",
        "-o",
        metavar="GRAPH",
        required=True,
        help="graph file: .json (dnn-partitioning format + op types, bytes) or .npz (native)",
    )
    p.set_defaults(handler=cmd_import)
    return p


def cmd_import(args: argparse.Namespace, out: Renderer) -> int:
    from pathlib import Path

    from dnnpart.workflow import import_model
    from dnnpart.workflow.phases import phase

    check_outputs(out, {"--out": args.out})
    target = Path(args.out)
    with command_progress(out, "import") as progress:
        model = import_model(
            args.model, cluster=args.cluster, specs=args.specs, training=args.training,
            optimizer=args.optimizer, precision=args.precision, input_shapes=input_shapes(args),
            input_dtype=args.input_dtype, frontend=args.frontend, config=args.config,
            granularity=args.granularity or "op", profile=args.profile, repeats=args.repeats,
            notify=out.note, progress=progress,
            inputs=model_inputs(args))
        with phase(progress, f"writing {target}"):
            model.write_graph(target)
    summary = model.summary() | {"out": str(target)}
    if out.json_mode:
        out.json(dumps(summary))
    else:
        print_model_summary(summary, out)
        out.note(f"graph written to {target}")
    return EXIT_OK
