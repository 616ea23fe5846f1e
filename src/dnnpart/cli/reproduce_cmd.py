"""``dnnpart reproduce PAPER``: regenerate a paper's tables and figures from its own inputs.

Each paper brings its inputs and runner (:data:`PAPERS`): ``tarnawski2020`` (paper 1) reads
the dnn-partitioning workloads folder (``--workloads``); ``pardnn2021`` (paper 2) loads zoo
captures and generated graphs (``--time-limit`` is linear clustering's budget per cell);
``optcnn2018`` (paper 3) builds its layer graphs and clusters itself (``--time-limit`` is its
DFS budget); ``parmesan`` (paper 4) builds its graphs and topologies. Every runner is a
function of :mod:`dnnpart.reproduce`; this module only checks the flags each paper uses.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dnnpart.errors import UsageError

#: Paper key -> what ``dnnpart reproduce KEY`` regenerates.
PAPERS = {
    "tarnawski2020": "paper 1: Tables 1-4, Fig. 8 from the dnn-partitioning workloads",
    "pardnn2021": "paper 2: Tables 4-5, Fig. 3 and partitioning time on zoo captures and the "
                  "synthetic generator",
    "optcnn2018": "paper 3: Table 3, Table 5, Figs. 7-8 (layer-wise vs data/model/OWT) on builtin "
                  "layer graphs",
    "parmesan": "paper 4: Tables 1-2 shapes (two-level 4x4; SemanticFPN on meshes, tori, random "
                "topologies); --methods 1 2 picks tables, --time-limit is per mapping search",
}
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
    p.add_argument("paper", choices=tuple(PAPERS),
                   help="; ".join(f"{k}: {v}" for k, v in PAPERS.items()))
    p.add_argument("--workloads", metavar="DIR",
                   help="tarnawski2020: the dnn-partitioning workloads folder (default: ../shared/"
                        "workloads/dnn-partitioning beside the checkout)")
    p.add_argument("--out", metavar="DIR", default="reproduce-out",
                   help="output folder (default reproduce-out)")
    p.add_argument("--time-limit", type=float, metavar="S",
                   help="seconds per method run (default 1200; 60 with --quick); optcnn2018: the "
                        "DFS budget (default 60; 3 with --quick); pardnn2021: linear clustering's "
                        "budget per cell (default 60; 5 with --quick)")
    p.add_argument("--methods", nargs="+", metavar="NAME",
                   help="only these columns or methods (e.g. dp pipedream scotch)")
    p.add_argument("--only", nargs="+", metavar="KEY",
                   help="only workloads whose key contains one of these (e.g. layer-bert24 op-bert3)")
    p.add_argument("--quick", action="store_true",
                   help="60 s per method, 2 local-search restarts, no IP runs (minutes, not hours); "
                        "optcnn2018: fewer networks and GPU counts (seconds)")
    p.add_argument("--no-figure", action="store_true", help="do not draw the figures")
    p.add_argument("--wall-clock", action="store_true",
                   help="time limits in wall seconds, not deterministic time: the portfolio IP "
                        "then also runs HiGHS, but reruns may differ (default: --deterministic)")
    p.set_defaults(handler=cmd_reproduce)
    return p


def default_workloads() -> Path:
    """``../shared/workloads/dnn-partitioning`` from the working directory, else beside the checkout."""
    here = Path.cwd() / DEFAULT_WORKLOADS
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[3] / DEFAULT_WORKLOADS


def cmd_reproduce(args: argparse.Namespace, out: Any) -> int:
    """Run ``dnnpart reproduce``; progress lines go to stderr through ``out.note``."""
    if args.time_limit is not None and not args.time_limit > 0:
        raise UsageError(f"--time-limit must be > 0 seconds, got {args.time_limit}")
    from dnnpart.cli.output import check_outputs

    check_outputs(out, folders={"--out": args.out})  # a folder, before hours of work
    if args.paper == "optcnn2018":
        return _reproduce_optcnn2018(args, out)
    if args.paper == "pardnn2021":
        return _reproduce_pardnn2021(args, out)
    if args.paper == "parmesan":
        return _reproduce_parmesan(args, out)
    return _reproduce_tarnawski2020(args, out)


def _reproduce_optcnn2018(args: argparse.Namespace, out: Any) -> int:
    from dnnpart.reproduce.optcnn2018 import reproduce_optcnn2018

    for flag in ("workloads", "methods", "only"):
        if getattr(args, flag):
            raise UsageError(f"--{flag} is not used by optcnn2018 (its inputs are builtin layer graphs)")
    report = reproduce_optcnn2018(args.out, quick=args.quick, dfs_budget=args.time_limit,
                                  figure=not args.no_figure, notify=out.note)
    out.note(f"optcnn2018 in {report.wall_time_s:.0f} s")
    for check in report.checks:
        out.note(check)
    for path in report.files:
        out.print(str(path))
    return 0


def _reproduce_parmesan(args: argparse.Namespace, out: Any) -> int:
    from dnnpart.reproduce.parmesan import reproduce_parmesan

    for flag in ("workloads", "only"):
        if getattr(args, flag):
            raise UsageError(f"--{flag} is not used by parmesan (it builds its graphs and topologies)")
    tables = tuple(args.methods) if args.methods else ("1", "2")
    unknown = sorted(set(tables) - {"1", "2"})
    if unknown:
        raise UsageError(f"--methods: parmesan has tables 1 and 2, got {unknown[0]!r}")
    rep = reproduce_parmesan(args.out, quick=args.quick, time_limit=args.time_limit,
                             tables=tables, notify=out.note)
    out.note(f"parmesan: {len(rep.table1)} + {len(rep.table2)} cells in {rep.wall_time_s:.0f} s")
    for path in rep.files:
        out.print(str(path))
    return 0


def _reproduce_tarnawski2020(args: argparse.Namespace, out: Any) -> int:
    from dnnpart.reproduce import reproduce_tarnawski2020
    from dnnpart.reproduce.tarnawski2020 import check_methods
    from dnnpart.reproduce.workloads import find_workloads

    check_methods(args.methods)
    folder = Path(args.workloads) if args.workloads else default_workloads()
    if not find_workloads(folder, args.only):
        raise UsageError(f"no paper-1 workloads found under {folder} (expected throughput/"
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


def _reproduce_pardnn2021(args: argparse.Namespace, out: Any) -> int:
    """Paper 2 brings its own inputs (zoo workloads, generated graphs): no workloads folder."""
    from dnnpart.reproduce.pardnn2021 import reproduce_pardnn2021

    if args.workloads or args.methods or args.no_figure:
        raise UsageError("--workloads/--methods/--no-figure: not used by pardnn2021")
    report = reproduce_pardnn2021(args.out, quick=args.quick, lc_budget=args.time_limit,
                                  only=args.only, notify=out.note)
    out.note(f"{len(report.workloads)} models in {report.wall_time_s:.0f} s")
    for path in report.files:
        out.print(str(path))
    return 0
