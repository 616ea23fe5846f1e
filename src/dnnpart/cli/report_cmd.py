"""``dnnpart report PLAN [-o report.html]`` and ``--version``: see :mod:`dnnpart.viz.report`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dnnpart.cli.render import Renderer

EXIT_OK = 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="one self-contained HTML page about a plan (tables and figures)")
    p.add_argument("plan", help="plan file written by `dnnpart plan -o`")
    p.add_argument("-o", "--out", default="report.html", metavar="FILE", help="default report.html")
    p.add_argument("--schedule", choices=("gpipe", "1f1b"), help="default: the plan's, else 1f1b")
    p.add_argument("--microbatches", type=int, help="default: the plan's, else 4")
    p.add_argument("--model", help="the model, when the plan names a module: spec (see `run`)")
    p.add_argument("--trust-plan", action="store_true", help="follow the plan's module: spec")
    p.add_argument("--json", action="store_true")


def cmd_report(args: argparse.Namespace, out: Renderer) -> int:
    from dnnpart.cli.main import dumps
    from dnnpart.cli.model_cmds import load_planned_model
    from dnnpart.errors import FormatError
    from dnnpart.io import fields as f
    from dnnpart.viz.report import ReportInput, build_report

    data = f.require_mapping(f.read_json(args.plan), str(args.plan))
    raw = data.get("model")
    block: dict[str, Any] = raw if isinstance(raw, dict) else {}
    micro = args.microbatches or int(block.get("microbatches") or 4)
    if micro < 1:
        raise FormatError(f"--microbatches {micro}: expected >= 1")
    _, imported, problem, plan, _, _ = load_planned_model(args.plan, model=args.model, trust=args.trust_plan)
    meta = {k: data.get(k) for k in ("method", "status", "bound", "objective", "search_space")}
    meta["model"] = block.get("spec")
    text = build_report(ReportInput(problem=problem, plan=plan, imported=imported, meta=meta,
                                    schedule=args.schedule or str(block.get("schedule") or "1f1b"),
                                    microbatches=micro))
    Path(args.out).write_text(text, encoding="utf-8")
    if out.json_mode:
        out.json(dumps({"report": str(args.out), "bytes": len(text)}))
    else:
        out.print(f"report written to {args.out} ({len(text) / 1e3:.0f} KB, self-contained)")
    return EXIT_OK
