"""``dnnpart reproduce PAPER``: regenerate a paper's tables and figures from its workloads.

Wiring (in ``cli/main.py`` and ``cli/commands.py``)::

    reproduce_cmd.add_parser(sub)                       # in build_parser()
    from dnnpart.cli.reproduce_cmd import cmd_reproduce  # in commands.py (dispatch by name)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

PAPERS = ("tarnawski2020", "parmesan")
#: Where the shared workloads lie relative to the checkout (and to the working directory).
DEFAULT_WORKLOADS = Path("..") / "shared" / "workloads" / "dnn-partitioning"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``reproduce`` subcommand to an argparse subparsers object.

    Examples
    --------
    >>> parser = argparse.ArgumentParser()
    >>> p = add_parser(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["reproduce", "tarnawski2020", "--quick"]).quick
    True
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "reproduce", help="regenerate a paper's tables and figures from its workloads")
    p.add_argument("paper", choices=PAPERS, help="which paper (tarnawski2020: paper 1, Tables 1-4, "
                                                 "Fig. 8; parmesan: paper 4, Tables 1-2)")
    p.add_argument("--workloads", metavar="DIR",
                   help="the dnn-partitioning workloads folder (default: ../shared/workloads/"
                        "dnn-partitioning beside the checkout)")
    p.add_argument("--out", metavar="DIR", default="reproduce-out",
                   help="output folder (default reproduce-out)")
    p.add_argument("--time-limit", type=float, metavar="S",
                   help="seconds per method run (default 1200; 60 with --quick); parmesan: per "
                        "mapping search (default 60; 2 with --quick)")
    p.add_argument("--methods", nargs="+", metavar="NAME",
                   help="only these columns or methods (e.g. dp pipedream scotch); parmesan: "
                        "tables (1 2)")
    p.add_argument("--only", nargs="+", metavar="KEY",
                   help="only workloads whose key contains one of these (e.g. layer-bert24 op-bert3)")
    p.add_argument("--quick", action="store_true",
                   help="60 s per method, 2 local-search restarts, no IP runs (minutes, not hours)")
    p.add_argument("--no-figure", action="store_true", help="do not draw Figure 8")
    p.add_argument("--wall-clock", action="store_true",
                   help="time limits in wall seconds, not deterministic time: the portfolio IP "
                        "then also runs HiGHS, but reruns may differ (default: --deterministic)")
    return p


def default_workloads() -> Path:
    """``../shared/workloads/dnn-partitioning`` from the working directory, else beside the checkout."""
    here = Path.cwd() / DEFAULT_WORKLOADS
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[3] / DEFAULT_WORKLOADS


def cmd_reproduce(args: argparse.Namespace, out: Any) -> int:
    """Run ``dnnpart reproduce``; progress lines go to stderr through ``out.note``."""
    from dnnpart.reproduce import reproduce_tarnawski2020
    from dnnpart.reproduce.tarnawski2020 import check_methods
    from dnnpart.reproduce.workloads import find_workloads

    check_methods(args.methods)

    if args.time_limit is not None and not args.time_limit > 0:
        raise ValueError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    if args.paper == "parmesan":
        from dnnpart.reproduce.parmesan import reproduce_parmesan

        tables = tuple(args.methods) if args.methods else ("1", "2")
        unknown = sorted(set(tables) - {"1", "2"})
        if unknown:
            raise ValueError(f"--methods: parmesan has tables 1 and 2, got {unknown[0]!r}")
        rep = reproduce_parmesan(args.out, quick=args.quick, time_limit=args.time_limit,
                                 tables=tables, notify=out.note)
        out.note(f"parmesan: {len(rep.table1)} + {len(rep.table2)} cells in {rep.wall_time_s:.0f} s")
        for path in rep.files:
            out.print(str(path))
        return 0
    folder = Path(args.workloads) if args.workloads else default_workloads()
    if not find_workloads(folder, args.only):
        raise ValueError(f"no paper-1 workloads found under {folder} (expected throughput/"
                         "LayerGraphs/*.json, throughput/OperatorGraphs/*.json); pass --workloads DIR")
    report = reproduce_tarnawski2020(
        folder, args.out, time_limit=args.time_limit, methods=args.methods, quick=args.quick,
        only=args.only, figure=not args.no_figure, notify=out.note,
        deterministic=not args.wall_clock,
    )
    out.note(f"{len(report.workloads)} workloads in {report.wall_time_s:.0f} s")
    for path in report.files:
        out.print(str(path))
    return 0
