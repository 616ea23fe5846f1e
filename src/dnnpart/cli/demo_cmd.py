"""``dnnpart demo [zoo:NAME]``: the main job on a built-in example, explained."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.output import EXIT_NO_PLAN, EXIT_OK
from dnnpart.cli.render import Renderer, fmt

#: The methods compared: the exact DP, its heuristic twin, and the one-device baseline.
DEMO_METHODS = ("dp", "dpl", "one-accelerator")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``demo``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "demo", help="run the main job on a built-in example and explain the result")
    p.add_argument("example", nargs="?", default="zoo:bert-3", help="zoo:NAME (default zoo:bert-3)")
    p.add_argument("--list", action="store_true", help="list the built-in examples")
    p.set_defaults(handler=cmd_demo)
    return p


def cmd_demo(args: argparse.Namespace, out: Renderer) -> int:
    from rich.markup import escape
    from rich.table import Table

    from dnnpart.evaluate import evaluate
    from dnnpart.plan import SolveResult
    from dnnpart.solvers import available_methods, solve
    from dnnpart.viz.report import comparison_rows  # the words of plan --compare
    from dnnpart.workflow import load_problem
    from dnnpart.zoo import list_examples

    if args.list:
        listing = Table(title="Built-in examples", title_justify="left")
        listing.add_column("example", no_wrap=True)
        listing.add_column("what it is")
        for spec, description in list_examples():
            listing.add_row(spec, description)
        out.print(listing)
        return EXIT_OK
    problem = load_problem(args.example)
    g, c = problem.graph, problem.cluster
    out.print(f"[bold]{escape(args.example)}[/]: {g.n_nodes:,} operators, {g.n_edges:,} edges"
              f"{' (training graph)' if g.is_training else ''}; cluster {escape(c.name)}")
    out.print(f"objective: {problem.objective.describe()}; built-in examples are timed in ms")
    registered = {m.name for m in available_methods()}
    results: list[SolveResult] = [solve(problem, name) for name in DEMO_METHODS if name in registered]
    table = Table(title="Methods compared", title_justify="left")
    for col in ("method", "status", "time per sample", "bound", "vs best", "seconds"):
        table.add_column(col, justify="left" if col in ("method", "status") else "right")
    rows = comparison_rows([(r.method, r) for r in results])
    for r, row in zip(results, rows, strict=True):
        table.add_row(r.method, r.status.value, fmt(r.objective), fmt(r.bound), row["vs_best"],
                      f"{r.wall_time_s:.2f}")
    out.print(table)
    winner = min((r for r in results if r.plan is not None), key=lambda r: r.objective, default=None)
    if winner is None:
        return EXIT_NO_PLAN
    plan = winner.require_plan()
    ev = evaluate(problem, plan)
    out.print(out.device_table(problem, plan, ev, title=f"Best plan ({winner.method})"))
    out.print("Try: dnnpart solve zoo:bert-3 --method dp --out plan.json; "
              "dnnpart evaluate zoo:bert-3 plan.json; dnnpart methods")
    return EXIT_OK
