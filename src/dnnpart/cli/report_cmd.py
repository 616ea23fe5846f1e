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
    if not block and "graph" in data:  # a plan of `dnnpart solve GRAPH -o`
        from dnnpart.cli.commands import solved_problem

        problem, plan = solved_problem(str(args.plan), data)
        imported = None
    else:
        _, imported, problem, plan, _, _ = load_planned_model(args.plan, model=args.model,
                                                              trust=args.trust_plan)
    meta = {k: data.get(k) for k in ("method", "status", "bound", "objective", "search_space")}
    meta["model"] = block.get("spec")
    text = build_report(ReportInput(problem=problem, plan=plan, imported=imported, meta=meta,
                                    schedule=args.schedule or str(block.get("schedule") or "1f1b"),
                                    microbatches=micro, comparison=comparison_from_file(data)))
    Path(args.out).write_text(text, encoding="utf-8")
    if out.json_mode:
        out.json(dumps({"report": str(args.out), "bytes": len(text)}))
    else:
        out.print(f"report written to {args.out} ({len(text) / 1e3:.0f} KB, self-contained)")
    return EXIT_OK


def comparison_from_file(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``comparison`` rows a plan file keeps (``plan --compare``), typed; bad rows dropped.

    A plan file is data: numbers that are not numbers become ``None`` and text stays text.

    Examples
    --------
    >>> comparison_from_file({"comparison": [{"method": "dp", "objective": 2.0, "gap": "x"}, 3]})
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'method': 'dp', 'status': '', 'objective': 2.0, 'bound': None, 'gap': None, 'vs_best': '',
      'seconds': None, 'note': ''}]
    """
    raw = data.get("comparison")
    rows: list[dict[str, Any]] = []
    for row in raw if isinstance(raw, list) else []:
        if not isinstance(row, dict):
            continue
        typed: dict[str, Any] = {}
        for key in ("method", "status", "objective", "bound", "gap", "vs_best", "seconds", "note"):
            value = row.get(key)
            if key in ("objective", "bound", "gap", "seconds"):
                number = isinstance(value, (int, float)) and not isinstance(value, bool)
                typed[key] = float(value) if number and value is not None else None
            else:
                typed[key] = str(value) if value is not None else ""
        rows.append(typed)
    return rows
