"""``dnnpart info GRAPH``: size, structure, ideals, width, CCR of a graph."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.args import add_problem_args, model_options, objective_from_args
from dnnpart.cli.output import EXIT_OK, dumps
from dnnpart.cli.render import Renderer, fmt, fmt_bytes, safe


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``info``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "info", help="describe a graph: size, structure, ideals, width, CCR")
    add_problem_args(p)
    p.add_argument("--ideal-limit", type=int, default=100_000,
                   help="stop counting ideals here (default 100,000)")
    p.set_defaults(handler=cmd_info)
    return p


def cmd_info(args: argparse.Namespace, out: Renderer) -> int:
    from rich.table import Table

    from dnnpart.workflow import load_problem
    from dnnpart.workflow.summary import graph_summary

    problem = load_problem(args.graph, cluster=args.cluster or None, objective=objective_from_args(args),
                           model=model_options(args))
    s = graph_summary(problem, ideal_limit=args.ideal_limit)
    if out.json_mode:
        out.json(dumps(s))
        return EXIT_OK
    table = Table(title=f"Graph {safe(str(s['name']))}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")

    def count(n: int | None) -> str:
        return f"{n:,}" if n is not None else f"> {s['ideal_limit']:,}"

    rows = [
        ("nodes / edges", f"{s['nodes']:,} / {s['edges']:,}"),
        ("backward nodes", f"{s['backward_nodes']:,}"),
        ("colocation classes (>1 node)", f"{s['colocation_classes_with_several_nodes']:,}"),
        ("unsupported on accelerators", f"{s['unsupported_on_accelerator']:,}"),
        ("total time on CPU / accelerator",
         f"{fmt(s['total_cpu_time'])} / {fmt(s['total_accelerator_time'])}"),
        ("total memory", fmt_bytes(s["total_memory_bytes"])),
        ("critical path (accelerator)", fmt(s["critical_path_accelerator"])),
        ("depth (levels)", f"{s['depth_levels']:,}"),
        ("width (max antichain)", f"{s['width']:,}" + ("" if s["width_exact"] else " (lower bound)")),
        ("ideals", count(s["ideals"]) if s["ideals_counted"] else "not counted (too large)"),
        ("ideals searched by the DP (contracted)", count(s["dp_ideals"])),
        ("CCR (comm / compute)", fmt(s["ccr"])),
        ("avg. degree of parallelism", fmt(s["degree_of_parallelism"])),
    ]
    for row in rows:
        table.add_row(*row)
    out.print(table)
    devs = s["cluster"]["devices"]
    kinds: dict[str, int] = {}
    for d in devs:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    mem = {fmt_bytes(d["memory_bytes"]) for d in devs if d["kind"] == "accelerator"}
    out.print(
        "cluster: " + ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in kinds.items())
        + (f" (accelerator memory {', '.join(sorted(mem))})" if mem else "")
    )
    return EXIT_OK
