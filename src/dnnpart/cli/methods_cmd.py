"""``dnnpart methods``: the available methods and what they guarantee."""

from __future__ import annotations

import argparse
from typing import Any

from dnnpart.cli.output import EXIT_OK, dumps
from dnnpart.cli.render import Renderer


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``methods``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "methods", help="list the available methods and what they guarantee")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_methods)
    return p


def cmd_methods(args: argparse.Namespace, out: Renderer) -> int:
    from rich.markup import escape
    from rich.table import Table

    from dnnpart.solvers import available_methods

    methods = available_methods()
    if out.json_mode:
        out.json(dumps([
            {"name": m.name, "summary": m.summary, "guarantee": m.guarantee,
             "objectives": list(m.objectives), "exact": m.exact, "source": m.source,
             "default_time_limit_s": m.default_time_limit,
             "options": [{"name": o.name, "type": o.describe_type(),
                          "default": o.default if isinstance(o.default, (int, float, str, bool))
                          or o.default is None else str(o.default), "doc": o.doc}
                         for o in m.options]}
            for m in methods
        ]))
        return EXIT_OK
    table = Table(title="Methods", title_justify="left")
    for col in ("method", "objectives", "guarantee", "what it does", "options (--set KEY=VALUE)"):
        table.add_column(col)
    for m in methods:
        opts = "\n".join(f"{o.name}: {o.describe_type()} = {o.default!r}" for o in m.options)
        limit = m.default_time_limit
        summary = m.summary + (f" (default --time-limit {limit:g} s)" if limit is not None else "")
        table.add_row(m.name, ", ".join(m.objectives), m.guarantee, summary, escape(opts) or "-")
    out.print(table)
    return EXIT_OK
