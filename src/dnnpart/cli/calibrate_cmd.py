"""``dnnpart calibrate -o machine.yaml``: measure this machine into a machine file.

The file is a device catalog and a cluster at once (:mod:`dnnpart.workflow.calibrating`):
``--cluster machine.yaml`` plans on two calibrated ranks joined by the measured gloo link.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from dnnpart.cli.output import EXIT_OK, check_outputs, dumps
from dnnpart.cli.progress import command_progress
from dnnpart.cli.render import Renderer


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``calibrate``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "calibrate", help="measure this machine's operator times and process link into a machine "
                          "file for --cluster / --specs (torch)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="what runs the operators (default: cpu)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads per rank (default: 1, one thread per rank)")
    p.add_argument("--quick", action="store_true",
                   help="two sizes per case and few repeats: seconds, for tests and a first look")
    p.add_argument("--out", "-o", metavar="MACHINE.yaml", required=True,
                   help="machine file to write; its stem names the device (box.yaml: `box`)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_calibrate)
    return p


def cmd_calibrate(args: argparse.Namespace, out: Renderer) -> int:
    from pathlib import Path

    from dnnpart.workflow.calibrating import (
        calibrate,
        check_options,
        machine_name,
        write_machine_file,
    )
    from dnnpart.workflow.phases import phase

    check_outputs(out, {"--out": args.out})
    target = Path(args.out)
    check_options(args.device, args.threads)
    with command_progress(out, "calibrate") as progress:
        cal = calibrate(name=machine_name(target), device=args.device, threads=args.threads,
                        quick=args.quick, progress=progress)
        with phase(progress, f"writing {target}"):
            write_machine_file(cal, target)
    data = cal.machine_file()
    if out.json_mode:
        out.json(dumps(data | {"out": str(target)}))
        return EXIT_OK
    _print(data, out)
    out.note(f"machine file written to {target}: plan with --cluster {target} "
             f"({data['cluster']}), or --specs {target} --cluster Nx{cal.name}")
    return EXIT_OK


def _rate(x: float | None, unit: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x / unit:.4g}"


def _print(data: dict[str, Any], out: Renderer) -> None:
    from rich.table import Table

    info = data["calibration"]
    machine = info["machine"]
    name, device = next(iter(data["devices"].items()))
    out.print(f"[bold]{name}[/]: {machine['cpu']}, torch {machine['torch']}, {info['threads']} "
              f"thread(s), {info['device']}; {info['seconds']:.0f} s")
    t = Table(title="operator classes: time = overhead + FLOPs / rate + bytes / rate",
              title_justify="left")
    for col in ("class", "samples", "overhead us", "GFLOP/s", "GB/s", "fit rms err", "max err"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for cls, params in device["op_classes"].items():
        fit = info["fits"][cls]
        t.add_row(cls, str(fit["samples"]), f"{params.get('overhead_s', 0.0) * 1e6:.3g}",
                  _rate(params.get("flops"), 1e9), _rate(params.get("bytes"), 1e9),
                  f"{fit['rms_rel_error']:.1%}", f"{fit['max_rel_error']:.1%}")
    out.print(t)
    out.print(f"per-operator overhead (a one-element add): {info['overhead_s'] * 1e6:.3g} us")
    for kind, label in (("p2p", "point-to-point"), ("allreduce", "all-reduce")):
        link = info["link"][kind]
        out.print(f"gloo {label}: {_rate(link['bandwidth'], 1e9)} GB/s, latency "
                  f"{link['latency'] * 1e6:.3g} us (fit rms err {link['rms_rel_error']:.1%})")
    if info["skipped"]:
        out.note(f"operators without a cost formula, not fitted: {', '.join(info['skipped'])}")
